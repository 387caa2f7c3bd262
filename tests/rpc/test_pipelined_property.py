"""Property tests of `/gbr/mcp/1.1.0` (h11's fuzz habit, STYLE.md): whatever bytes a
caller sends, the serving side answers with well-formed messages, at most one of them
with id null, and ends with every slot given back; whatever bytes a peer answers
with, each call ends with a result or a `GbrError`, never hangs or raises anything else.
"""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from gbr_node.errors import GbrError
from gbr_node.rpc.framing import FrameDecoder, encode_frame
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.messages import ErrorResponse, Response, decode_message
from gbr_node.rpc.pipelined import serve_pipelined
from gbr_node.rpc.server import RpcServer
from gbr_node.rpc.session import CallSession
from tests.rpc.pipes import PEER, GatedHost, call, cancel, frame

FRAMES = st.one_of(
    st.builds(lambda n: call(n, f"t{n}"), st.integers(1, 4)),
    st.builds(lambda n: cancel(n), st.integers(1, 4)),
    st.just(frame({"jsonrpc": "2.0", "method": "notifications/x"})),
    st.just(frame({"jsonrpc": "2.0", "id": 1, "result": {}})),
    st.binary(max_size=12),
)


async def _serve(data: bytes) -> list[bytes]:
    server = RpcServer(GatedHost(), Limits(max_message_bytes=256, max_concurrent_calls_per_peer=2))
    client, served = trio.testing.memory_stream_pair()
    received = bytearray()
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_pipelined, server, served, PEER)
            await client.send_all(data)
            await client.send_stream.aclose()
            while chunk := await client.receive_some():
                received += chunk
    assert server.active_calls(PEER) == 0
    return FrameDecoder(1 << 20).feed(bytes(received))


@settings(max_examples=150, deadline=None)
@given(st.lists(FRAMES, max_size=10))
def test_any_bytes_get_well_formed_answers_and_at_most_one_refusal(parts: list[bytes]) -> None:
    frames = trio.run(_serve, b"".join(parts), clock=trio.testing.MockClock(autojump_threshold=0))
    answers = [decode_message(body) for body in frames]
    assert all(isinstance(answer, Response | ErrorResponse) for answer in answers)
    assert sum(isinstance(a, ErrorResponse) and a.id is None for a in answers) <= 1


def _answer(request_id: object) -> bytes:
    result = {"content": [{"type": "text", "text": "ok"}], "isError": False}
    return encode_frame(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode())


REPLIES = st.one_of(
    st.builds(_answer, st.one_of(st.integers(0, 5), st.text(max_size=2), st.none())),
    st.binary(max_size=12),
)


async def _calls(reply: bytes) -> list[Any]:
    ours, peer = trio.testing.memory_stream_pair()
    session = CallSession(ours, max_message_bytes=256)
    outcomes: list[Any] = []

    async def one() -> None:
        try:
            outcomes.append(await session.call("tools/call", {"name": "t"}, timeout_s=30))
        except GbrError as exc:
            outcomes.append(exc)

    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(one)
            await trio.testing.wait_all_tasks_blocked()
            await peer.send_all(reply)
            await peer.send_stream.aclose()
    assert session.in_flight == 0
    return outcomes


@settings(max_examples=150, deadline=None)
@given(st.lists(REPLIES, max_size=6))
def test_any_answer_bytes_end_each_call_with_a_result_or_a_gbr_error(parts: list[bytes]) -> None:
    outcomes = trio.run(_calls, b"".join(parts), clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(outcomes) == 3
    assert all(isinstance(o, dict | GbrError) for o in outcomes)
