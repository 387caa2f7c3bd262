"""Being a relay: the circuit relay v2 HOP service (issue 23, `[node] relay = true`).

Spec: https://github.com/libp2p/specs/blob/master/relay/circuit-v2.md. One
request per HOP stream (as rust-libp2p serves it, and as circuit.py asks):

- RESERVE: decided by `RelayBook` (relaybook.py) for the peer ID the Noise
  handshake proved, never for a peer the message names (py-libp2p's own hop
  reserves for `msg.peer`, so anyone could take a reservation in another peer's
  name); answered with the expiry, this relay's addresses and a signed voucher
  (py-libp2p's `Reservation`).
- CONNECT: decided by `RelayBook`; the target is asked on a STOP stream; then
  the bytes are copied both ways until either side ends, the circuit's byte
  budget (both directions together) is spent or its time is up. Each circuit
  is its own entry (py-libp2p keys its circuits by peer ID, so a reconnect's
  new circuit was torn down by the old one's cleanup).

The relay only forwards bytes it cannot read: the two ends run Noise with
each other through it, so trust, tools and chat stay decided end to end.
Requests over a relayed connection are refused (the spec's rule).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence

import multiaddr
import trio
from libp2p.abc import INetStream
from libp2p.connection_types import ConnectionType
from libp2p.custom_types import TProtocol
from libp2p.host.basic_host import BasicHost
from libp2p.peer.id import ID

from gbr_node import lean
from gbr_node.p2p.addresses import parse_peer_id
from gbr_node.p2p.circuit import (
    EXCHANGE_TIMEOUT_S,
    HOP_PROTOCOL_ID,
    OK,
    STOP_PROTOCOL_ID,
    pb,
    read_message,
    reset_quietly,
    write_message,
)
from gbr_node.p2p.relaybook import Decision, HopLimits, RelayBook

lean.allow("libp2p.relay")
from libp2p.relay.circuit_v2.resources import RelayLimits, Reservation  # noqa: E402

__all__ = ["RelayService"]

log = logging.getLogger(__name__)

COPY_BYTES = 64 * 1024
"""The most read from one side of a circuit before it is written to the other."""
STATUS = {
    "PERMISSION_DENIED": 202,
    "RESOURCE_LIMIT_EXCEEDED": 201,
    "NO_RESERVATION": 204,
    "CONNECTION_FAILED": 203,
    "MALFORMED_MESSAGE": 400,
    "UNEXPECTED_MESSAGE": 401,
}
"""Circuit relay v2 status codes (spec, `Status`)."""


class RelayService:
    """Serves `/libp2p/circuit/relay/0.2.0/hop` on `host` (see the module docstring).

    `is_trusted(peer_id)` (base58) is the profile's trust, asked anew for each
    request; `book` holds the reservations and circuits; `addrs()` are this
    relay's dialable multiaddrs (without `/p2p/`), told to peers that reserve.
    `holds(peer_id)` says whether the relay must keep a peer's connection open.
    `tell(line)` hears of each new reservation and each circuit opened and closed
    (refusals go to the log only: strangers could fill a screen with them), with
    peers named by `name(peer_id)`.
    """

    def __init__(
        self,
        host: BasicHost,
        book: RelayBook,
        is_trusted: Callable[[str], bool],
        addrs: Callable[[], Sequence[str]],
        tell: Callable[[str], None] = lambda _line: None,
        name: Callable[[str], str] = lambda peer_id: peer_id,
    ) -> None:
        self._host = host
        self._book = book
        self._is_trusted = is_trusted
        self._addrs = addrs
        self._tell = tell
        self._name = name
        self._scopes: dict[int, trio.CancelScope] = {}
        self._serial = itertools.count()

    @property
    def limits(self) -> HopLimits:
        return self._book.limits

    def start(self) -> None:
        """Register the HOP handler on the host."""
        self._host.set_stream_handler(TProtocol(HOP_PROTOCOL_ID), self.handle_hop)

    def holds(self, peer_id: ID) -> bool:
        """True while `peer_id` holds a reservation or an open circuit here."""
        return self._book.holds(peer_id.to_base58(), trio.current_time())

    def statistics(self) -> tuple[int, int]:
        """(reservations held, circuits open)."""
        return self._book.statistics()

    async def handle_hop(self, stream: INetStream) -> None:
        """Serve one request on a HOP stream; the stream is closed or reset after."""
        messages = pb()
        remote = stream.muxed_conn.peer_id
        try:
            served = self._book.serves_any or self._is_trusted(remote.to_base58())
            relayed = stream.muxed_conn.get_connection_type() == ConnectionType.RELAYED
            if relayed or not served:  # decided before anything it sent is read
                await self._answer(stream, "PERMISSION_DENIED")
                return
            try:
                request = await read_message(stream, messages.HopMessage)
            except Exception as exc:  # cut, too large, too slow or no protobuf
                log.info("malformed HOP request from %s: %s", remote, exc)
                await self._answer(stream, "MALFORMED_MESSAGE")
                return
            if request.type == messages.HopMessage.RESERVE:
                await self._reserve(stream, remote)
            elif request.type == messages.HopMessage.CONNECT and request.HasField("peer"):
                await self._connect(stream, remote, request.peer.id)
            else:
                await self._answer(stream, "UNEXPECTED_MESSAGE")
        finally:
            await _close_quietly(stream)

    async def _reserve(self, stream: INetStream, remote: ID) -> None:
        peer = remote.to_base58()
        renewal = self._book.expires_at(peer) is not None
        decision = self._book.reserve(peer, self._is_trusted(peer), trio.current_time())
        if decision.refused:
            log.info("refused a reservation of %s: %s", peer, decision.refused)
            await self._answer(stream, decision.refused)
            return
        ttl_s = self.limits.reservation_s
        voucher = Reservation(remote, self._library_limits(), self._host)  # signed, expiring
        relay = self._host.get_id().to_base58()
        voucher.addrs = [multiaddr.Multiaddr(f"{a}/p2p/{relay}").to_bytes() for a in self._addrs()]
        messages = pb()
        answer = messages.HopMessage(
            type=messages.HopMessage.STATUS,
            status=OK,
            reservation=voucher.to_proto(),
            limit=self._limit_message(),
        )
        await write_message(stream, answer)
        log.info("reservation of %s for %.0f s", peer, ttl_s)
        if not renewal:
            self._tell(f"relay: reservation for {self._name(peer)} ({ttl_s:.0f} s, renewed by it)")

    async def _connect(self, stream: INetStream, remote: ID, target_bytes: bytes) -> None:
        source = remote.to_base58()
        try:
            target = parse_peer_id(ID(target_bytes).to_base58(), "CONNECT peer")
        except Exception:
            await self._answer(stream, "MALFORMED_MESSAGE")
            return
        key = next(self._serial)
        decision = self._book.open_circuit(
            key, source, target.to_base58(), self._is_trusted(source), trio.current_time()
        )
        if decision.refused:
            log.info("refused a circuit %s -> %s: %s", source, target, decision.refused)
            await self._answer(stream, decision.refused)
            return
        self._give_way(decision)
        between = f"{self._name(source)} -> {self._name(target.to_base58())}"
        left = [self.limits.circuit_bytes]  # both directions together
        scope = trio.CancelScope(deadline=trio.current_time() + self.limits.circuit_s)
        self._scopes[key] = scope
        try:
            with scope:
                other = await self._open_stop(source, target)
                if other is None:
                    await self._answer(stream, "CONNECTION_FAILED")
                    return
                try:
                    messages = pb()
                    answer = messages.HopMessage(
                        type=messages.HopMessage.STATUS, status=OK, limit=self._limit_message()
                    )
                    await write_message(stream, answer)
                    self._tell(f"relay: circuit {between} open")
                    await _copy_both_ways(stream, other, left)
                finally:
                    await reset_quietly(other)
        finally:
            self._scopes.pop(key, None)
            self._book.close_circuit(key)
            used = self.limits.circuit_bytes - left[0]
            log.info("circuit %s -> %s closed after %d bytes", source, target, used)
        self._tell(f"relay: circuit {between} closed ({used / 1024:.1f} KiB relayed)")

    async def _open_stop(self, source: str, target: ID) -> INetStream | None:
        """A STOP stream to `target` that accepted a circuit from `source`, or None."""
        messages = pb()
        try:
            with trio.fail_after(EXCHANGE_TIMEOUT_S):
                other = await self._host.new_stream(target, [TProtocol(STOP_PROTOCOL_ID)])
        except Exception as exc:
            log.info("circuit %s -> %s: target unreachable: %s", source, target, exc)
            return None
        try:
            request = messages.StopMessage(
                type=messages.StopMessage.CONNECT,
                peer=messages.PeerId(id=ID.from_base58(source).to_bytes()),
                limit=self._limit_message(),
            )
            await write_message(other, request)
            answer = await read_message(other, messages.StopMessage)
            if answer.status != OK:
                raise ValueError(f"status {answer.status}")
        except Exception as exc:
            log.info("circuit %s -> %s: target refused: %s", source, target, exc)
            await reset_quietly(other)
            return None
        return other

    def _give_way(self, decision: Decision) -> None:
        """Close the circuit that must give way to a trusted one (relaybook.py)."""
        if isinstance(decision.evict, int) and decision.evict in self._scopes:
            log.info("an untrusted circuit gives way to a trusted peer's")
            self._scopes[decision.evict].cancel()

    async def _answer(self, stream: INetStream, status: str) -> None:
        messages = pb()
        try:
            with trio.fail_after(EXCHANGE_TIMEOUT_S):
                answer = messages.HopMessage(type=messages.HopMessage.STATUS, status=STATUS[status])
                await write_message(stream, answer)
        except Exception:  # the requester left: nothing to tell
            return

    def _limit_message(self) -> object:
        return pb().Limit(duration=int(self.limits.circuit_s), data=self.limits.circuit_bytes)

    def _library_limits(self) -> RelayLimits:
        limits = self.limits
        return RelayLimits(
            duration=int(limits.circuit_s),
            data=limits.circuit_bytes,
            max_circuit_conns=limits.max_circuits,
            max_reservations=limits.max_reservations,
            reservation_ttl=int(limits.reservation_s),
        )


async def _copy_both_ways(one: INetStream, other: INetStream, left: list[int]) -> None:
    """Copy bytes between `one` and `other` until either ends or fails, or `left[0]`
    bytes (both directions together, counted down in place) have been copied."""

    async def copy(src: INetStream, dst: INetStream, done: trio.CancelScope) -> None:
        try:
            while left[0] > 0:
                data = await src.read(min(COPY_BYTES, left[0]))
                if not data:
                    break
                left[0] -= len(data)
                await dst.write(data)
        except Exception:  # one side reset or went away: the circuit ends
            pass
        done.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(copy, one, other, nursery.cancel_scope)
        nursery.start_soon(copy, other, one, nursery.cancel_scope)


async def _close_quietly(stream: INetStream) -> None:
    """Close `stream` so that what was written is read first (a reset may overtake
    it); reset it when that does not end within `EXCHANGE_TIMEOUT_S`."""
    try:
        with trio.fail_after(EXCHANGE_TIMEOUT_S):
            await stream.close()
    except Exception:
        await reset_quietly(stream)
