"""Libp2pByteStream: the byte-stream shape rpc/ relies on, over real loopback hosts."""

from __future__ import annotations

import os

import pytest
import trio

from gbr_node.errors import PeerUnreachable, StreamBroken
from gbr_node.p2p.stream import Libp2pByteStream

from .helpers import ECHO, echo_round_trip, receive_exactly, running_host

SCRIPTED = "/gbr-test/scripted/1.0.0"


async def test_one_mebibyte_arrives_whole_across_partial_reads():
    payload = os.urandom(1024 * 1024)
    async with running_host() as server, running_host(()) as client:
        echoed = await echo_round_trip(client, server.addrs[0], payload)

    assert echoed == payload


async def test_receive_some_never_returns_more_than_asked():
    async with running_host() as server, running_host(()) as client:
        with trio.fail_after(10):
            stream = await client.new_stream(server.addrs[0], ECHO)
            await stream.send_all(b"abcdef")
            pieces = [await stream.receive_some(1) for _ in range(6)]
            await stream.aclose()

    assert pieces == [b"a", b"b", b"c", b"d", b"e", b"f"]


async def test_end_of_stream_reads_as_empty_bytes_every_time():
    async def say_hello(stream: Libp2pByteStream, _remote: str) -> None:
        await stream.send_all(b"hello")

    async with running_host() as server, running_host(()) as client:
        server.set_stream_handler(SCRIPTED, say_hello)
        with trio.fail_after(10):
            stream = await client.new_stream(server.addrs[0], SCRIPTED)
            greeting = await receive_exactly(stream, 5)
            ends = [await stream.receive_some(), await stream.receive_some()]
            await stream.aclose()

    assert greeting == b"hello"
    assert ends == [b"", b""]


async def test_reply_and_end_reach_caller_although_handler_never_read_the_request():
    async def answer_without_reading(stream: Libp2pByteStream, _remote: str) -> None:
        await stream.send_all(b"busy")

    async with running_host() as server, running_host(()) as client:
        server.set_stream_handler(SCRIPTED, answer_without_reading)
        with trio.fail_after(10):
            stream = await client.new_stream(server.addrs[0], SCRIPTED)
            await stream.send_all(b"x" * 100_000)
            reply = await receive_exactly(stream, 4)
            end = await stream.receive_some()
            await stream.aclose()

    assert (reply, end) == (b"busy", b"")


async def test_stream_reset_by_the_peer_raises_stream_broken():
    async def fail_midway(stream: Libp2pByteStream, _remote: str) -> None:
        await stream.send_all(b"partial")
        raise RuntimeError("handler bug")  # the host resets the stream

    async with running_host() as server, running_host(()) as client:
        server.set_stream_handler(SCRIPTED, fail_midway)
        with trio.fail_after(10):
            stream = await client.new_stream(server.addrs[0], SCRIPTED)
            with pytest.raises(StreamBroken) as broken:
                while await stream.receive_some():
                    pass
            await stream.aclose()
        # the host survives a failing handler and keeps serving
        assert await echo_round_trip(client, server.addrs[0], b"still here") == b"still here"

    assert isinstance(broken.value, PeerUnreachable)


async def test_sending_to_a_reset_stream_raises_stream_broken():
    async def reset_on_first_bytes(stream: Libp2pByteStream, _remote: str) -> None:
        # after the client's new_stream() has returned: a reset racing the
        # protocol negotiation would fail new_stream() instead
        await stream.receive_some()
        raise RuntimeError("refuse")

    async with running_host() as server, running_host(()) as client:
        server.set_stream_handler(SCRIPTED, reset_on_first_bytes)
        with trio.fail_after(10):
            stream = await client.new_stream(server.addrs[0], SCRIPTED)
            with pytest.raises(StreamBroken):
                while True:
                    await stream.send_all(b"x" * 1024)
                    await trio.sleep(0.01)
            await stream.aclose()


async def test_locally_closed_stream_refuses_io_and_closes_idempotently():
    async with running_host() as server, running_host(()) as client:
        with trio.fail_after(10):
            stream = await client.new_stream(server.addrs[0], ECHO)
            await stream.aclose()
            await stream.aclose()
            with pytest.raises(trio.ClosedResourceError):
                await stream.receive_some()
            with pytest.raises(trio.ClosedResourceError):
                await stream.send_all(b"late")


async def test_receive_some_rejects_a_non_positive_size():
    async with running_host() as server, running_host(()) as client:
        with trio.fail_after(10):
            stream = await client.new_stream(server.addrs[0], ECHO)
            with pytest.raises(ValueError, match="max_bytes"):
                await stream.receive_some(0)
            await stream.aclose()


async def test_stream_knows_its_peer_and_protocol():
    async with running_host() as server, running_host(()) as client:
        with trio.fail_after(10):
            stream = await client.new_stream(server.addrs[0], ECHO)
            await stream.aclose()

    assert (stream.remote_peer_id, stream.protocol_id) == (server.peer_id, ECHO)


@pytest.mark.parametrize("how", ["the caller resets the stream", "the caller disconnects"])
async def test_a_handler_learns_at_once_that_its_caller_went_away_without_reading(how):
    """`cancel_on_break` cancels a scope on a reset or a dropped connection (issue 13)."""
    waiting, gone = trio.Event(), trio.Event()

    async def wait_for_the_caller(stream: Libp2pByteStream, _remote: str) -> None:
        with trio.CancelScope() as scope:
            stream.cancel_on_break(scope)
            waiting.set()
            await trio.sleep_forever()
        gone.set()  # type: ignore[unreachable]  # stale trio-typing stubs: CancelScope swallows its own cancel

    async with running_host() as server, running_host(()) as client:
        server.set_stream_handler(SCRIPTED, wait_for_the_caller)
        with trio.fail_after(10):
            stream = await client.new_stream(server.addrs[0], SCRIPTED)
            await stream.send_all(b"request")
            await waiting.wait()
            if how == "the caller resets the stream":
                await stream.reset()
            else:
                await client.disconnect(server.peer_id)
            await gone.wait()


async def test_a_scope_registered_after_the_reset_is_cancelled_at_once():
    reset_seen = trio.Event()
    cancelled: list[bool] = []

    async def register_late(stream: Libp2pByteStream, _remote: str) -> None:
        with pytest.raises(StreamBroken):
            while await stream.receive_some():
                pass
        with trio.CancelScope() as scope:
            stream.cancel_on_break(scope)
            await trio.sleep(5)
        cancelled.append(scope.cancelled_caught)
        reset_seen.set()

    async with running_host() as server, running_host(()) as client:
        server.set_stream_handler(SCRIPTED, register_late)
        with trio.fail_after(10):
            stream = await client.new_stream(server.addrs[0], SCRIPTED)
            await stream.send_all(b"x")
            await stream.reset()
            await reset_seen.wait()
    assert cancelled == [True]
