"""Peers on other networks through a relay (issue 23), with real `gbr-node` processes in
the netns lab: A and B each behind their own NAT, R on the public network between them.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e.conftest import spawn_node
from tests.e2e.p2p_helpers import children_running, start_call
from tests.e2e.terminal import Terminal
from tests.netns.relays import B_FILE, peer, relayed_world, wait_reachable, write_profile
from tests.support.model_server import ModelServer
from tests.support.netns import made_inside
from tests.support.replies import text_reply, tool_call_reply

READ = ("read_file", json.dumps({"path": "hello.txt"}))
WAN_B = "10.23.0.12"
"""B's router's address on the public network (tests/support/netns.py)."""


def test_a_calls_a_tool_of_b_behind_another_nat_through_the_relay(tmp_path) -> None:
    with relayed_world(tmp_path) as world:
        wait_reachable(world.b, world.r.addr)
        # what R sees of B is B's router, shown for the person, never announced
        world.b.wait_line(rf"the relay sees this node come from /ip4/{WAN_B}/tcp/\d+$")
        by_alias = world.call("a", "b", *READ)
        assert by_alias.returncode == 0, by_alias.stderr
        assert B_FILE.strip() in by_alias.stdout
        by_address = world.call("a", world.circuit, *READ)
        assert by_address.returncode == 0, by_address.stderr
        assert B_FILE.strip() in by_address.stdout
        # B served both calls as from its trusted peer `a`, R in between, and R says so
        world.b.wait_count(r"^a read_file ok \d+ ms$", 2)
        world.r.wait_line(r"^relay: reservation for b \(3600 s")
        world.r.wait_count(r"^relay: circuit a -> b open$", 2)


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


def test_the_repl_calls_bs_tool_and_messages_b_through_the_relay(tmp_path) -> None:
    with relayed_world(tmp_path) as world:
        wait_reachable(world.b, world.r.addr)
        # the scripted model listens inside A's namespace, where `run` reaches it
        model = made_inside(world.lab, "a", lambda: ModelServer(model="test-model")).start()
        try:
            write_profile(
                world.project("a"),
                node='listen = ["/ip4/0.0.0.0/tcp/0"]',
                peers=peer(
                    "b",
                    world.ids["b"].peer_id,
                    addrs=[f"{world.r.addr}/p2p-circuit"],
                    chat="show",
                ),
                extra=f'[model]\nbase_url = "{model.base_url}"\nmodel = "test-model"\n'
                'api_key_env = "GBR_TEST_KEY"\n',
            )
            model.enqueue(
                tool_call_reply("b__read_file", {"path": "hello.txt"}),
                text_reply("B keeps the answer behind its NAT."),
            )
            child = spawn_node(
                world.project("a"),
                "run",
                home=tmp_path / "home-a",
                identity=world.ids["a"].path,
                wrap=world.lab.argv("a", []),
            )
            term = Terminal(child, timeout_s=60)
            term.expect("/help for commands")
            term.sendline("/dial b")
            term.expect_new("connected to b")
            term.sendline("what does b have?")
            term.expect_new(r"✓ b__read_file @b path=hello.txt \d+ ms")
            term.expect_new("B keeps the answer behind its NAT.")
            assert B_FILE.strip() in model.chat_bodies[1]["messages"][-1]["content"]
            term.sendline("/msg b hello through the relay")
            term.expect_new(r"→ b · message \w+ delivered")
            world.b.wait_line("hello through the relay")
        finally:
            model.stop()


@pytest.mark.parametrize(("nat", "upgraded"), [("port-preserving", True), ("random-port", False)])
def test_hole_punching_upgrades_a_relayed_connection_where_the_nats_allow_it(
    tmp_path, nat, upgraded
) -> None:
    """DCUtR: through two port-preserving NATs the simultaneous TCP open gets through and
    later calls go direct; through random-port NATs it cannot, and calls keep using R."""
    with relayed_world(tmp_path, nat=nat, b_node=f'announce = ["/ip4/{WAN_B}/tcp/4400"]') as world:
        wait_reachable(world.b, world.r.addr)
        write_profile(
            world.project("a"),
            node=f'listen = ["/ip4/{world.lab.addr["a"]}/tcp/4500"]\n'
            f'announce = ["/ip4/{world.lab.addr["router_a"]}/tcp/4500"]',
            peers=peer("b", world.ids["b"].peer_id, addrs=[f"{world.r.addr}/p2p-circuit"]),
        )
        child = spawn_node(
            world.project("a"),
            "run",
            home=tmp_path / "home-a",
            identity=world.ids["a"].path,
            env={"GBR_LOCAL_MODEL": "0"},
            wrap=world.lab.argv("a", []),
        )
        term = Terminal(child, timeout_s=60)
        term.expect("/help for commands")
        term.sendline("/dial b")
        term.expect_new("connected to b")
        log = world.project("a") / ".gbr" / "node.log"
        deadline = time.monotonic() + 60
        while "hole punching to" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        term.sendline("/peers")
        state = "connected  " if upgraded else r"connected \(relayed\)"
        term.expect_new(rf"  b\s+{state}\s+{world.ids['b'].peer_id}")
        assert ("direct" if upgraded else "relayed") in log.read_text().split("hole punching to")[
            -1
        ]
        # a call still gets through, on the connection /peers showed
        out = world.call("a", "b", *READ)
        assert out.returncode == 0, out.stderr
