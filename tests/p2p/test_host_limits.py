"""Inbound connection limits of a host on 127.0.0.1, in-process (GBR-DOS-01, issue 13).

The serving host runs here; attackers are py-libp2p parts driven by hand
(tests/support/attackers.py) or raw sockets. The e2e twin of these tests,
against `gbr-node serve` processes, is tests/e2e/test_dos.py.
"""

from __future__ import annotations

import contextlib
import random
import re
import subprocess

import pytest
import trio
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.peer.id import ID

from gbr_node.errors import StreamBroken
from gbr_node.p2p.admission import ConnectionLimits
from gbr_node.p2p.host import P2PHost
from gbr_node.p2p.stream import Libp2pByteStream
from gbr_node.rpc.framing import encode_varint
from tests.support.attackers import intrude, silent_socket, tcp_port

from .helpers import ECHO, echo_round_trip, running_host

BULK = "/gbr-test/bulk/1.0.0"
MIB = 1024 * 1024


def _trusting(*peer_ids: str):
    return lambda peer_id: peer_id in peer_ids


async def test_a_trusted_connection_without_streams_is_closed_after_the_idle_timeout():
    limits = ConnectionLimits(idle_timeout_s=0.5)
    keypair = create_new_key_pair()
    async with (
        running_host(limits=limits, close_untrusted=False) as server,
        intrude(server.addrs[0], keypair) as intruder,
    ):
        stream = await intruder.open_stream(ECHO)
        await trio.sleep(1.0)  # a stream is open: not idle
        assert not intruder.closed
        await stream.close()
        with trio.fail_after(3):
            await intruder.wait_closed()


async def test_untrusted_connections_past_the_limit_are_refused_and_trusted_ones_still_get_in():
    limits = ConnectionLimits(max_untrusted=3, untrusted_grace_s=30)
    trusted = create_new_key_pair()
    trusted_id = ID.from_pubkey(trusted.public_key).to_base58()
    async with (
        running_host(
            is_trusted=_trusting(trusted_id), limits=limits, close_untrusted=False
        ) as server,
        contextlib.AsyncExitStack() as stack,
    ):
        kept = [await stack.enter_async_context(intrude(server.addrs[0])) for _ in range(3)]
        refused = await stack.enter_async_context(intrude(server.addrs[0]))
        with trio.fail_after(5):
            await refused.wait_closed()
        assert not any(intruder.closed for intruder in kept)
        assert server._swarm.admission_statistics()[1] == 3
        async with intrude(server.addrs[0], trusted) as friend:
            stream = await friend.open_stream(ECHO)
            await stream.write(b"still served")
            assert await stream.read(64) == b"still served"


BACKOFF = ConnectionLimits(max_untrusted=1, untrusted_grace_s=30, backoff_s=3.0, max_backoff_s=6.0)
"""3 s of backoff: time enough, on a loaded machine, to try a refused address again."""


async def _strangers_find_no_room(addr: str, stack: contextlib.AsyncExitStack) -> None:
    """From 127.0.0.2: one stranger takes the one untrusted slot and stays; three more
    finish their handshakes and are refused for room (three strikes)."""
    await stack.enter_async_context(intrude(addr, source="127.0.0.2"))
    for _ in range(3):
        async with intrude(addr, source="127.0.0.2") as refused:
            with trio.fail_after(5):
                await refused.wait_closed()


async def _echo_from(addr: str, keypair, source: str) -> bytes:
    async with intrude(addr, keypair, source=source) as friend:
        stream = await friend.open_stream(ECHO)
        await stream.write(b"in")
        return await stream.read(64)


async def test_an_address_whose_strangers_keep_finding_no_room_is_refused_before_any_handshake():
    """While its backoff lasts, a connection from that address is reset before Noise
    starts; a trusted peer from another address gets in meanwhile; then it is let in again."""
    trusted = create_new_key_pair()
    trusted_id = ID.from_pubkey(trusted.public_key).to_base58()
    async with (
        running_host(
            is_trusted=_trusting(trusted_id), limits=BACKOFF, close_untrusted=False
        ) as server,
        contextlib.AsyncExitStack() as stack,
    ):
        addr = server.addrs[0]
        await _strangers_find_no_room(addr, stack)
        backed_off = trio.current_time()
        with trio.fail_after(5), pytest.raises(Exception):  # noqa: B017 - reset at accept
            async with intrude(addr, source="127.0.0.2"):
                pass
        assert await _echo_from(addr, trusted, "127.0.0.3") == b"in"
        await trio.sleep_until(backed_off + BACKOFF.backoff_s + 0.2)
        async with intrude(addr, source="127.0.0.2") as again:  # a handshake again
            with trio.fail_after(5):
                await again.wait_closed()  # and refused for room, as before


async def test_an_address_a_trusted_peer_came_from_is_never_refused_for_its_strangers():
    """Same host, same NAT: the strangers' handshakes go on rather than lock the peer out."""
    trusted = create_new_key_pair()
    trusted_id = ID.from_pubkey(trusted.public_key).to_base58()
    async with (
        running_host(
            is_trusted=_trusting(trusted_id), limits=BACKOFF, close_untrusted=False
        ) as server,
        contextlib.AsyncExitStack() as stack,
    ):
        addr = server.addrs[0]
        assert await _echo_from(addr, trusted, "127.0.0.2") == b"in"
        await _strangers_find_no_room(addr, stack)
        async with intrude(addr, source="127.0.0.2") as stranger:  # not reset at accept
            with trio.fail_after(5):
                await stranger.wait_closed()
        assert await _echo_from(addr, trusted, "127.0.0.2") == b"in"


async def test_an_untrusted_peer_may_open_only_a_few_streams_at_once():
    limits = ConnectionLimits(max_streams_untrusted=2, untrusted_grace_s=30)
    async with running_host(
        is_trusted=lambda _: False, limits=limits, close_untrusted=False
    ) as server:
        server.set_stream_handler(ECHO, _echo_forever, require_trust=False)
        async with intrude(server.addrs[0]) as intruder:
            open_ones = [await intruder.open_stream(ECHO) for _ in range(2)]
            with pytest.raises(Exception):  # noqa: B017 - reset before negotiation
                await intruder.open_stream(ECHO)
            for stream in open_ones:
                await stream.write(b"x")
                assert await stream.read(1) == b"x"


async def _echo_forever(stream: Libp2pByteStream, _peer: str) -> None:
    while data := await stream.receive_some():
        await stream.send_all(data)


@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted", "trusted"])
async def test_data_sent_past_the_window_beyond_the_budget_closes_the_connection(trusted):
    """A peer that ignores Yamux flow control cannot make the host buffer without bound."""
    limits = ConnectionLimits(
        untrusted_receive_bytes=MIB, trusted_receive_bytes=4 * MIB, untrusted_grace_s=2
    )
    keypair = create_new_key_pair()
    peer_id = ID.from_pubkey(keypair.public_key).to_base58()
    is_trusted = _trusting(peer_id) if trusted else (lambda _: False)
    async with running_host(is_trusted=is_trusted, limits=limits, close_untrusted=False) as server:
        server.set_stream_handler(BULK, _never_reads, require_trust=False)
        async with intrude(server.addrs[0], keypair) as intruder:
            stream = await intruder.open_stream(BULK)
            with trio.fail_after(10), contextlib.suppress(Exception):
                await intruder.write_past_window(stream, b"y" * (8 * MIB))
            with trio.fail_after(5):
                await intruder.wait_closed()


async def _never_reads(stream: Libp2pByteStream, _peer: str) -> None:
    await trio.sleep_forever()


def _kernel_receive_buffers(port: int) -> list[int]:
    """The receive buffer sizes (bytes) of the established sockets on local `port`."""
    out = subprocess.run(
        ["ss", "-tmnH", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [int(size) for size in re.findall(r"\brb(\d+)", out)]


async def test_an_untrusted_peer_past_its_budget_is_stalled_until_its_grace_ends():
    """Not closed at once (it would reconnect and cost a new handshake): its frames are
    left unread, the host holding no more than the budget, and the kernel no more than
    the socket's fixed receive buffer (`ss`), until the grace closes it."""
    limits = ConnectionLimits(
        untrusted_receive_bytes=MIB, untrusted_socket_receive_bytes=16 * 1024, untrusted_grace_s=2
    )
    async with running_host(
        is_trusted=lambda _: False, limits=limits, close_untrusted=False
    ) as server:
        server.set_stream_handler(BULK, _never_reads, require_trust=False)
        async with intrude(server.addrs[0]) as intruder, trio.open_nursery() as nursery:
            started = trio.current_time()
            stream = await intruder.open_stream(BULK)

            async def flood() -> None:
                with contextlib.suppress(Exception):  # until the host closes the connection
                    await intruder.write_past_window(stream, b"y" * (16 * MIB))

            nursery.start_soon(flood)
            await trio.sleep(1.0)
            assert not intruder.closed
            held = [
                sum(len(b) for b in conn.muxed_conn.stream_buffers.values())
                for conns in server._swarm.connections.values()
                for conn in conns
            ]
            assert held and max(held) <= MIB
            assert max(_kernel_receive_buffers(tcp_port(server.addrs[0]))) <= 2 * 16 * 1024
            with trio.fail_after(5):
                await intruder.wait_closed()
            assert trio.current_time() - started >= 1.5


async def test_a_multistream_message_over_1024_bytes_ends_the_handshake_at_once():
    """Before any handshake, a stranger announcing a huge protocol name is not buffered."""
    async with running_host() as server:
        with trio.fail_after(5):
            stream = await trio.open_tcp_stream("127.0.0.1", tcp_port(server.addrs[0]))
            with contextlib.suppress(trio.BrokenResourceError):
                await stream.send_all(encode_varint(64 * MIB) + b"/" * (2 * MIB))
            while await stream.receive_some(65536):
                pass
        async with running_host(()) as client:
            assert await echo_round_trip(client, server.addrs[0], b"ok") == b"ok"


async def test_the_host_opens_no_identify_stream_to_a_peer_that_connects():
    async with running_host() as server, intrude(server.addrs[0]) as intruder:
        with trio.move_on_after(1.5) as idle:
            await intruder.muxed.accept_stream()
        assert idle.cancelled_caught, "the host opened a stream to its caller"


async def _bulk_sender(stream: Libp2pByteStream, _peer: str) -> None:
    """Send 1 MiB pieces until told to stop, each under a time limit drawn at random."""
    rng = random.Random(len(_peer))
    with contextlib.suppress(StreamBroken):  # the reader left: the test is over
        while True:
            with trio.move_on_after(rng.uniform(0, 0.02)):
                await stream.send_all(b"b" * MIB)
            await trio.sleep(0)


async def test_writes_cancelled_at_random_points_never_break_the_connection_in_process():
    """Both ends in this process: 8 streams of 1 MiB writes, each cut short at random,
    while echo round trips go on over the same connection."""
    async with running_host() as server, running_host(()) as client:
        server.set_stream_handler(BULK, _bulk_sender)
        await client.connect(server.addrs[0])
        first = _connection(client, server)
        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(_drain, client, server.addrs[0])
            for n in range(40):
                payload = f"round {n}".encode()
                assert await echo_round_trip(client, server.addrs[0], payload) == payload
                await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
        assert _connection(client, server) is first


async def _drain(client: P2PHost, target: str) -> None:
    stream = await client.new_stream(target, BULK)
    while await stream.receive_some(65536):
        pass


def _connection(client: P2PHost, server: P2PHost) -> object:
    conns = client._swarm.connections.get(ID.from_base58(server.peer_id), [])
    live = [c for c in conns if not c.is_closed]
    assert len(live) == 1
    return live[0]


async def test_a_silent_socket_is_closed_when_the_handshake_time_limit_runs_out():
    """Accepted once the kernel's 1 s hold ends (TCP_DEFER_ACCEPT), then 0.5 s to speak."""
    limits = ConnectionLimits(defer_accept_s=1, handshake_timeout_s=0.5)
    async with running_host(limits=limits) as server:
        sock = await silent_socket(tcp_port(server.addrs[0]), "127.0.0.1")
        started = trio.current_time()
        with trio.fail_after(5), sock:
            while await sock.recv(4096):
                pass
        assert trio.current_time() - started < 3


@pytest.mark.parametrize(
    ("sources", "expected"),
    [(["127.0.0.2"], 4), (["127.0.0.2", "127.0.0.3", "127.0.0.4"], 6)],
    ids=["one address: per-address bound", "three addresses: total bound"],
)
async def test_handshakes_are_bounded_per_address_and_in_total(sources, expected):
    limits = ConnectionLimits(defer_accept_s=1, max_handshakes=6, max_handshakes_per_address=4)
    async with running_host(limits=limits) as server:
        port = tcp_port(server.addrs[0])
        socks = [await silent_socket(port, source) for source in sources for _ in range(10)]
        try:
            with trio.fail_after(5):
                while server._swarm.admission_statistics()[0] != expected:
                    await trio.sleep(0.02)
            await trio.sleep(0.3)
            assert server._swarm.admission_statistics()[0] == expected
            async with running_host(()) as client:  # a speaking peer still gets in
                assert await echo_round_trip(client, server.addrs[0], b"in") == b"in"
        finally:
            for sock in socks:
                sock.close()


async def test_a_second_connection_of_one_peer_id_leaves_the_first_open():
    """The REPL and a `gbr-node call` share one identity: the call's connection must not
    trim the REPL's, which an approval's outcome comes back on (past py-libp2p's 20 s grace,
    its stock trimming kept one connection per peer and closed the older)."""
    friend = create_new_key_pair()
    friend_id = ID.from_pubkey(friend.public_key)
    limits = ConnectionLimits(max_connections_per_peer=3)
    async with (
        running_host(is_trusted=_trusting(friend_id.to_base58()), limits=limits) as server,
        contextlib.AsyncExitStack() as stack,
    ):
        first = await stack.enter_async_context(intrude(server.addrs[0], friend))
        await first.open_stream(ECHO)
        for conn in server._swarm.get_connections(friend_id):
            conn._created_at -= 60  # past the stock 20 s grace, as a long REPL session is
        others = [await stack.enter_async_context(intrude(server.addrs[0], friend))]
        others.append(await stack.enter_async_context(intrude(server.addrs[0], friend)))
        await trio.sleep(0.5)
        assert not first.closed and not any(o.closed for o in others)
        assert len(server._swarm.get_connections(friend_id)) == 3
        for conn in server._swarm.get_connections(friend_id):
            conn._created_at -= 60
        beyond = await stack.enter_async_context(intrude(server.addrs[0], friend))
        with trio.fail_after(5):  # the fourth trims one: the idlest, oldest
            while len(server._swarm.get_connections(friend_id)) > 3:
                await trio.sleep(0.05)
        assert not first.closed  # it has a stream open
        assert not beyond.closed
