"""LAN discovery with mDNS (issue 23, `[node] mdns = true`): real `gbr-node` processes on
one bridge between network namespaces find each other; discovery never grants trust."""

from __future__ import annotations

import json
import time

from tests.e2e.conftest import spawn_node
from tests.e2e.p2p_helpers import Identity, ServeProcess, gbr_call
from tests.e2e.terminal import Terminal
from tests.netns.relays import peer, write_profile
from tests.support.netns import one_lan


def test_nodes_on_one_lan_find_each_other_and_discovery_grants_no_trust(tmp_path) -> None:
    ids = {role: Identity(tmp_path / f"{role}.key") for role in ("x", "y", "z")}
    with one_lan(("x", "y", "z")) as lab:
        write_profile(
            tmp_path / "y",
            node="mdns = true",
            peers=peer("x", ids["x"].peer_id, tools='["read_file"]'),
        )
        (tmp_path / "y" / "hello.txt").write_text("found on the LAN\n", encoding="utf-8")
        write_profile(tmp_path / "z", node="mdns = true")
        # X trusts Y, names no address for it; Z is a stranger to X
        write_profile(
            tmp_path / "x",
            node=f'mdns = true\nlisten = ["/ip4/{lab.addr["x"]}/tcp/4600"]',
            peers=peer("y", ids["y"].peer_id),
        )
        servers = [
            ServeProcess(
                tmp_path / role,
                tmp_path / f"home-{role}",
                ids[role],
                f"/ip4/{lab.addr[role]}/tcp/0",
                lab.argv(role, []),
            )
            for role in ("y", "z")
        ]
        try:
            child = spawn_node(
                tmp_path / "x",
                "run",
                home=tmp_path / "home-x",
                identity=ids["x"].path,
                env={"GBR_LOCAL_MODEL": "0"},
                wrap=lab.argv("x", []),
            )
            term = Terminal(child, timeout_s=30)
            term.expect("finding peers on the LAN")
            deadline = time.monotonic() + 30
            while True:
                term.sendline("/peers")
                term.expect_new(r"idle · ")
                seen = term.transcript().rsplit("› /peers", 1)[-1]
                if "on the LAN" in seen and ids["z"].peer_id in seen:
                    break
                assert time.monotonic() < deadline, seen
                time.sleep(1)
            assert "y            on the LAN" in seen
            assert "found on the LAN, not trusted" in seen.split(ids["z"].peer_id)[0]
            term.sendline("/dial y")  # no address in the profile: the one mDNS found
            term.expect_new(r"connected to y \(.*\); tools granted to us: read_file")
            # `gbr-node call` by alias browses for the address too
            called = gbr_call(
                tmp_path / "x",
                tmp_path / "home-x2",
                ids["x"],
                "y",
                "read_file",
                json.dumps({"path": "hello.txt"}),
                wrap=lab.argv("x", []),
            )
            assert called.returncode == 0, called.stderr
            assert "found on the LAN" in called.stdout
            # Z found X on the LAN too, and is still refused: it is not trusted there
            stranger = gbr_call(
                tmp_path / "z",
                tmp_path / "home-z",
                ids["z"],
                f"/ip4/{lab.addr['x']}/tcp/4600/p2p/{ids['x'].peer_id}",
                "read_file",
                json.dumps({"path": "hello.txt"}),
                wrap=lab.argv("z", []),
            )
            assert stranger.returncode == 3, (stranger.stdout, stranger.stderr)
            assert "does not trust your peer ID" in stranger.stderr
        finally:
            for server in servers:
                server.kill()
