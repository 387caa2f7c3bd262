"""Inbound trust: untrusted peer IDs are disconnected and their streams never reach a handler."""

from __future__ import annotations

import pytest
import trio

from gbr_node.errors import PeerUnreachable
from gbr_node.p2p.stream import Libp2pByteStream

from .helpers import ECHO, echo_round_trip, receive_exactly, running_host

RECORDED = "/gbr-test/recorded/1.0.0"


class Recorder:
    """A stream handler that notes who called it and answers b"ran"."""

    def __init__(self) -> None:
        self.callers: list[str] = []

    async def __call__(self, stream: Libp2pByteStream, remote: str) -> None:
        self.callers.append(remote)
        await stream.send_all(b"ran")


async def _call_recorded(client, target: str) -> bytes:
    with trio.fail_after(10):
        stream = await client.new_stream(target, RECORDED, timeout_s=5)
        try:
            return await receive_exactly(stream, 3)
        finally:
            await stream.aclose()


async def _wait_disconnected(host, peer_id: str) -> None:
    with trio.fail_after(10):
        while peer_id in host.connected_peers():
            await trio.sleep(0.01)


async def test_untrusted_inbound_connection_is_closed_and_its_handler_never_runs():
    handler = Recorder()
    async with running_host(is_trusted=lambda _peer: False) as server, running_host(()) as client:
        server.set_stream_handler(RECORDED, handler)
        with pytest.raises(PeerUnreachable):
            await _call_recorded(client, server.addrs[0])
        await _wait_disconnected(server, client.peer_id)

    assert handler.callers == []


async def test_trusted_peer_reaches_the_handler_with_its_peer_id():
    handler = Recorder()
    async with running_host(()) as client:
        trusted = {client.peer_id}
        async with running_host(is_trusted=trusted.__contains__) as server:
            server.set_stream_handler(RECORDED, handler)
            assert await _call_recorded(client, server.addrs[0]) == b"ran"

    assert handler.callers == [client.peer_id]


async def test_handler_trust_check_holds_even_when_connections_are_kept():
    handler = Recorder()
    async with running_host(is_trusted=lambda _p: False, close_untrusted=False) as server:
        server.set_stream_handler(RECORDED, handler)
        async with running_host(()) as client:
            with pytest.raises(PeerUnreachable):
                await _call_recorded(client, server.addrs[0])

            assert client.peer_id in server.connected_peers()

    assert handler.callers == []


async def test_handler_without_trust_requirement_sees_untrusted_callers():
    handler = Recorder()
    async with running_host(is_trusted=lambda _p: False, close_untrusted=False) as server:
        server.set_stream_handler(RECORDED, handler, require_trust=False)
        async with running_host(()) as client:
            assert await _call_recorded(client, server.addrs[0]) == b"ran"

    assert handler.callers == [client.peer_id]


async def test_revoked_peer_is_dropped_and_refused_after_a_trust_change():
    trusted: set[str] = set()
    handler = Recorder()
    async with running_host(is_trusted=trusted.__contains__) as server, running_host(()) as client:
        server.set_stream_handler(RECORDED, handler)
        trusted.add(client.peer_id)
        assert await _call_recorded(client, server.addrs[0]) == b"ran"

        trusted.clear()  # a hot-reloaded profile no longer lists the client
        assert await server.drop_untrusted() == 1
        await _wait_disconnected(server, client.peer_id)
        with pytest.raises(PeerUnreachable):
            await _call_recorded(client, server.addrs[0])

    assert handler.callers == [client.peer_id]


async def test_outbound_connection_to_a_peer_we_do_not_trust_is_kept():
    async with running_host() as server, running_host((), is_trusted=lambda _p: False) as caller:
        assert await echo_round_trip(caller, server.addrs[0], b"out") == b"out"
        assert await caller.drop_untrusted() == 0
        assert caller.connected_peers() == (server.peer_id,)
        stream = await caller.new_stream(server.peer_id, ECHO)
        await stream.aclose()
