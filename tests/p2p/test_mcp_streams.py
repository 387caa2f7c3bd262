"""`McpStreams` (p2p/mcp_streams.py) between two real hosts on 127.0.0.1: Noise, Yamux,
multistream-select and the serving side of `/gbr/mcp/1.1.0` and 1.0.0 as the node runs them.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from gbr_node.errors import StreamBroken
from gbr_node.p2p import mcp_streams
from gbr_node.p2p.host import P2PHost
from gbr_node.p2p.mcp_streams import MCP_PIPELINED, MCP_PROTOCOL, McpStreams
from gbr_node.p2p.stream import Libp2pByteStream
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.pipelined import serve_pipelined
from gbr_node.rpc.server import RpcServer
from tests.p2p.helpers import running_host
from tests.rpc.pipes import GatedHost

LIMITS = Limits(call_timeout_s=10)


def echo(text: str, held: bool = False) -> dict[str, Any]:
    return {"name": "echo", "arguments": {"text": text, "held": held}}


class Serving:
    """The serving side on `host`: 1.1.0 (unless `only_1_0`) and 1.0.0, counting streams."""

    def __init__(self, host: P2PHost, only_1_0: bool = False, **limits: Any) -> None:
        self.host = GatedHost(trusted=set())
        self.server = RpcServer(self.host, Limits(**limits))
        self.streams = {MCP_PIPELINED: 0, MCP_PROTOCOL: 0}
        self.first: list[Any] = []  # handlers for the next 1.1.0 streams, in turn
        host.set_stream_handler(MCP_PROTOCOL, self._one_per_stream)
        if not only_1_0:
            host.set_stream_handler(MCP_PIPELINED, self._pipelined)

    def trust(self, peer_id: str) -> None:
        self.host.trusted.add(peer_id)

    async def _one_per_stream(self, stream: Libp2pByteStream, peer_id: str) -> None:
        self.streams[MCP_PROTOCOL] += 1
        await self.server.handle_stream(stream, peer_id)

    async def _pipelined(self, stream: Libp2pByteStream, peer_id: str) -> None:
        self.streams[MCP_PIPELINED] += 1
        if self.first:
            await self.first.pop(0)(stream)
        else:
            await serve_pipelined(self.server, stream, peer_id)


async def calls(streams: McpStreams, target: str, texts: list[str]) -> dict[str, str]:
    got: dict[str, str] = {}

    async def one(text: str) -> None:
        result = await streams.call(target, "tools/call", echo(text), limits=LIMITS)
        got[text] = result["content"][0]["text"]

    async with trio.open_nursery() as nursery:
        for text in texts:
            nursery.start_soon(one, text)
    return got


async def test_a_hundred_concurrent_calls_share_one_kept_stream() -> None:
    async with running_host() as caller, running_host() as served:
        serving = Serving(served, max_concurrent_calls_per_peer=100)
        serving.trust(caller.peer_id)
        streams = McpStreams(caller)
        texts = [f"t{n}" for n in range(100)]
        with trio.fail_after(30):
            assert await calls(streams, served.addrs[0], texts) == {t: t for t in texts}
            assert await calls(streams, served.addrs[0], ["again"]) == {"again": "again"}
        await streams.aclose()
    assert serving.streams == {MCP_PIPELINED: 1, MCP_PROTOCOL: 0}


async def test_a_peer_that_speaks_only_1_0_0_gets_a_new_stream_per_call() -> None:
    async with running_host() as caller, running_host() as served:
        serving = Serving(served, only_1_0=True)
        serving.trust(caller.peer_id)
        streams = McpStreams(caller)
        with trio.fail_after(30):
            texts = [f"t{n}" for n in range(5)]
            assert await calls(streams, served.addrs[0], texts) == {t: t for t in texts}
    assert serving.streams == {MCP_PIPELINED: 0, MCP_PROTOCOL: 5}


async def test_callers_at_exactly_the_peer_limit_never_get_busy() -> None:
    """Each worker sends its next call as soon as it has its answer, 20 at a time with a
    limit of 20: the slot of an answer is free before the caller can learn of it."""
    async with running_host() as caller, running_host() as served:
        serving = Serving(served, max_concurrent_calls_per_peer=20)
        serving.trust(caller.peer_id)
        streams = McpStreams(caller)

        async def worker(n: int) -> None:
            for m in range(25):
                await streams.call(served.addrs[0], "tools/call", echo(f"{n}.{m}"), limits=LIMITS)

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for n in range(20):
                    nursery.start_soon(worker, n)
    assert len(serving.host.finished) == 500


async def test_a_reset_stream_fails_only_its_calls_and_the_next_call_opens_a_new_one() -> None:
    async with running_host() as caller, running_host() as served:
        serving = Serving(served)
        serving.trust(caller.peer_id)
        got_three = trio.Event()

        async def reset_after_three(stream: Libp2pByteStream) -> None:
            received = b""
            while received.count(b'"jsonrpc"') < 3:
                received += await stream.receive_some(65536)
            got_three.set()
            await stream.reset()

        serving.first.append(reset_after_three)
        streams = McpStreams(caller)
        failures: list[BaseException] = []

        async def doomed(text: str) -> None:
            try:
                await streams.call(served.addrs[0], "tools/call", echo(text), limits=LIMITS)
            except StreamBroken as exc:
                failures.append(exc)

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for n in range(3):
                    nursery.start_soon(doomed, f"doomed {n}")
            assert await calls(streams, served.addrs[0], ["next"]) == {"next": "next"}
    assert len(failures) == 3 and got_three.is_set()
    assert serving.streams[MCP_PIPELINED] == 2


async def test_cancelling_one_call_stops_it_there_and_leaves_the_others() -> None:
    async with running_host() as caller, running_host() as served:
        serving = Serving(served)
        serving.trust(caller.peer_id)
        streams = McpStreams(caller)
        target = served.addrs[0]
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(calls, streams, target, ["other"])
                with trio.move_on_after(0.3):
                    await streams.call(target, "tools/call", echo("given up", True), limits=LIMITS)
                while serving.host.cancelled != ["given up"]:
                    await trio.sleep(0.01)
                result = await streams.call(target, "tools/call", echo("after"), limits=LIMITS)
                assert result["content"][0]["text"] == "after"
    assert serving.server.active_calls(caller.peer_id) == 0
    assert sorted(serving.host.finished) == ["after", "other"]
    assert serving.streams[MCP_PIPELINED] == 1


async def test_a_call_the_peer_left_unread_at_a_clean_end_is_sent_again_once() -> None:
    """A clean end of stream with the request unanswered means it never ran there
    (protocols/gbr-mcp-1.1.0.md, section 2): it goes again on a new stream, and runs once."""
    async with running_host() as caller, running_host() as served:
        serving = Serving(served)
        serving.trust(caller.peer_id)

        async def end_unread(stream: Libp2pByteStream) -> None:
            await stream.receive_some(65536)
            await stream.aclose()

        serving.first.append(end_unread)
        streams = McpStreams(caller)
        with trio.fail_after(30):
            assert await calls(streams, served.addrs[0], ["once"]) == {"once": "once"}
    assert serving.host.started == ["once"]
    assert serving.streams[MCP_PIPELINED] == 2


async def test_a_kept_stream_idle_too_long_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_streams, "REUSE_S", 0.2)
    async with running_host() as caller, running_host() as served:
        serving = Serving(served)
        serving.trust(caller.peer_id)
        streams = McpStreams(caller)
        with trio.fail_after(30):
            await calls(streams, served.addrs[0], ["first"])
            await calls(streams, served.addrs[0], ["soon after"])
            await trio.sleep(0.3)
            await calls(streams, served.addrs[0], ["later"])
    assert serving.streams[MCP_PIPELINED] == 2


async def test_a_kept_stream_whose_connection_dropped_while_idle_is_replaced() -> None:
    """The peer restarted, the network changed: the next call does not fail on the dead
    stream, it dials again and opens a new one."""
    async with running_host() as caller, running_host() as served:
        serving = Serving(served)
        serving.trust(caller.peer_id)
        streams = McpStreams(caller)
        with trio.fail_after(30):
            await calls(streams, served.addrs[0], ["before"])
            await served.disconnect(caller.peer_id)
            while caller.connected_peers():
                await trio.sleep(0.01)
            assert await calls(streams, served.addrs[0], ["after"]) == {"after": "after"}
    assert serving.streams[MCP_PIPELINED] == 2
