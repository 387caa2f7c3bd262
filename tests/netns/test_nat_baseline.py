"""Real `gbr-node serve` / `call` processes in the netns lab (issue 23): where the
relays of issue 23 start from. A node behind its home NAT calls a node on the
public network; a node behind another NAT cannot be dialed directly, and the call
says so instead of hanging."""

from __future__ import annotations

import json

from tests.e2e.p2p_helpers import Identity, ServeProcess, gbr_call, write_serving_profile
from tests.support.netns import home_networks


def test_a_node_behind_its_nat_calls_a_tool_on_the_public_network(tmp_path) -> None:
    a, r = Identity(tmp_path / "a.key"), Identity(tmp_path / "r.key")
    project = tmp_path / "r_project"
    write_serving_profile(project, {"a": (a.peer_id, ["read_file"])})
    (project / "hello.txt").write_text("hello from R\n")
    with home_networks() as lab:
        served = ServeProcess(
            project, tmp_path / "r_home", r, f"/ip4/{lab.addr['r']}/tcp/0", lab.argv("r", [])
        )
        try:
            out = gbr_call(
                tmp_path,
                tmp_path / "a_home",
                a,
                served.addr,
                "read_file",
                json.dumps({"path": "hello.txt"}),
                wrap=lab.argv("a", []),
            )
            assert out.returncode == 0, out.stderr
            assert "hello from R" in out.stdout
            # R logged the call as from its trusted peer `a`, the NAT in between.
            served.wait_line(r"\ba\b.*read_file")
        finally:
            served.kill()


def test_a_node_behind_another_nat_is_unreachable_directly_and_the_call_says_so(
    tmp_path,
) -> None:
    a, b = Identity(tmp_path / "a.key"), Identity(tmp_path / "b.key")
    project = tmp_path / "b_project"
    write_serving_profile(project, {"a": (a.peer_id, ["read_file"])})
    with home_networks() as lab:
        served = ServeProcess(
            project, tmp_path / "b_home", b, f"/ip4/{lab.addr['b']}/tcp/0", lab.argv("b", [])
        )
        try:
            out = gbr_call(
                tmp_path,
                tmp_path / "a_home",
                a,
                served.addr,
                "read_file",
                json.dumps({"path": "hello.txt"}),
                wrap=lab.argv("a", []),
            )
            assert out.returncode == 3, (out.stdout, out.stderr)
            assert b.peer_id in out.stderr, out.stderr
            assert "unreachable" in out.stderr.lower(), out.stderr
        finally:
            served.kill()
