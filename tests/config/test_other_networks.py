"""`[node]` keys for peers on other networks (issue 23): relays, the relay role,
announced addresses, mDNS, and relayed `[peers.X] addrs`."""

from __future__ import annotations

import re

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


@pytest.mark.parametrize(
    ("table", "line", "says"),
    [
        ("node", 'relays = ["/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWbad"]', "node.relays"),
        ("node", f'relays = ["/ip4/999.1.1.1/tcp/4001/p2p/{RELAY}"]', "999.1.1.1 is not an ip4"),
        ("node", f'relays = ["/ip4/203.0.113.7/tcp/99999/p2p/{RELAY}"]', "port 99999 is not"),
        ("node", f'relays = ["/ip4/203.0.113.7/tcp/0/p2p/{RELAY}"]', "port 0 is not"),
        ("node", f'relays = ["/ip4/0.0.0.0/tcp/4001/p2p/{RELAY}"]', "is a wildcard"),
        ("node", 'announce = ["/ip4/999.1.1.1/tcp/4001"]', "999.1.1.1 is not an ip4"),
        ("node", 'announce = ["/ip6/::zz/tcp/4001"]', "::zz is not an ip6"),
        ("node", 'listen = ["/ip4/127.0.0.1/tcp/70000"]', "port 70000 is not"),
        (
            "peers.bob",
            f'addrs = ["/ip4/203.0.113.7/tcp/4001/p2p/{RELAY}/p2p-circuit/p2p/{RELAY}"]',
            f"ends in peer {RELAY}, not this peer's peer_id",
        ),
        ("peers.bob", f'addrs = ["/ip4/127.0.0.1/tcp/4001/p2p/{RELAY}"]', "not this peer's"),
        ("peers.bob", 'addrs = ["/ip4/256.0.0.1/tcp/4001"]', "256.0.0.1 is not an ip4"),
    ],
)
def test_an_address_that_cannot_be_dialed_is_refused_when_the_profile_loads(
    project, write_profile, table, line, says
) -> None:
    """Each caught when the profile loads, naming it (GBR-FAIL-01), not when the node
    dials it (it stopped `serve` with an internal error, or `call` with a traceback)."""
    peer_id = f'peer_id = "{PEER}"\n' if table.startswith("peers") else ""
    write_profile("default", f"[{table}]\n{peer_id}{line}\n")
    with pytest.raises(ProfileError, match=re.escape(says)):
        load_profile(project)
