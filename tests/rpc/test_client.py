"""The client against RpcServer over in-memory streams, and against scripted misbehaving peers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from gbr_node.errors import (
    CallTimeout,
    LocalProtocolError,
    PeerUnreachable,
    RemoteProtocolError,
    StreamBroken,
)
from gbr_node.rpc import client, codes
from gbr_node.rpc.framing import FrameDecoder, encode_frame
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.server import RpcServer
from tests.rpc.hosts import (
    HOST_SPEC,
    TRUSTED,
    UNTRUSTED,
    ScriptedHost,
    VectorHost,
    open_served_stream,
)

LIMITS = {"timeout_s": 5, "max_message_bytes": 1 << 20}


async def test_list_tools_returns_only_the_granted_tools() -> None:
    async with trio.open_nursery() as nursery:
        stream = open_served_stream(nursery, RpcServer(VectorHost()), TRUSTED)
        tools = await client.list_tools(stream, **LIMITS)
    assert [tool.name for tool in tools] == HOST_SPEC["granted"]
    assert tools[0].inputSchema["required"] == ["text"]


async def test_call_tool_returns_the_result_and_tool_errors_are_results() -> None:
    server = RpcServer(VectorHost())
    async with trio.open_nursery() as nursery:
        ok = await client.call_tool(
            open_served_stream(nursery, server, TRUSTED), "echo", {"text": "hi"}, **LIMITS
        )
        failed = await client.call_tool(
            open_served_stream(nursery, server, TRUSTED), "fail", {}, **LIMITS
        )
    assert (ok.content[0].text, ok.isError) == ("hi", False)
    assert failed.isError is True


@pytest.mark.parametrize(
    ("peer", "method", "params", "error"),
    [
        (UNTRUSTED, "tools/list", None, codes.UnauthorizedPeer),
        (TRUSTED, "tools/call", {"name": "secret"}, codes.InvalidParams),
        (
            TRUSTED,
            "tools/call",
            {"name": "refused", "arguments": {"path": "../x"}},
            codes.PeerSecurityViolation,
        ),
        (TRUSTED, "resources/list", None, codes.MethodNotFound),
    ],
)
async def test_error_responses_raise_the_class_of_their_code(
    peer: str, method: str, params: dict[str, Any] | None, error: type[Exception]
) -> None:
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            stream = open_served_stream(nursery, RpcServer(VectorHost()), peer)
            with pytest.raises(error):
                await client.call(stream, method, params, **LIMITS)


async def test_a_remote_call_timeout_is_also_a_call_timeout(autojump_clock: trio.abc.Clock) -> None:
    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        await trio.sleep_forever()
        raise AssertionError

    server = RpcServer(ScriptedHost(call_tool), Limits(call_timeout_s=2))
    async with trio.open_nursery() as nursery:
        with pytest.raises(CallTimeout) as caught:
            await client.call_tool(
                open_served_stream(nursery, server, TRUSTED),
                "t",
                {},
                timeout_s=30,
                max_message_bytes=1000,
            )
    assert isinstance(caught.value, codes.PeerCallTimeout)


async def test_a_request_over_the_size_limit_is_not_sent() -> None:
    a, b = trio.testing.memory_stream_pair()
    with pytest.raises(LocalProtocolError) as caught:
        await client.call(a, "tools/call", {"name": "x" * 100}, timeout_s=5, max_message_bytes=50)
    assert caught.value.code == codes.TOO_LARGE
    await a.aclose()
    with trio.fail_after(5):
        assert await b.receive_some() == b""


async def test_a_silent_peer_gives_call_timeout(autojump_clock: trio.abc.Clock) -> None:
    a, _silent = trio.testing.memory_stream_pair()
    with trio.fail_after(60), pytest.raises(CallTimeout, match="no response within 3 s"):
        await client.call(a, "tools/list", None, timeout_s=3, max_message_bytes=1000)


Reply = Callable[[dict[str, Any]], bytes | None]


async def answering_peer(stream: trio.abc.Stream, reply: Reply) -> None:
    """Read one request, send `reply(request)` (None: nothing), close."""
    decoder = FrameDecoder(1 << 20)
    while not (frames := decoder.feed(await stream.receive_some())):
        pass
    data = reply(json.loads(frames[0]))
    if data is not None:
        await stream.send_all(data)
    await stream.aclose()


async def scripted_peer(reply: bytes | None) -> Exception:
    """Run one call against a peer that answers `reply` whatever it is asked; return the error."""
    a, b = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answering_peer, b, lambda request: reply)
            with pytest.raises(Exception) as caught:
                await client.call(a, "tools/list", None, timeout_s=5, max_message_bytes=200)
    return caught.value


def frame(value: object) -> bytes:
    return encode_frame(json.dumps(value).encode())


async def test_a_peer_that_closes_without_answering_gives_stream_closed() -> None:
    error = await scripted_peer(None)
    assert isinstance(error, StreamBroken) and "without answering" in str(error)


@pytest.mark.parametrize(
    "reply",
    [
        frame({"jsonrpc": "2.0", "id": 999_999_999, "result": {}}),
        frame({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        frame({"jsonrpc": "2.0", "id": 1, "result": [1]}),
        b"\x05{}",
        encode_frame(b"x" * 201),
        b"not json at all",
    ],
    ids=["wrong-id", "a-request", "result-not-object", "truncated", "too-large", "garbage"],
)
async def test_a_broken_answer_is_a_remote_protocol_error(reply: bytes) -> None:
    assert isinstance(await scripted_peer(reply), RemoteProtocolError)


async def test_an_error_with_a_null_id_answers_the_request_on_its_stream() -> None:
    error = await scripted_peer(
        frame({"jsonrpc": "2.0", "id": None, "error": {"code": codes.BUSY, "message": "busy"}})
    )
    assert isinstance(error, codes.PeerBusy) and error.message == "busy"


async def test_a_reset_stream_gives_stream_closed() -> None:
    class ResetStream:
        async def send_all(self, data: bytes) -> None:
            pass

        async def receive_some(self, max_bytes: int) -> bytes:
            raise trio.BrokenResourceError("stream reset")

        async def aclose(self) -> None:
            pass

    with pytest.raises(StreamBroken) as caught:
        await client.call(ResetStream(), "tools/list", None, **LIMITS)
    assert isinstance(caught.value, PeerUnreachable)


async def test_a_tools_call_result_of_the_wrong_shape_is_a_remote_protocol_error() -> None:
    a, b = trio.testing.memory_stream_pair()

    def reply(request: dict[str, Any]) -> bytes:
        return frame({"jsonrpc": "2.0", "id": request["id"], "result": {"content": "x"}})

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answering_peer, b, reply)
            with pytest.raises(RemoteProtocolError, match="tools/call result"):
                await client.call_tool(a, "t", {}, **LIMITS)


async def test_request_ids_are_unique_across_calls() -> None:
    seen: list[Any] = []

    def reply(request: dict[str, Any]) -> bytes:
        seen.append(request["id"])
        return frame({"jsonrpc": "2.0", "id": request["id"], "result": {"n": len(seen)}})

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            results = []
            for _ in range(3):
                a, b = trio.testing.memory_stream_pair()
                nursery.start_soon(answering_peer, b, reply)
                results.append(await client.call(a, "tools/list", None, **LIMITS))
    assert results == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert len(set(seen)) == 3 and all(isinstance(i, int) for i in seen)


async def test_notify_delivers_and_refuses_methods_outside_notifications() -> None:
    host = VectorHost()
    async with trio.open_nursery() as nursery:
        stream = open_served_stream(nursery, RpcServer(host), TRUSTED)
        await client.notify(stream, "notifications/approval_resolved", {"id": "a1"}, timeout_s=5)
        with trio.fail_after(5):
            assert await stream.receive_some() == b""
    assert host.notifications == [("notifications/approval_resolved", {"id": "a1"})]
    with pytest.raises(LocalProtocolError):
        await client.notify(stream, "tools/call", {}, timeout_s=5)
