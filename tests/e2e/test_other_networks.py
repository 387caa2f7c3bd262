"""Issue 23's profile keys at the command line: `gbr-node id` gives the announced and
relayed addresses, and a relay that cannot be reached is named in the error."""

from __future__ import annotations

from tests.e2e.conftest import gbr
from tests.e2e.p2p_helpers import Identity, ServeProcess, write_serving_profile

RELAY = "/ip4/203.0.113.7/tcp/4001/p2p/12D3KooWBwWFwNgcJhE2qEsL3ewZHApd6s68SSUBGAiVwXHre1E7"
PEER = "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo"


def _project(tmp_path, text: str):
    project = tmp_path / "project"
    (project / ".gbr_envs").mkdir(parents=True)
    (project / ".gbr_envs" / "default.toml").write_text(text)
    return project


def test_id_prints_the_announced_addresses_instead_of_the_bound_ones(tmp_path) -> None:
    project = _project(
        tmp_path,
        '[node]\nlisten = ["/ip4/0.0.0.0/tcp/4001"]\nannounce = ["/ip4/203.0.113.5/tcp/4001"]\n',
    )
    out = gbr(project, "id")
    assert out.returncode == 0, out.stderr
    peer_id, *addrs = out.stdout.split()
    assert addrs == [f"/ip4/203.0.113.5/tcp/4001/p2p/{peer_id}"]


def test_id_refuses_a_wildcard_announce_saying_why(tmp_path) -> None:
    project = _project(tmp_path, '[node]\nannounce = ["/ip4/0.0.0.0/tcp/4001"]\n')
    out = gbr(project, "env", "check")
    assert out.returncode == 1
    assert "node.announce" in out.stderr and "not an address others can dial" in out.stderr


def test_id_prints_a_circuit_address_per_relay(tmp_path) -> None:
    project = _project(
        tmp_path, f'[node]\nlisten = ["/ip4/127.0.0.1/tcp/4001"]\nrelays = ["{RELAY}"]\n'
    )
    out = gbr(project, "id")
    assert out.returncode == 0, out.stderr
    peer_id, *addrs = out.stdout.split()
    assert addrs == [
        f"/ip4/127.0.0.1/tcp/4001/p2p/{peer_id}",
        f"{RELAY}/p2p-circuit/p2p/{peer_id}",
    ]


def test_a_call_to_an_unreachable_relay_says_which_relay_and_why(tmp_path) -> None:
    dead_relay = "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWBwWFwNgcJhE2qEsL3ewZHApd6s68SSUBGAiVwXHre1E7"
    project = _project(
        tmp_path,
        f'[peers.bob]\npeer_id = "{PEER}"\naddrs = ["{dead_relay}/p2p-circuit"]\n',
    )
    out = gbr(project, "call", "bob", "--list")
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert "connection refused" in out.stderr and "/ip4/127.0.0.1/tcp/1" in out.stderr
    assert "internal error" not in out.stderr


def test_a_reloaded_relay_setting_says_it_waits_for_the_next_start(tmp_path) -> None:
    r = Identity(tmp_path / "r.key")
    project = tmp_path / "served"
    profile = write_serving_profile(project, {})
    served = ServeProcess(project, tmp_path / "home", r)
    try:
        text = profile.read_text().replace("[node]\n", "[node]\nrelay = true\nmdns = true\n", 1)
        profile.write_text(text)
        served.wait_line(r"\[node\] relay, mdns changed: in force at the next start", 30)
    finally:
        served.kill()


def test_id_says_when_the_profile_does_not_load(tmp_path) -> None:
    project = _project(tmp_path, '[node]\nrelay_for = "trustd"\n')
    out = gbr(project, "id")
    assert out.returncode == 1
    peer_id = out.stdout.strip()
    assert peer_id.startswith("12D3KooW") and "\n" not in peer_id  # the ID, and no address
    assert "[node.relay_for]" in out.stderr and "trustd" in out.stderr


def test_a_relay_that_is_no_relay_is_named_as_such(tmp_path) -> None:
    r, b = Identity(tmp_path / "r.key"), Identity(tmp_path / "b.key")
    write_serving_profile(tmp_path / "r", {"b": (b.peer_id, [])})
    not_a_relay = ServeProcess(tmp_path / "r", tmp_path / "home-r", r)  # no --relay
    try:
        write_serving_profile(tmp_path / "b", {}, node=f'relays = ["{not_a_relay.addr}"]')
        served = ServeProcess(tmp_path / "b", tmp_path / "home-b", b)
        try:
            served.wait_line(
                r"no reservation on relay .*: not a relay\? the peer does not support protocol "
                r"/libp2p/circuit/relay/0\.2\.0/hop \(a relay runs serve --relay\)",
                30,
            )
        finally:
            served.kill()
    finally:
        not_a_relay.kill()
