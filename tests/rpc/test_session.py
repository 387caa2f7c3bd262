"""The calling side of `/gbr/mcp/1.1.0` (rpc/session.py) over in-memory streams.

Against the real serving side (rpc/pipelined.py): many calls in flight on one
stream, each given its own answer; one call withdrawn leaves the others; a break
fails every call in flight, each with a clear error. Against a peer scripted frame
by frame: a peer that answers what was never asked, or breaks the framing, ends
the session and fails its calls, closed (GBR-FAIL-01).
"""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from gbr_node.errors import (
    CallTimeout,
    LocalProtocolError,
    RemoteProtocolError,
    StreamBroken,
    StreamEnded,
)
from gbr_node.rpc import codes
from gbr_node.rpc.codes import InvalidParams, PeerBusy, UnauthorizedPeer
from gbr_node.rpc.framing import FrameDecoder, encode_frame, encode_varint
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.pipelined import serve_pipelined
from gbr_node.rpc.server import CallRecord, RpcServer
from gbr_node.rpc.session import CallSession
from tests.rpc.hosts import ScriptedHost
from tests.rpc.pipes import PEER, CountingStream, GatedHost, frame, stream_pair

MAX = 1 << 20


def echo(text: str, held: bool = False) -> dict[str, Any]:
    return {"name": "echo", "arguments": {"text": text, "held": held}}


async def with_server(
    host: Any, test: Callable[[CallSession, CountingStream], Awaitable[None]], **limits: Any
) -> list[CallRecord]:
    """Run `test(session, served_end)` with a session on a stream served by a real
    `RpcServer` for `host` as `PEER`; returns the server's call records."""
    records: list[CallRecord] = []
    server = RpcServer(host, Limits(**limits), on_call=records.append)
    client, served = stream_pair()
    session = CallSession(client, max_message_bytes=MAX)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_pipelined, server, served, PEER)
            await test(session, served)
            await session.aclose()
    assert server.active_calls(PEER) == 0
    return records


async def test_a_hundred_calls_in_flight_each_get_their_own_answer(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def slow_echo(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        await trio.sleep(random.Random(arguments["text"]).random())  # answers out of order
        return {"content": [{"type": "text", "text": arguments["text"]}], "isError": False}

    got: dict[str, str] = {}

    async def test(session: CallSession, served: CountingStream) -> None:
        async def one(n: int) -> None:
            result = await session.call("tools/call", echo(f"t{n}"), timeout_s=10)
            got[f"t{n}"] = result["content"][0]["text"]

        async with trio.open_nursery() as nursery:
            for n in range(100):
                nursery.start_soon(one, n)
        assert session.usable and session.in_flight == 0

    records = await with_server(ScriptedHost(slow_echo), test, max_concurrent_calls_per_peer=100)
    assert got == {f"t{n}": f"t{n}" for n in range(100)}
    assert len(records) == 100


async def test_a_call_given_up_is_withdrawn_and_the_others_go_on() -> None:
    host = GatedHost()

    async def test(session: CallSession, served: CountingStream) -> None:
        async with trio.open_nursery() as nursery:
            other = nursery.start_soon(
                partial(session.call, timeout_s=10), "tools/call", echo("kept", True)
            )
            del other
            with trio.move_on_after(0.05):
                await session.call("tools/call", echo("given up", True), timeout_s=10)
            await trio.testing.wait_all_tasks_blocked()
            assert host.cancelled == ["given up"] and session.usable
            host.release("given up")  # too late: it was cancelled there
            host.release("kept")
        result = await session.call("tools/call", echo("after"), timeout_s=10)
        assert result["content"][0]["text"] == "after"

    records = await with_server(host, test)
    assert sorted(r.outcome for r in records) == ["caller cancelled", "ok", "ok"]
    assert host.finished == ["kept", "after"]


async def test_a_call_past_its_time_limit_is_withdrawn_too(autojump_clock: trio.abc.Clock) -> None:
    host = GatedHost()

    async def test(session: CallSession, served: CountingStream) -> None:
        with pytest.raises(CallTimeout):
            await session.call("tools/call", echo("slow", True), timeout_s=3)
        await trio.testing.wait_all_tasks_blocked()
        assert host.cancelled == ["slow"]
        assert (await session.call("tools/call", echo("next"), timeout_s=3))["isError"] is False

    await with_server(host, test)


async def test_errors_answered_to_one_call_stay_with_that_call() -> None:
    async def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "ok"}], "isError": False}

    async def test(session: CallSession, served: CountingStream) -> None:
        with pytest.raises(LocalProtocolError):
            await session.call("tools/call", echo("x" * MAX), timeout_s=5)
        with pytest.raises(InvalidParams):
            await session.call("tools/call", {"arguments": []}, timeout_s=5)
        assert session.usable
        assert (await session.call("tools/call", echo("y"), timeout_s=5))["isError"] is False

    await with_server(ScriptedHost(tool), test)


async def test_over_the_peer_slots_a_call_gets_peer_busy_and_the_session_goes_on() -> None:
    host = GatedHost()

    async def test(session: CallSession, served: CountingStream) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                partial(session.call, timeout_s=10), "tools/call", echo("held", True)
            )
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(PeerBusy):
                await session.call("tools/call", echo("one too many"), timeout_s=5)
            host.release("held")
        assert session.usable

    await with_server(host, test, max_concurrent_calls_per_peer=1)


async def test_a_broken_stream_fails_every_call_in_flight_and_then_every_new_call() -> None:
    host = GatedHost()
    failures: list[BaseException] = []

    async def test(session: CallSession, served: CountingStream) -> None:
        async def one(n: int) -> None:
            try:
                await session.call("tools/call", echo(f"t{n}", True), timeout_s=10)
            except StreamBroken as exc:
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            for n in range(5):
                nursery.start_soon(one, n)
            await trio.testing.wait_all_tasks_blocked()
            served.break_()
        assert not session.usable
        with pytest.raises(StreamBroken):
            await session.call("tools/call", echo("later"), timeout_s=5)

    await with_server(host, test)
    assert len(failures) == 5 and sorted(host.cancelled) == [f"t{n}" for n in range(5)]
    assert not any(isinstance(exc, StreamEnded) for exc in failures), "a break is no clean end"


async def test_a_refused_session_fails_its_calls_with_the_refusal() -> None:
    host = GatedHost(trusted=set())

    async def test(session: CallSession, served: CountingStream) -> None:
        with pytest.raises(UnauthorizedPeer):
            await session.call("tools/call", echo("x"), timeout_s=5)
        assert not session.usable
        with pytest.raises(UnauthorizedPeer):
            await session.call("tools/call", echo("y"), timeout_s=5)

    await with_server(host, test)
    assert host.started == []


# --- a peer that breaks the protocol -----------------------------------------------------


def answer(request_id: object, text: str = "ok") -> bytes:
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return frame({"jsonrpc": "2.0", "id": request_id, "result": result})


async def read_requests(stream: trio.abc.Stream, count: int) -> list[dict[str, Any]]:
    decoder, frames = FrameDecoder(MAX), list[bytes]()
    while len(frames) < count:
        frames += decoder.feed(await stream.receive_some())
    return [json.loads(body) for body in frames]


SCRIPTS: dict[str, tuple[Callable[[list[dict[str, Any]]], bytes], type[Exception], int | None]] = {
    "a response to an id never sent": (lambda _: answer(99), RemoteProtocolError, None),
    "a response with a string id": (lambda _: answer("1"), RemoteProtocolError, None),
    "a request sent to the caller": (
        lambda _: frame({"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage"}),
        RemoteProtocolError,
        None,
    ),
    "an oversized frame": (lambda _: encode_varint(MAX + 1), RemoteProtocolError, codes.TOO_LARGE),
    "a frame that is not JSON": (lambda _: encode_frame(b"{"), RemoteProtocolError, None),
    "a half-written frame, then a clean end": (
        lambda _: answer(1)[:5],
        RemoteProtocolError,
        codes.PARSE_ERROR,
    ),
    "a clean end without an answer": (lambda _: b"", StreamEnded, None),
}


@pytest.mark.parametrize("script", SCRIPTS)
async def test_a_peer_that_breaks_the_protocol_fails_every_call_on_the_stream(script: str) -> None:
    """GBR-FAIL-01: each call in flight fails with the error, none is taken for answered,
    and the session is closed to new calls."""
    reply, error, code = SCRIPTS[script]
    ours, peer = trio.testing.memory_stream_pair()
    session = CallSession(ours, max_message_bytes=MAX)
    failures: list[BaseException] = []

    async def one(n: int) -> None:
        try:
            await session.call("tools/call", echo(f"t{n}"), timeout_s=5)
        except Exception as exc:
            failures.append(exc)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            for n in range(3):
                nursery.start_soon(one, n)
            requests = await read_requests(peer, 3)
            await peer.send_all(reply(requests))
            if script.endswith("clean end") or script.endswith("an answer"):
                await peer.send_stream.aclose()
    assert len(failures) == 3 and all(isinstance(exc, error) for exc in failures)
    assert code is None or all(getattr(exc, "code", None) == code for exc in failures)
    assert not session.usable


async def test_late_and_repeated_answers_of_calls_given_up_are_dropped() -> None:
    ours, peer = trio.testing.memory_stream_pair()
    session = CallSession(ours, max_message_bytes=MAX)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            with trio.move_on_after(0.05):
                await session.call("tools/call", echo("given up"), timeout_s=5)
            sent = await read_requests(peer, 2)
            assert sent[1]["method"] == "notifications/cancelled"
            assert sent[1]["params"]["requestId"] == sent[0]["id"] == 1

            async def second() -> None:
                result = await session.call("tools/call", echo("second"), timeout_s=5)
                assert result["content"][0]["text"] == "second"

            nursery.start_soon(second)
            assert (await read_requests(peer, 1))[0]["id"] == 2
            await peer.send_all(answer(1, "late") + answer(2, "second") + answer(2, "again"))
    assert session.usable


class ReturnsLate(CountingStream):
    """A served end whose `send_all` returns only once every other task is blocked: the
    caller has read the answer and sent its next request by then, as a caller in another
    process may before the serving node's send returns."""

    async def send_all(self, data: bytes) -> None:
        await super().send_all(data)
        await trio.testing.wait_all_tasks_blocked()


async def test_callers_at_exactly_the_peer_limit_never_get_busy() -> None:
    """A slot (and a request id) is free as soon as its answer is queued, before it is
    sent: a caller that sends again on each answer stays within the limit."""

    async def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "ok"}], "isError": False}

    records: list[CallRecord] = []
    server = RpcServer(
        ScriptedHost(tool), Limits(max_concurrent_calls_per_peer=2), on_call=records.append
    )
    client, inner = trio.testing.memory_stream_pair()
    session = CallSession(client, max_message_bytes=MAX)

    async def worker() -> None:
        for _ in range(20):
            await session.call("tools/call", echo("x"), timeout_s=5)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_pipelined, server, ReturnsLate(inner), PEER)
            async with trio.open_nursery() as workers:
                for _ in range(2):
                    workers.start_soon(worker)
            await session.aclose()
    assert [r.outcome for r in records] == ["ok"] * 40
