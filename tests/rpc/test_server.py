"""RpcServer over in-memory streams: every error path, deadlines, and the per-peer call limit."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
import trio.testing

from gbr_node.config.network import NodeConfig
from gbr_node.errors import (
    CallTimeout,
    PeerUnreachable,
    RemoteProtocolError,
    SecurityViolation,
    ToolError,
)
from gbr_node.rpc import codes
from gbr_node.rpc.framing import FrameDecoder, encode_frame, encode_varint
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.server import CallRecord, RpcServer
from tests.rpc.hosts import TRUSTED, ScriptedHost, VectorHost, exchange, open_served_stream

PEER = "12D3KooWPeer"
TEXT_RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}


def request(method: str, params: Any = None, request_id: int = 1) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return encode_frame(json.dumps(message).encode())


def answer(received: bytes) -> dict[str, Any]:
    frames = FrameDecoder(1 << 30).feed(received)
    assert len(frames) == 1, received
    return json.loads(frames[0])


def scripted(result: Any = TEXT_RESULT, exc: BaseException | None = None) -> ScriptedHost:
    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        if exc is not None:
            raise exc
        return result

    return ScriptedHost(call_tool)


async def test_a_stalled_half_frame_hits_the_read_deadline(autojump_clock: trio.abc.Clock) -> None:
    server = RpcServer(scripted(), Limits(read_timeout_s=10))
    client, served = trio.testing.memory_stream_pair()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.handle_stream, served, PEER)
            await client.send_all(request("tools/list")[:10])
            started = trio.current_time()
            received = b""
            while chunk := await client.receive_some():
                received += chunk
            assert trio.current_time() - started == pytest.approx(10)
    response = answer(received)
    assert response["id"] is None and response["error"]["code"] == codes.CALL_TIMEOUT
    assert server.active_calls(PEER) == 0


async def test_stream_ending_inside_a_frame_is_a_parse_error() -> None:
    server = RpcServer(scripted())
    client, served = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.handle_stream, served, PEER)
            await client.send_all(encode_varint(50))
            await client.send_stream.aclose()
            received = b""
            while chunk := await client.receive_some():
                received += chunk
    assert answer(received)["error"]["code"] == codes.PARSE_ERROR


async def test_stream_closed_before_any_byte_is_closed_without_answer() -> None:
    records: list[CallRecord] = []
    server = RpcServer(scripted(), on_call=records.append)
    client, served = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        await client.send_stream.aclose()
        await server.handle_stream(served, PEER)
        assert await client.receive_some() == b""
    assert records == []


async def test_too_many_concurrent_calls_from_one_peer_get_busy() -> None:
    limit = 3
    entered, release = trio.Event(), trio.Event()
    running = 0

    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        nonlocal running
        running += 1
        if running == limit:
            entered.set()
        await release.wait()
        return TEXT_RESULT

    server = RpcServer(ScriptedHost(call_tool), Limits(max_concurrent_calls_per_peer=limit))
    results: list[dict[str, Any]] = []

    async def one_call(peer: str) -> None:
        results.append(answer(await exchange(server, peer, request("tools/call", {"name": "t"}))))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            for _ in range(limit):
                nursery.start_soon(one_call, PEER)
            await entered.wait()
            assert server.active_calls(PEER) == limit
            busy = answer(await exchange(server, PEER, request("tools/call", {"name": "t"})))
            assert busy["id"] is None and busy["error"]["code"] == codes.BUSY
            nursery.start_soon(one_call, "12D3KooWOther")
            await trio.testing.wait_all_tasks_blocked()
            assert server.active_calls("12D3KooWOther") == 1
            release.set()
    assert [r["result"] for r in results] == [TEXT_RESULT] * (limit + 1)
    assert server.active_calls(PEER) == 0
    after = answer(await exchange(server, PEER, request("tools/call", {"name": "t"})))
    assert after["result"] == TEXT_RESULT


async def test_a_call_past_its_time_limit_gets_call_timeout(autojump_clock: trio.abc.Clock) -> None:
    cancelled = False

    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        nonlocal cancelled
        try:
            await trio.sleep_forever()
        finally:
            cancelled = True

    server = RpcServer(ScriptedHost(call_tool), Limits(call_timeout_s=3))
    response = answer(
        await exchange(server, PEER, request("tools/call", {"name": "t"}, 7), timeout_s=60)
    )
    assert response["id"] == 7 and response["error"]["code"] == codes.CALL_TIMEOUT
    assert cancelled


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (SecurityViolation("outside the root", "../x"), codes.SECURITY_VIOLATION),
        (CallTimeout("command ran past 60 s"), codes.CALL_TIMEOUT),
        (RemoteProtocolError(-32050, "custom", {"k": 1}), -32050),
        (RuntimeError("secret internals /home/me"), codes.INTERNAL_ERROR),
    ],
)
async def test_host_exceptions_become_their_error_codes(exc: Exception, code: int) -> None:
    response = answer(
        await exchange(RpcServer(scripted(exc=exc)), PEER, request("tools/call", {"name": "t"}, 3))
    )
    assert response["id"] == 3 and response["error"]["code"] == code


async def test_internal_errors_are_logged_and_leak_no_python_internals(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="gbr_node.rpc.server")
    host = scripted(exc=RuntimeError("secret internals /home/me"))
    received = await exchange(RpcServer(host), PEER, request("tools/call", {"name": "t"}))
    assert (
        b"secret" not in received
        and b"RuntimeError" not in received
        and b"Traceback" not in received
    )
    assert "secret internals" in caplog.text


async def test_tool_error_becomes_a_result_with_is_error() -> None:
    response = answer(
        await exchange(
            RpcServer(scripted(exc=ToolError("no such file"))),
            PEER,
            request("tools/call", {"name": "t"}),
        )
    )
    assert response["result"] == {
        "content": [{"type": "text", "text": "no such file"}],
        "isError": True,
    }


@pytest.mark.parametrize(
    "result",
    [{"content": "text"}, {"content": [{"type": "image", "data": "x"}], "isError": False}, None],
)
async def test_an_invalid_result_from_the_host_is_an_internal_error(result: Any) -> None:
    response = answer(
        await exchange(
            RpcServer(scripted(result=result)), PEER, request("tools/call", {"name": "t"})
        )
    )
    assert response["error"]["code"] == codes.INTERNAL_ERROR


async def test_a_host_that_fails_to_authorize_gives_internal_error() -> None:
    host = scripted()

    def fail(peer_id: str) -> str:
        raise ZeroDivisionError

    host.authorize = fail  # type: ignore[method-assign]  # a host whose authorize breaks
    response = answer(await exchange(RpcServer(host), PEER, request("tools/list")))
    assert response["error"]["code"] == codes.INTERNAL_ERROR


@pytest.mark.parametrize(
    "params",
    [[1, 2], {"name": ""}, {"arguments": {}}, {"name": "t", "arguments": [1]}],
    ids=["by-position", "empty-name", "no-name", "arguments-array"],
)
async def test_bad_tools_call_params_are_invalid_params(params: Any) -> None:
    response = answer(await exchange(RpcServer(scripted()), PEER, request("tools/call", params)))
    assert response["error"]["code"] == codes.INVALID_PARAMS


async def test_a_response_sent_to_the_server_is_an_invalid_request() -> None:
    body = encode_frame(b'{"jsonrpc":"2.0","id":1,"result":{}}')
    response = answer(await exchange(RpcServer(scripted()), PEER, body))
    assert response["id"] is None and response["error"]["code"] == codes.INVALID_REQUEST


async def test_a_response_too_large_to_send_becomes_too_large() -> None:
    big = {"content": [{"type": "text", "text": "x" * 2000}], "isError": False}
    server = RpcServer(scripted(result=big), Limits(max_message_bytes=1000))
    response = answer(await exchange(server, PEER, request("tools/call", {"name": "t"}, 9)))
    assert response["id"] == 9 and response["error"]["code"] == codes.TOO_LARGE


async def test_notifications_reach_the_host_only_from_trusted_peers_and_only_notifications() -> (
    None
):
    host = VectorHost()
    server = RpcServer(host)

    def note(method: str) -> bytes:
        return encode_frame(
            json.dumps({"jsonrpc": "2.0", "method": method, "params": {"a": 1}}).encode()
        )

    assert await exchange(server, TRUSTED, note("notifications/approval_resolved")) == b""
    # a stranger's stream is refused before it is read, notification or not
    refused = answer(await exchange(server, "12D3KooWStranger", note("notifications/x")))
    assert refused["id"] is None and refused["error"]["code"] == codes.UNAUTHORIZED_PEER
    assert await exchange(server, TRUSTED, note("tools/call")) == b""
    assert host.notifications == [("notifications/approval_resolved", {"a": 1})]
    assert host.calls == []


async def test_a_failing_notify_is_logged_and_does_not_escape(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = scripted()

    async def notify(grant: str, method: str, params: dict[str, Any]) -> None:
        raise RuntimeError("boom")

    host.notify = notify  # type: ignore[method-assign]  # the test's stand-in
    note = encode_frame(b'{"jsonrpc":"2.0","method":"notifications/x"}')
    assert await exchange(RpcServer(host), PEER, note) == b""
    assert "boom" in caplog.text


async def test_a_peer_that_vanishes_before_the_response_does_not_break_the_server() -> None:
    release = trio.Event()

    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        await release.wait()
        return TEXT_RESULT

    server = RpcServer(ScriptedHost(call_tool))
    client, served = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.handle_stream, served, PEER)
            await client.send_all(request("tools/call", {"name": "t"}))
            await trio.testing.wait_all_tasks_blocked()
            await client.aclose()
            release.set()
    assert server.active_calls(PEER) == 0


async def test_each_answered_stream_gives_one_call_record() -> None:
    records: list[CallRecord] = []
    server = RpcServer(VectorHost(), on_call=records.append)
    await exchange(
        server, TRUSTED, request("tools/call", {"name": "echo", "arguments": {"text": "a"}})
    )
    await exchange(server, TRUSTED, request("tools/call", {"name": "fail", "arguments": {}}))
    await exchange(server, TRUSTED, request("nope"))
    await exchange(server, TRUSTED, encode_varint(1 << 40))
    summary = [(r.peer_id, r.method, r.tool, r.error_code, r.is_error) for r in records]
    assert summary == [
        (TRUSTED, "tools/call", "echo", None, False),
        (TRUSTED, "tools/call", "fail", None, True),
        (TRUSTED, "nope", None, codes.METHOD_NOT_FOUND, False),
        (TRUSTED, None, None, codes.TOO_LARGE, False),
    ]
    assert [r.outcome for r in records] == ["ok", "tool error", "method not found", "too large"]
    assert all(r.elapsed_s >= 0 for r in records)


def test_limits_default_to_the_profile_defaults_and_refuse_non_positive_values() -> None:
    node = NodeConfig()
    assert Limits() == Limits.from_config(node)
    assert Limits().max_message_bytes == 4 * 1024 * 1024
    assert Limits().max_concurrent_calls_per_peer == 16
    with pytest.raises(ValueError, match="read_timeout_s"):
        Limits(read_timeout_s=0)


class AdapterBroken(PeerUnreachable):
    """Stands for a stream adapter's own error for a reset stream (p2p's StreamBroken)."""


class BreakingStream:
    """A stream that delivers `data`, then breaks the way a libp2p adapter reports it."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.closed = False

    async def receive_some(self, max_bytes: int) -> bytes:
        if self.data:
            data, self.data = self.data, b""
            return data
        raise AdapterBroken("stream reset by peer")

    async def send_all(self, data: bytes) -> None:
        raise AdapterBroken("stream reset by peer")

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.parametrize(
    "data", [b"", request("tools/list")], ids=["while-reading", "while-writing"]
)
async def test_a_stream_broken_by_the_adapter_is_closed_quietly(
    data: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gbr_node.rpc.server")
    stream = BreakingStream(data)
    server = RpcServer(VectorHost())
    with trio.fail_after(5):
        await server.handle_stream(stream, TRUSTED)
    assert stream.closed and server.active_calls(TRUSTED) == 0
    assert "stream reset by peer" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


class CountingStream:
    """The server's end of an in-memory stream that counts the reads made on it."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.reads = 0

    async def receive_some(self, max_bytes: int) -> bytes:
        self.reads += 1
        return await self.inner.receive_some(max_bytes)

    async def send_all(self, data: bytes) -> None:
        await self.inner.send_all(data)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted", "trusted-at-its-limit"])
async def test_a_refused_stream_is_answered_before_a_byte_of_it_is_read(trusted: bool) -> None:
    """GBR-DOS-01: an untrusted peer, or one at its limit, makes the server hold nothing:
    the answer goes out while a 4 MiB request is still arriving."""
    release = trio.Event()

    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        await release.wait()
        return TEXT_RESULT

    host = VectorHost() if not trusted else ScriptedHost(call_tool)
    server: RpcServer[Any] = RpcServer(host, Limits(max_concurrent_calls_per_peer=1))
    peer = "12D3KooWStranger" if not trusted else PEER
    client, served = trio.testing.memory_stream_pair()
    counting = CountingStream(served)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            if trusted:  # its one slot is taken by a call still running
                first = open_served_stream(nursery, server, peer)
                await first.send_all(request("tools/call", {"name": "t"}))
                await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(server.handle_stream, counting, peer)
            await client.send_all(encode_varint(4 * 1024 * 1024) + b'{"jsonrpc"')
            refused = answer(await client.receive_some())
            release.set()
    code = codes.BUSY if trusted else codes.UNAUTHORIZED_PEER
    assert refused["id"] is None and refused["error"]["code"] == code
    assert counting.reads == 0


class ResettableStream(CountingStream):
    """Reads block until `reset()`; then they raise, as a stream reset by the caller does."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        super().__init__(inner)
        self._reset = trio.Event()
        self.sent = b""

    def reset(self) -> None:
        self._reset.set()

    async def receive_some(self, max_bytes: int) -> bytes:
        async with trio.open_nursery() as nursery:
            got: list[bytes] = []

            async def read() -> None:
                got.append(await self.inner.receive_some(max_bytes))
                nursery.cancel_scope.cancel()

            nursery.start_soon(read)
            await self._reset.wait()
            nursery.cancel_scope.cancel()
        if got:
            return got[0]
        raise PeerUnreachable("stream reset by the caller")

    async def send_all(self, data: bytes) -> None:
        self.sent += data


async def test_a_call_whose_stream_breaks_is_cancelled_and_its_slot_freed_at_once() -> None:
    started, cancelled = trio.Event(), trio.Event()

    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    records: list[CallRecord] = []
    server = RpcServer(ScriptedHost(call_tool), on_call=records.append)
    client, served = trio.testing.memory_stream_pair()
    stream = ResettableStream(served)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.handle_stream, stream, PEER)
            await client.send_all(request("tools/call", {"name": "t"}))
            await started.wait()
            assert server.active_calls(PEER) == 1
            stream.reset()
            await cancelled.wait()
    assert server.active_calls(PEER) == 0
    assert stream.sent == b"" and [(r.tool, r.outcome) for r in records] == [("t", "caller left")]


async def test_a_caller_that_closes_its_sending_side_still_gets_its_answer() -> None:
    """End of stream after the request is not abandonment (half-close)."""
    release = trio.Event()

    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        await release.wait()
        return TEXT_RESULT

    server = RpcServer(ScriptedHost(call_tool))
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            client = open_served_stream(nursery, server, PEER)
            await client.send_all(request("tools/call", {"name": "t"}))
            await client.send_stream.aclose()
            await trio.testing.wait_all_tasks_blocked()
            release.set()
            received = b""
            while chunk := await client.receive_some():
                received += chunk
    assert answer(received)["result"] == TEXT_RESULT


class BrokenOnResetStream:
    """A served stream that the test can reset: reads then raise BrokenResourceError, as
    the p2p adapter's do when the caller resets the stream or its connection dies."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self._inner = inner
        self._reset = False
        self._waiting: set[trio.CancelScope] = set()

    def reset(self) -> None:
        self._reset = True
        for scope in self._waiting:
            scope.cancel()

    async def receive_some(self, max_bytes: int = 65536) -> bytes:
        with trio.CancelScope() as scope:
            self._waiting.add(scope)
            try:
                if not self._reset:
                    return bytes(await self._inner.receive_some(max_bytes))
            finally:
                self._waiting.discard(scope)
        raise trio.BrokenResourceError("stream reset by the caller")

    async def send_all(self, data: bytes) -> None:
        if self._reset:
            raise trio.BrokenResourceError("stream reset by the caller")
        await self._inner.send_all(data)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_a_call_whose_caller_resets_the_stream_is_cancelled_at_once() -> None:
    started, cancelled = trio.Event(), trio.Event()

    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    server = RpcServer(ScriptedHost(call_tool))
    client, inner = trio.testing.memory_stream_pair()
    served = BrokenOnResetStream(inner)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.handle_stream, served, PEER)
            await client.send_all(request("tools/call", {"name": "t"}))
            await started.wait()
            assert server.active_calls(PEER) == 1
            served.reset()
            await cancelled.wait()
    assert server.active_calls(PEER) == 0


async def test_a_caller_that_only_closes_its_sending_side_still_gets_the_answer() -> None:
    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        await trio.sleep(0.05)
        return TEXT_RESULT

    server = RpcServer(ScriptedHost(call_tool))
    client, served = trio.testing.memory_stream_pair()
    received = bytearray()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.handle_stream, served, PEER)
            await client.send_all(request("tools/call", {"name": "t"}) + b"trailing bytes")
            await client.send_stream.aclose()  # EOF after the request, as js-libp2p's pipe does
            while chunk := await client.receive_some():
                received += chunk
    assert answer(bytes(received))["result"] == TEXT_RESULT
