"""`/gbr/mcp/1.1.0` against real `gbr-node serve` processes (issue 35): many calls in
flight on one kept stream (`McpStreams`, what the node's agent calls peers with), each
admitted as 1.0.0 admits a stream (GBR-DOS-01), one call withdrawn without disturbing the
others, a serving process that dies failing every call in flight with its own error.

The caller is this process (a real py-libp2p host on 127.0.0.1); the serving node is a
separate process, so what crosses between them really crosses a socket.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from gbr_node.errors import PeerUnreachable
from gbr_node.p2p.host import open_host
from gbr_node.p2p.mcp_streams import McpStreams
from gbr_node.rpc.codes import UnauthorizedPeer
from gbr_node.rpc.limits import Limits
from tests.e2e.p2p_helpers import (
    Identity,
    ServeProcess,
    children_running,
    is_running,
    write_serving_profile,
)

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="reads /proc"),
    pytest.mark.slow,
]

LIMIT = 32
LIMITS = Limits(call_timeout_s=30)


def read_notes() -> dict[str, Any]:
    return {"name": "read_file", "arguments": {"path": "notes.txt"}}


def sleep_30() -> dict[str, Any]:
    return {"name": "run_command", "arguments": {"argv": ["sleep", "30"]}}


@pytest.fixture
def served(tmp_path: Path):
    alice = Identity(tmp_path / "alice.key")
    root = tmp_path / "served"
    root.mkdir()
    (root / "notes.txt").write_text("line one\nline two\n")
    write_serving_profile(
        root,
        {"alice": (alice.peer_id, ["read_file", "run_command"])},
        node=f"max_concurrent_calls_per_peer = {LIMIT}",
        extra='[tools.run_command]\nallow = ["sleep"]',
    )
    server = ServeProcess(root, tmp_path / "home", Identity(tmp_path / "server.key"))
    yield server, alice, tmp_path
    server.stop()


async def test_callers_at_exactly_the_limit_of_a_serving_process_never_get_busy(served) -> None:
    """32 workers, each sending its next call as soon as it has its answer, with a limit
    of 32, all on one kept stream: 800 answers, no -32005 (a slot is free before its
    answer leaves the serving process)."""
    server, alice, _ = served
    async with open_host(alice.keypair, [], is_trusted=lambda _: False) as host:
        streams = McpStreams(host)

        async def worker() -> None:
            for _ in range(25):
                result = await streams.call(server.addr, "tools/call", read_notes(), limits=LIMITS)
                assert "line two" in result["content"][0]["text"]

        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                for _ in range(LIMIT):
                    nursery.start_soon(worker)
        await streams.aclose()
    server.wait_count(r"^alice read_file ok \d+ ms$", LIMIT * 25)


async def test_one_call_withdrawn_kills_its_command_there_and_the_others_finish(served) -> None:
    server, alice, _ = served
    async with open_host(alice.keypair, [], is_trusted=lambda _: False) as host:
        streams = McpStreams(host)
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                with trio.move_on_after(30) as waiting:
                    cancel = trio.CancelScope()

                    async def doomed() -> None:
                        with cancel:
                            await streams.call(server.addr, "tools/call", sleep_30(), limits=LIMITS)

                    nursery.start_soon(doomed)
                    while not (sleepers := children_running(server.proc.pid, "sleep")):
                        await trio.sleep(0.02)
                    results = [
                        await streams.call(server.addr, "tools/call", read_notes(), limits=LIMITS)
                        for _ in range(3)
                    ]
                    cancel.cancel()
                    went = trio.current_time()
                    while any(is_running(pid) for pid in sleepers):
                        await trio.sleep(0.01)
                    stopped = trio.current_time() - went
                    after = await streams.call(
                        server.addr, "tools/call", read_notes(), limits=LIMITS
                    )
                assert not waiting.cancelled_caught
    assert stopped < 1.0, f"the withdrawn command ran on for {stopped:.2f} s"
    assert all("line two" in r["content"][0]["text"] for r in [*results, after])
    server.wait_line(r"^alice run_command caller cancelled \d+ ms$")


async def test_a_serving_process_killed_fails_every_call_in_flight_at_once(served) -> None:
    server, alice, _ = served
    failures: list[BaseException] = []
    async with open_host(alice.keypair, [], is_trusted=lambda _: False) as host:
        streams = McpStreams(host)

        async def in_flight() -> None:
            try:
                await streams.call(server.addr, "tools/call", sleep_30(), limits=LIMITS)
            except PeerUnreachable as exc:
                failures.append(exc)

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(in_flight)
                while len(children_running(server.proc.pid, "sleep")) < 3:
                    await trio.sleep(0.02)
                killed = trio.current_time()
                server.kill()
            failed_within = trio.current_time() - killed
    assert len(failures) == 3, failures
    assert failed_within < 2.0
    assert all("broke" in str(exc) or "reset" in str(exc) for exc in failures), failures


async def test_an_untrusted_peer_opening_1_1_0_is_refused_and_nothing_runs(served) -> None:
    server, _, tmp = served
    stranger = Identity(tmp / "stranger.key")
    async with open_host(stranger.keypair, [], is_trusted=lambda _: False) as host:
        streams = McpStreams(host)
        with trio.fail_after(30), pytest.raises(UnauthorizedPeer):
            await streams.call(server.addr, "tools/call", sleep_30(), limits=LIMITS)
        with trio.fail_after(10):
            while server.peer_id in host.connected_peers():
                await trio.sleep(0.05)
    assert children_running(server.proc.pid, "sleep") == []
    line = server.wait_line(r"unauthorized peer")
    assert json.dumps(stranger.peer_id[:6])[1:-1] in line
