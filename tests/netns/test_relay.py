"""Peers on other networks through a relay (issue 23), with real `gbr-node` processes in
the netns lab: A and B each behind their own NAT, R on the public network between them.
"""

from __future__ import annotations

import json
import time

from tests.e2e.p2p_helpers import children_running, start_call
from tests.netns.relays import B_FILE, relayed_world, wait_reachable

READ = ("read_file", json.dumps({"path": "hello.txt"}))


def test_a_calls_a_tool_of_b_behind_another_nat_through_the_relay(tmp_path) -> None:
    with relayed_world(tmp_path) as world:
        wait_reachable(world.b, world.r.addr)
        by_alias = world.call("a", "b", *READ)
        assert by_alias.returncode == 0, by_alias.stderr
        assert B_FILE.strip() in by_alias.stdout
        by_address = world.call("a", world.circuit, *READ)
        assert by_address.returncode == 0, by_address.stderr
        assert B_FILE.strip() in by_address.stdout
        # B served both calls as from its trusted peer `a`, R in between
        world.b.wait_count(r"^a read_file ok \d+ ms$", 2)


def test_an_untrusted_peer_is_refused_by_b_even_through_a_trusted_relay(tmp_path) -> None:
    # R relays for C (it trusts C); B does not trust C: trust is end to end.
    with relayed_world(tmp_path, r_trusts=("a", "b", "c")) as world:
        wait_reachable(world.b, world.r.addr)
        out = world.call("c", "b", *READ)
        assert out.returncode == 3, (out.stdout, out.stderr)
        assert "does not trust your peer ID" in out.stderr, out.stderr
        assert B_FILE.strip() not in out.stdout
        world.b.wait_line(r"^12D3Ko…\S+ - unauthorized peer \d+ ms$")


def test_a_relay_refuses_peers_it_does_not_relay_for_and_says_so(tmp_path) -> None:
    # R trusts only A: B's reservation is refused, and A's call says why it fails.
    with relayed_world(tmp_path, r_trusts=("a",)) as world:
        world.b.wait_line(r"no reservation on relay .*does not relay for us", 30)
        out = world.call("a", "b", *READ)
        assert out.returncode == 3, (out.stdout, out.stderr)
        assert "holds no reservation for the peer" in out.stderr, out.stderr


def test_the_relay_killed_mid_call_is_an_error_result_and_the_reservation_comes_back(
    tmp_path,
) -> None:
    with relayed_world(tmp_path) as world:
        wait_reachable(world.b, world.r.addr)
        caller = start_call(
            world.project("a"),
            tmp_path / "home-a",
            world.ids["a"],
            "b",
            "run_command",
            json.dumps({"argv": ["sleep", "37"]}),
            wrap=world.lab.argv("a", []),
        )
        try:
            deadline = time.monotonic() + 30
            while not children_running(world.b.proc.pid, "sleep"):
                assert time.monotonic() < deadline and caller.poll() is None, caller.communicate()
                time.sleep(0.05)
            world.r.kill()
            out, err = caller.communicate(timeout=30)  # far below the call's 120 s limit
            assert caller.returncode == 3, (out, err)
        finally:
            if caller.poll() is None:
                caller.kill()
        world.b.wait_line(r"relay \S+ gone: reserving again", 30)
        world.restart_r()
        wait_reachable(world.b, world.r.addr, times=2, timeout_s=40)
        again = world.call("a", "b", *READ)
        assert again.returncode == 0, again.stderr
        assert B_FILE.strip() in again.stdout
