"""Circuit relay v2 between real hosts on 127.0.0.1 (issue 23): the relay forwards bytes
it cannot read, trust stays end to end, and what a peer can make a relay hold is bounded.
The same across NATs, with real processes: tests/netns/test_relay.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import multiaddr
import pytest
import trio
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.custom_types import TProtocol
from libp2p.peer.id import ID

from gbr_node.errors import PeerUnreachable
from gbr_node.p2p.admission import ConnectionLimits
from gbr_node.p2p.circuit import HOP_PROTOCOL_ID, STOP_PROTOCOL_ID, pb, read_message, write_message
from gbr_node.p2p.host import P2PHost, open_host
from gbr_node.p2p.relaybook import HopLimits

from .helpers import ECHO, LOOPBACK, echo_handler, echo_round_trip

OK, PERMISSION_DENIED, NO_RESERVATION = 100, 202, 204


@dataclass
class Trio:
    """R relays; B holds a reservation on R and accepts what R brings; A dials."""

    r: P2PHost
    b: P2PHost
    a: P2PHost
    told: list[str]  # what B's reservations said

    @property
    def circuit(self) -> str:
        return f"{self.r.addrs[0]}/p2p-circuit/p2p/{self.b.peer_id}"


@asynccontextmanager
async def relayed(
    limits: HopLimits | None = None,
    *,
    r_trusts=lambda _peer: True,
    serves_any: bool = False,
    r_limits: ConnectionLimits | None = None,
) -> AsyncIterator[Trio]:
    async with (
        # strangers stay for their grace, as `serve` lets them (close_untrusted=False)
        open_host(
            create_new_key_pair(),
            LOOPBACK,
            is_trusted=r_trusts,
            close_untrusted=False,
            limits=r_limits,
        ) as r,
        open_host(create_new_key_pair(), LOOPBACK, is_trusted=lambda _: True) as b,
        open_host(create_new_key_pair(), LOOPBACK, is_trusted=lambda _: True) as a,
        trio.open_nursery() as nursery,
    ):
        r.serve_relay(limits or HopLimits(), serves_any=serves_any)
        b.set_stream_handler(ECHO, echo_handler)
        b.accept_relayed(lambda: {r.peer_id})
        told: list[str] = []
        nursery.start_soon(b.keep_reservations, [r.addrs[0]], told.append)
        with trio.fail_after(10):
            while not (b.reservations and b.reservations.circuit_addrs()):
                await trio.sleep(0.02)
        yield Trio(r, b, a, told)
        nursery.cancel_scope.cancel()


async def hop(
    host: P2PHost, relay: P2PHost, kind: str, peer: str | None = None, raw: bytes | None = None
):
    """Send one HOP request (`kind`: RESERVE or CONNECT; `raw` bytes instead, when
    given) from `host`; the answer."""
    messages = pb()
    await host.connect(relay.addrs[0])
    stream = await host._host.new_stream(
        ID.from_base58(relay.peer_id), [TProtocol(HOP_PROTOCOL_ID)]
    )
    request = messages.HopMessage(type=getattr(messages.HopMessage, kind))
    if peer is not None:
        request.peer.id = ID.from_base58(peer).to_bytes()
    if raw is None:
        await write_message(stream, request)
    else:
        await stream.write(raw)
    try:
        return await read_message(stream, messages.HopMessage)
    finally:
        await stream.reset()


async def test_a_peer_behind_a_relay_is_reached_and_the_connection_is_relayed() -> None:
    async with relayed() as world:
        echoed = await echo_round_trip(world.a, world.circuit, b"through the relay" * 1000)
        assert echoed == b"through the relay" * 1000
        assert world.a.connection_types(world.b.peer_id) == ("relayed",)
        assert world.r.relay is not None and world.r.relay.statistics() == (1, 1)


async def test_a_reservation_is_for_the_peer_noise_proved_never_the_one_the_message_names():
    async with (
        relayed() as world,
        open_host(create_new_key_pair(), [], is_trusted=lambda _: True) as x,
    ):
        # X asks for a reservation in C's name; it gets one for itself only
        c_id = ID.from_pubkey(create_new_key_pair().public_key).to_base58()
        answer = await hop(x, world.r, "RESERVE", peer=c_id)
        assert answer.status == OK
        connect = await hop(world.a, world.r, "CONNECT", peer=c_id)
        assert connect.status == NO_RESERVATION
        connect = await hop(world.a, world.r, "CONNECT", peer=x.peer_id)
        assert connect.status != NO_RESERVATION  # X's own reservation exists


async def test_a_relay_that_answers_in_the_peers_place_fails_the_noise_handshake() -> None:
    async with relayed() as world:
        relay_swarm = world.r._swarm

        async def impostor(stream) -> None:
            """Answers CONNECT with OK, then runs Noise itself, as the relay, not B."""
            messages = pb()
            await read_message(stream, messages.HopMessage)
            await write_message(
                stream, messages.HopMessage(type=messages.HopMessage.STATUS, status=OK)
            )
            circuit = f"/p2p/{world.r.peer_id}/p2p-circuit/p2p/{world.a.peer_id}"
            await relay_swarm.handle_relayed(stream, multiaddr.Multiaddr(circuit), world.r.peer_id)

        world.r._host.set_stream_handler(TProtocol(HOP_PROTOCOL_ID), impostor)
        with pytest.raises(PeerUnreachable, match="a different peer answered"):
            await world.a.connect(world.circuit)
        assert world.b.peer_id not in world.a.connected_peers()


@pytest.mark.parametrize("kind", ["RESERVE", "CONNECT", "GARBAGE"])
async def test_a_relay_for_trusted_peers_refuses_a_stranger_before_any_work(kind) -> None:
    """Refused before anything the stranger sent is read (GBR-DOS-01): garbage too."""
    # close_untrusted=False: strangers stay for their grace, as `serve` lets them
    async with open_host(
        create_new_key_pair(), LOOPBACK, is_trusted=lambda _: False, close_untrusted=False
    ) as r:
        r.serve_relay(HopLimits(), serves_any=False)
        async with open_host(create_new_key_pair(), [], is_trusted=lambda _: True) as s:
            if kind == "GARBAGE":
                answer = await hop(s, r, "RESERVE", raw=b"\xff" * 64)
            else:
                answer = await hop(s, r, kind, peer=None if kind == "RESERVE" else r.peer_id)
            assert answer.status == PERMISSION_DENIED
            assert r.relay is not None and r.relay.statistics() == (0, 0)


async def test_stop_streams_from_a_peer_that_is_not_our_relay_are_reset_unread() -> None:
    async with relayed() as world:
        messages = pb()
        await world.a.connect(world.b.addrs[0])
        with pytest.raises(Exception):  # noqa: B017 - reset, before or after negotiation
            stream = await world.a._host.new_stream(
                ID.from_base58(world.b.peer_id), [TProtocol(STOP_PROTOCOL_ID)]
            )
            request = messages.StopMessage(type=messages.StopMessage.CONNECT)
            request.peer.id = ID.from_base58(world.a.peer_id).to_bytes()
            await write_message(stream, request)
            await read_message(stream, messages.StopMessage)  # no STATUS comes back
        assert world.b.connection_types(world.a.peer_id) == ("direct",)


async def test_a_circuit_ends_when_its_byte_budget_is_spent() -> None:
    async with relayed(HopLimits(circuit_bytes=256 * 1024)) as world:
        assert await echo_round_trip(world.a, world.circuit, b"x" * 1024) == b"x" * 1024
        with pytest.raises(Exception):  # noqa: B017 - the stream breaks, however it is said
            await echo_round_trip(world.a, world.circuit, b"y" * 512 * 1024)
        relay = world.r.relay
        assert relay is not None
        with trio.fail_after(10):
            while relay.statistics()[1]:
                await trio.sleep(0.05)


async def test_the_reservation_is_renewed_before_it_expires() -> None:
    async with relayed(HopLimits(reservation_s=2)) as world:
        await trio.sleep(5)  # two and a half reservations
        echoed = await echo_round_trip(world.a, world.circuit, b"still there")
        assert echoed == b"still there"


async def test_a_relay_for_anyone_keeps_a_strangers_reservation_past_its_grace() -> None:
    """`relay_for = "any"`: a stranger holding a reservation is not closed after the 3 s
    an untrusted connection gets, or B could not be reached for long."""
    async with relayed(r_trusts=lambda _peer: False, serves_any=True) as world:
        await trio.sleep(4)
        echoed = await echo_round_trip(world.a, world.circuit, b"a stranger's relay")
        assert echoed == b"a stranger's relay"
        assert not [line for line in world.told if "gone" in line], world.told


async def test_the_relay_keeps_an_idle_reservation_holders_connection_open() -> None:
    async with relayed(r_limits=ConnectionLimits(idle_timeout_s=1.0)) as world:
        await trio.sleep(3)  # three idle timeouts without a stream on B's connection
        assert not [line for line in world.told if "gone" in line], world.told
        assert await echo_round_trip(world.a, world.circuit, b"idle") == b"idle"
