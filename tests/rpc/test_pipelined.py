"""The serving side of `/gbr/mcp/1.1.0` (rpc/pipelined.py) over in-memory streams.

Many requests in flight on one stream, answered by id as they are ready; per request
the admission of 1.0.0 (GBR-DOS-01); a table of attacks that must each fail closed
(GBR-FAIL-01): an answer with id null, nothing of the attack run, the requests
already in flight still answered, the stream closed, every slot given back.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
import trio
import trio.testing

from gbr_node.rpc import codes
from gbr_node.rpc.framing import encode_frame, encode_varint
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.server import CallRecord, RpcServer
from tests.rpc.hosts import exchange
from tests.rpc.pipes import PEER, GatedHost, Pipe, by_id, call, cancel, frame


def served(
    host: GatedHost | None = None, records: list[CallRecord] | None = None, **limits: Any
) -> tuple[RpcServer[Any], GatedHost]:
    host = host or GatedHost()
    on_call = records.append if records is not None else None
    return RpcServer(host, Limits(**limits), on_call=on_call), host


def text_of(answer: dict[str, Any]) -> str:
    return str(answer["result"]["content"][0]["text"])


async def test_answers_leave_as_they_are_ready_each_with_its_request_id() -> None:
    server, host = served()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            pipe = Pipe(nursery, server)
            await pipe.send(call(1, "slow", held=True), call("two", "fast"), call(3, "third"))
            first, second = await pipe.next(), await pipe.next()
            assert {first["id"], second["id"]} == {"two", 3}
            assert server.active_calls(PEER) == 1
            host.release("slow")
            late = await pipe.next()
            assert late["id"] == 1 and text_of(late) == "slow"
            await pipe.end()
            assert await pipe.rest() == []
    assert server.active_calls(PEER) == 0


async def test_a_caller_ending_its_side_still_gets_every_answer_then_the_stream_closes() -> None:
    server, host = served()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            pipe = Pipe(nursery, server)
            await pipe.send(*(call(n, f"t{n}", held=n % 2 == 0) for n in range(1, 7)))
            await pipe.end()
            await trio.testing.wait_all_tasks_blocked()
            for n in (2, 4, 6):
                host.release(f"t{n}")
            answers = by_id(await pipe.rest())
    assert sorted(answers) == [1, 2, 3, 4, 5, 6]
    assert all(text_of(answers[n]) == f"t{n}" for n in answers)
    assert not pipe.served.was_reset


# --- attacks: each fails closed ------------------------------------------------------------

MAX = 4096
ATTACKS = {
    "duplicate id in flight": (call(1, "again"), codes.INVALID_REQUEST),
    "a response the server never asked for": (
        frame({"jsonrpc": "2.0", "id": 99, "result": {}}),
        codes.INVALID_REQUEST,
    ),
    "an oversized frame": (encode_varint(MAX + 1) + b'{"jsonrpc"', codes.TOO_LARGE),
    "a half-written frame, then end of stream": (call(7, "cut")[:9], codes.PARSE_ERROR),
    "a frame that is not JSON": (encode_frame(b'{"jsonrpc": "2.0", "id": 8,'), codes.PARSE_ERROR),
    "a batch": (frame([json.loads(call(9, "b")[1:])]), codes.INVALID_REQUEST),
    "a non-minimal length prefix": (b"\x80\x00", codes.PARSE_ERROR),
    "a half-written frame, then silence": (call(10, "stalled")[:9], codes.CALL_TIMEOUT),
}


@pytest.mark.parametrize("attack", ATTACKS)
async def test_an_attack_is_refused_with_id_null_and_the_calls_in_flight_are_still_answered(
    attack: str, autojump_clock: trio.abc.Clock
) -> None:
    """GBR-FAIL-01: whatever the attack, its answer has id null, nothing of it runs, the
    request already in flight is answered, the stream is closed and the slots come back."""
    data, code = ATTACKS[attack]
    records: list[CallRecord] = []
    server, host = served(records=records, max_message_bytes=MAX, read_timeout_s=10)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            pipe = Pipe(nursery, server)
            await pipe.send(call(1, "in flight", held=True))
            await trio.testing.wait_all_tasks_blocked()
            await pipe.send(data)
            if attack.endswith("end of stream"):
                await pipe.end()
            refusal = await pipe.next()
            host.release("in flight")
            answers = [refusal, *await pipe.rest()]
    assert refusal["id"] is None and refusal["error"]["code"] == code
    assert [a["id"] for a in answers] == [None, 1] and text_of(answers[1]) == "in flight"
    assert host.started == ["in flight"], "nothing of the attack may run"
    assert server.active_calls(PEER) == 0
    assert sorted(r.error_code or 0 for r in records) == sorted([code, 0])


async def test_an_untrusted_peer_opening_1_1_0_is_refused_before_a_byte_is_read() -> None:
    """GBR-DOS-01: the refusal goes out while its 4 MiB request is still arriving."""
    server, host = served()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            pipe = Pipe(nursery, server, peer="12D3KooWStranger")
            await pipe.send(encode_varint(4 * 1024 * 1024) + b'{"jsonrpc"')
            answers = await pipe.rest()
    assert len(answers) == 1
    assert answers[0]["id"] is None and answers[0]["error"]["code"] == codes.UNAUTHORIZED_PEER
    assert pipe.served.reads == 0 and host.started == []


async def test_a_peer_no_longer_trusted_is_refused_at_its_next_request() -> None:
    """A hot reload that withdraws trust applies to the next request on a kept stream; the
    request already running keeps the rules it started with (ADR-0012a)."""
    server, host = served()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            pipe = Pipe(nursery, server)
            await pipe.send(call(1, "before", held=True))
            await trio.testing.wait_all_tasks_blocked()
            host.trusted.clear()
            await pipe.send(call(2, "after"))
            refusal = await pipe.next()
            host.release("before")
            answers = [refusal, *await pipe.rest()]
    assert refusal["id"] is None and refusal["error"]["code"] == codes.UNAUTHORIZED_PEER
    assert [a["id"] for a in answers] == [None, 1]
    assert host.started == ["before"]


async def test_a_flood_over_the_peer_slots_gets_busy_with_each_request_id_at_once() -> None:
    """The per-peer slots are 1.0.0's, counted per request and shared with the peer's
    1.0.0 streams: over the limit, BUSY with the request's id, before the method runs."""
    server, host = served(max_concurrent_calls_per_peer=3)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            one_per_stream = nursery.start_soon(
                exchange, server, PEER, call(100, "on 1.0.0", held=True)
            )
            del one_per_stream
            await trio.testing.wait_all_tasks_blocked()
            pipe = Pipe(nursery, server)
            await pipe.send(*(call(n, f"t{n}", held=True) for n in range(1, 11)))
            busy = [await pipe.next() for _ in range(8)]
            assert server.active_calls(PEER) == 3
            for text in ("on 1.0.0", "t1", "t2"):
                host.release(text)
            await pipe.end()
            answers = by_id(await pipe.rest())
    assert {a["id"] for a in busy} == set(range(3, 11))
    assert all(a["error"]["code"] == codes.BUSY for a in busy)
    assert sorted(answers) == [1, 2]
    assert sorted(host.started) == ["on 1.0.0", "t1", "t2"]
    assert server.active_calls(PEER) == 0


# --- cancellation and breaks -------------------------------------------------------------


async def test_cancelling_one_request_leaves_the_others_running_and_answered() -> None:
    records: list[CallRecord] = []
    server, host = served(records=records)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            pipe = Pipe(nursery, server)
            await pipe.send(call(1, "one", held=True), call(2, "two", held=True))
            await trio.testing.wait_all_tasks_blocked()
            await pipe.send(cancel(1), cancel(404), cancel(True), cancel(None))
            await trio.testing.wait_all_tasks_blocked()
            assert host.cancelled == ["one"] and server.active_calls(PEER) == 1
            host.release("two")
            answer = await pipe.next()
            await pipe.end()
            assert await pipe.rest() == []
    assert answer["id"] == 2 and text_of(answer) == "two"
    assert [r.outcome for r in records] == ["caller cancelled", "ok"]


async def test_a_broken_stream_cancels_every_request_on_it_and_is_reset() -> None:
    server, host = served()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            pipe = Pipe(nursery, server)
            await pipe.send(*(call(n, f"t{n}", held=True) for n in range(1, 5)))
            await trio.testing.wait_all_tasks_blocked()
            assert server.active_calls(PEER) == 4
            pipe.served.break_()
            await pipe.done.wait()
    assert sorted(host.cancelled) == ["t1", "t2", "t3", "t4"]
    assert server.active_calls(PEER) == 0
    assert pipe.served.was_reset, "a clean end would tell the caller that nothing ran"


async def test_an_idle_stream_is_closed_but_never_while_a_request_runs(
    autojump_clock: trio.abc.Clock,
) -> None:
    server, host = served(read_timeout_s=10)
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            pipe = Pipe(nursery, server)
            await pipe.send(call(1, "long", held=True))
            await trio.sleep(35)
            assert not pipe.done.is_set()
            host.release("long")
            assert (await pipe.next())["id"] == 1
            released = trio.current_time()
            assert await pipe.rest() == []
            assert trio.current_time() - released == pytest.approx(10)


async def test_other_notifications_reach_the_host_unanswered() -> None:
    server, host = served()
    note = {"jsonrpc": "2.0", "method": "notifications/approval_resolved", "params": {"n": 1}}
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            pipe = Pipe(nursery, server)
            await pipe.send(frame(note), call(1, "after"))
            assert (await pipe.next())["id"] == 1
            await pipe.end()
            assert await pipe.rest() == []
    assert host.notifications == [("notifications/approval_resolved", {"n": 1})]


async def test_a_node_shutting_down_mid_request_resets_the_stream() -> None:
    """Never the clean end that tells the caller its unanswered requests did not run."""
    server, host = served()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            pipe = Pipe(nursery, server)
            await pipe.send(call(1, "running", held=True))
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert host.cancelled == ["running"] and pipe.served.was_reset


async def test_a_peer_that_never_reads_its_answers_is_cut_off_holding_little(
    autojump_clock: trio.abc.Clock,
) -> None:
    """GBR-DOS-01: answers waiting to be written are bounded; the requests whose answers
    wait keep their slots, so more get BUSY, the BUSY itself waits, nothing more is read,
    and after `read_timeout_s` the stream is reset with every slot given back."""
    server, host = served(max_message_bytes=4096, max_concurrent_calls_per_peer=4)
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            pipe = Pipe(nursery, server, lockstep=True)
            flood = b"".join(call(n, "x" * 1000) for n in range(200))

            async def send_flood() -> None:
                with contextlib.suppress(trio.BrokenResourceError):  # reset under it
                    await pipe.send(flood)

            nursery.start_soon(send_flood)
            await pipe.done.wait()
            assert trio.current_time() <= 11
            nursery.cancel_scope.cancel()
    assert pipe.served.was_reset
    assert len(host.started) < 20, "reading stopped once the answers backed up"
    assert server.active_calls(PEER) == 0
