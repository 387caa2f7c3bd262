"""`[node]` keys for peers on other networks (issue 23): relays, the relay role,
announced addresses, mDNS, and relayed `[peers.X] addrs`."""

from __future__ import annotations

import pytest

from gbr_node.config.loader import load_profile
from gbr_node.errors import ProfileError

RELAY = "12D3KooWBwWFwNgcJhE2qEsL3ewZHApd6s68SSUBGAiVwXHre1E7"
PEER = "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo"


def test_the_defaults_keep_a_node_on_its_own_network(project, write_profile) -> None:
    write_profile("default", "max_steps = 8\n")
    node = load_profile(project).profile.node
    assert (node.relays, node.announce, node.relay, node.mdns) == ((), (), False, False)
    assert node.relay_for == "trusted"


def test_relays_relay_role_announce_and_mdns_load(project, write_profile) -> None:
    write_profile(
        "default",
        f'[node]\nrelays = ["/ip4/203.0.113.7/tcp/4001/p2p/{RELAY}"]\nrelay = true\n'
        'relay_for = "any"\nannounce = ["/ip4/203.0.113.5/tcp/4001"]\nmdns = true\n'
        "relay_max_circuits = 2\nrelay_circuit_bytes = 1048576\nrelay_circuit_s = 60\n",
    )
    node = load_profile(project).profile.node
    assert node.relays == (f"/ip4/203.0.113.7/tcp/4001/p2p/{RELAY}",)
    assert (node.relay, node.relay_for, node.mdns) == (True, "any", True)
    assert (node.relay_max_circuits, node.relay_circuit_bytes, node.relay_circuit_s) == (
        2,
        1048576,
        60,
    )


def test_a_peer_may_be_listed_at_a_relayed_address(project, write_profile) -> None:
    circuit = f"/ip4/203.0.113.7/tcp/4001/p2p/{RELAY}/p2p-circuit/p2p/{PEER}"
    write_profile(
        "default",
        f'[peers.bob]\npeer_id = "{PEER}"\naddrs = ["/ip4/192.0.2.10/tcp/4001", "{circuit}"]\n',
    )
    assert load_profile(project).profile.peers["bob"].addrs[1] == circuit


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        (
            '[node]\nannounce = ["/ip4/0.0.0.0/tcp/4001"]\n',
            "node.announce",
            "is a wildcard, not an address others can dial",
        ),
        ('[node]\nannounce = ["/ip6/::/tcp/4001"]\n', "node.announce", "wildcard"),
        (
            '[node]\nrelays = ["/ip4/203.0.113.7/tcp/4001"]\n',
            "node.relays",
            "a relay's TCP multiaddr with its peer ID",
        ),
        ('[node]\nrelay_for = "everyone"\n', "node.relay_for", "trusted"),
        ("[node]\nrelay_circuit_s = 0\n", "node.relay_circuit_s", "at least"),
        (
            f'[peers.bob]\npeer_id = "{PEER}"\naddrs = ["/p2p-circuit/p2p/{PEER}"]\n',
            "peers.bob.addrs",
            "RELAY/p2p-circuit",
        ),
    ],
)
def test_bad_values_are_refused_at_load_saying_what_is_wanted(
    project, write_profile, text, key, words
) -> None:
    write_profile("default", text)
    with pytest.raises(ProfileError) as caught:
        load_profile(project, "default")
    assert caught.value.key is not None and caught.value.key.startswith(key)
    assert words in str(caught.value)
