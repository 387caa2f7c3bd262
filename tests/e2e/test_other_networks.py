"""Issue 23's profile keys at the command line: `gbr-node id` gives the announced
addresses, and the keys this version loads but does not yet run refuse to start
instead of being silently ignored (fail closed)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import gbr

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


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (f'[node]\nlisten = ["/ip4/127.0.0.1/tcp/0"]\nrelays = ["{RELAY}"]\n', "[node] relays"),
        ('[node]\nlisten = ["/ip4/127.0.0.1/tcp/0"]\nrelay = true\n', "[node] relay"),
        ('[node]\nlisten = ["/ip4/127.0.0.1/tcp/0"]\nmdns = true\n', "[node] mdns"),
        (
            f'[node]\nlisten = ["/ip4/127.0.0.1/tcp/0"]\n[peers.bob]\npeer_id = "{PEER}"\n'
            f'addrs = ["{RELAY}/p2p-circuit/p2p/{PEER}"]\n',
            "[peers.bob] addrs (/p2p-circuit)",
        ),
    ],
)
def test_serve_run_and_call_refuse_what_this_version_cannot_do_yet(tmp_path, text, key) -> None:
    project = _project(tmp_path, text)
    call = ("call", "bob" if "peers.bob" in text else PEER, "--list")
    for argv in (("serve",), ("run",), call):
        out = gbr(project, *argv)
        assert out.returncode != 0
        assert f"{key}: not in force in this version yet" in out.stderr, argv
        assert "internal error" not in out.stderr
    assert not (project / ".gbr").exists()  # refused before the node made anything
