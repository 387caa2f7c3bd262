"""Circuit relay v2, the client's side (issue 23): dialing a peer through a relay,
accepting connections a relay brings, and keeping reservations on relays.

Spec: https://github.com/libp2p/specs/blob/master/relay/circuit-v2.md. The
messages are py-libp2p's (`libp2p.relay.circuit_v2.pb.circuit_pb2`), framed as
the spec says (unsigned-varint length prefix), one exchange per stream:

- dial (`CircuitDialer`, a libp2p transport for `/p2p-circuit` multiaddrs): a
  HOP stream to the relay carries CONNECT(target); on STATUS OK the stream
  itself is the raw connection, which the swarm secures with Noise and
  multiplexes with Yamux as it does a TCP socket. Noise proves the target's
  peer ID end to end: a relay that answers in the target's place fails it.
- accept (`StopHandler`): a STOP stream from one of the profile's relays
  carries CONNECT(source); it is answered OK and handed to the swarm's
  admission (`GbrSwarm.handle_relayed`) like an inbound TCP connection. The
  source the relay names is not trusted: Noise proves who it is, and the
  profile decides what it may do. STOP streams from any other peer are reset.
- reserve (`Reservations`): RESERVE on a HOP stream to each relay of the
  profile, renewed when half its time is gone, made again as soon as the
  connection to the relay is gone (the relay restarted, the network changed).

py-libp2p's own `CircuitV2Transport` is not used: it dials relays from its
peerstore and a DHT, reserves on every relay it dials, never notices a relay
restart, and names its own peer ID as the relay of inbound circuits.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from types import ModuleType
from typing import Any

import multiaddr
import trio
from libp2p.abc import INetStream, IRawConnection, ITransport
from libp2p.connection_types import ConnectionType
from libp2p.custom_types import TProtocol
from libp2p.host.basic_host import BasicHost
from libp2p.identity.identify.identify import ID as IDENTIFY_PROTOCOL_ID
from libp2p.identity.identify.pb.identify_pb2 import Identify
from libp2p.network.connection.raw_connection import RawConnection
from libp2p.peer.id import ID
from libp2p.transport.exceptions import OpenConnectionError
from libp2p.utils.varint import encode_varint_prefixed, read_varint_prefixed_bytes_limited

from gbr_node import lean
from gbr_node.errors import GbrError, PeerUnreachable
from gbr_node.p2p.addresses import parse_peer_id
from gbr_node.p2p.dial_errors import explain_dial_failure

__all__ = [
    "HOP_PROTOCOL_ID",
    "STOP_PROTOCOL_ID",
    "CircuitDialer",
    "RelayRefused",
    "Reservations",
    "StopHandler",
    "is_circuit",
    "reset_quietly",
    "split_circuit",
]

log = logging.getLogger(__name__)

HOP_PROTOCOL_ID = "/libp2p/circuit/relay/0.2.0/hop"
STOP_PROTOCOL_ID = "/libp2p/circuit/relay/0.2.0/stop"
MAX_MESSAGE_BYTES = 4096
"""A HOP or STOP message is a few peer IDs and addresses; larger ones are refused."""
MAX_IDENTIFY_BYTES = 8192
"""An identify answer is a key, a few addresses and protocol IDs; larger ones are refused."""
EXCHANGE_TIMEOUT_S = 10.0
"""Time for one request and its answer on a HOP or STOP stream, seconds."""
RETRY_FIRST_S, RETRY_MAX_S = 1.0, 10.0
"""A reservation that failed is tried again after 1 s, doubling up to 10 s."""
WATCH_INTERVAL_S = 0.5
"""How often a held reservation's relay connection is checked, seconds."""

OK = 100
_STATUS_WORDS = {
    200: "refused our reservation",
    201: "is at its limits (reservations or circuits)",
    202: "does not relay for us (its relay_for setting)",
    203: "could not reach the peer",
    204: "holds no reservation for the peer (it is not connected to that relay)",
    400: "found our message malformed",
    401: "did not expect our message",
}
"""What each circuit relay v2 status code (spec, `Status`) means for the person."""


class RelayRefused(PeerUnreachable):
    """A relay answered a RESERVE or CONNECT with a status other than OK."""

    def __init__(self, relay: str, status: int) -> None:
        words = _STATUS_WORDS.get(status, f"answered status {status}")
        super().__init__(f"relay {relay} {words}")
        self.status = status


def pb() -> ModuleType:
    """py-libp2p's circuit relay v2 messages (loaded on first use: gbr_node/lean.py)."""
    lean.allow("libp2p.relay")
    from libp2p.relay.circuit_v2.pb import circuit_pb2

    return circuit_pb2


def is_circuit(addr: multiaddr.Multiaddr) -> bool:
    """True for a `/p2p-circuit` multiaddr."""
    return any(p.name == "p2p-circuit" for p in addr.protocols())


def split_circuit(addr: multiaddr.Multiaddr) -> tuple[str, ID, ID]:
    """(the relay's own multiaddr ending in `/p2p/RELAY`, relay peer ID, target peer ID)
    of `RELAY_ADDR/p2p/RELAY/p2p-circuit/p2p/TARGET`.

    Raises:
        GbrError: `addr` is not of that shape.
    """
    text = str(addr)
    relay_part, sep, target_part = text.partition("/p2p-circuit")
    relay_id = multiaddr.Multiaddr(relay_part).get_peer_id() if relay_part else None
    target = target_part.removeprefix("/p2p/")
    if not sep or relay_id is None or not target or "/" in target:
        raise GbrError(f"{text!r} is not RELAY/p2p/RELAY_ID/p2p-circuit/p2p/PEER_ID")
    return relay_part, ID.from_base58(relay_id), ID.from_base58(target)


async def write_message(stream: INetStream, message: Any) -> None:
    """Write one protobuf message with its unsigned-varint length prefix."""
    await stream.write(encode_varint_prefixed(message.SerializeToString()))


async def read_message(stream: INetStream, cls: type[Any]) -> Any:
    """Read one length-prefixed protobuf message of `cls`, at most `MAX_MESSAGE_BYTES`,
    within `EXCHANGE_TIMEOUT_S`. Raises trio.TooSlowError, or the library's errors for
    an oversized, cut or malformed message."""
    with trio.fail_after(EXCHANGE_TIMEOUT_S):
        data = await read_varint_prefixed_bytes_limited(stream, MAX_MESSAGE_BYTES)
    message = cls()
    message.ParseFromString(data)
    return message


Connect = Callable[[str, float], Awaitable[str]]
"""`P2PHost.connect(target, timeout_s)`: a connection to `target` exists afterwards."""


class CircuitDialer(ITransport):
    """A libp2p transport that dials `/p2p-circuit` multiaddrs through the relay they name.

    `connect` reaches the relay (over TCP, with its own admission); the swarm then
    upgrades the returned raw connection with Noise and Yamux. Registered before
    TCP, whose `can_dial` would take a circuit address for its own.
    """

    def __init__(self, host: BasicHost, connect: Connect) -> None:
        self._host = host
        self._connect = connect

    def can_dial(self, maddr: multiaddr.Multiaddr) -> bool:
        return is_circuit(maddr)

    def can_listen(self, maddr: multiaddr.Multiaddr) -> bool:
        return False

    def protocols(self) -> list[str]:
        return ["p2p-circuit"]

    def listen_order(self) -> int:
        """Before TCP (0) in the swarm's transport list: the first that can dial wins."""
        return -1

    def create_listener(self, handler_function: Any) -> Any:
        raise OpenConnectionError("a circuit address is listened on by reserving on its relay")

    async def dial(self, maddr: multiaddr.Multiaddr) -> IRawConnection:
        """A raw connection to the target of `maddr` through its relay.

        Raises:
            OpenConnectionError: the relay is unreachable, answers too late, or
                refuses (its cause is a `RelayRefused` naming why).
        """
        try:
            relay_addr, relay_id, target = split_circuit(maddr)
            await self._connect(relay_addr, EXCHANGE_TIMEOUT_S)
            messages = pb()
            stream = await self._host.new_stream(relay_id, [TProtocol(HOP_PROTOCOL_ID)])
        except Exception as exc:  # unreachable relay (GbrError), too slow, no HOP stream
            raise OpenConnectionError(f"relay of {maddr}: {exc}") from exc
        try:
            request = messages.HopMessage(
                type=messages.HopMessage.CONNECT, peer=messages.PeerId(id=target.to_bytes())
            )
            await write_message(stream, request)
            answer = await read_message(stream, messages.HopMessage)
            if answer.status != OK:
                raise RelayRefused(relay_id.to_base58(), answer.status)
        except BaseException as exc:
            await reset_quietly(stream)
            if isinstance(exc, Exception):
                raise OpenConnectionError(f"relay of {maddr}: {exc}") from exc
            raise
        circuit = multiaddr.Multiaddr(f"/p2p/{relay_id}/p2p-circuit/p2p/{target}")
        return RawConnection(stream, True, ConnectionType.RELAYED, [circuit])


class StopHandler:
    """Serves STOP streams: connections a relay of ours brings (see the module docstring).

    `relays()` returns the peer IDs (base58) of the profile's relays, asked anew
    for each stream; `admit(stream, circuit, relay)` is `GbrSwarm.handle_relayed`.
    """

    def __init__(
        self,
        relays: Callable[[], set[str]],
        admit: Callable[[INetStream, multiaddr.Multiaddr, str], Awaitable[None]],
    ) -> None:
        self._relays = relays
        self._admit = admit

    async def __call__(self, stream: INetStream) -> None:
        relay = stream.muxed_conn.peer_id.to_base58()
        if relay not in self._relays():
            log.info("refused a relayed connection from %s: not one of our relays", relay)
            await reset_quietly(stream)
            return
        messages = pb()
        try:
            request = await read_message(stream, messages.StopMessage)
            if request.type != messages.StopMessage.CONNECT or not request.HasField("peer"):
                raise ValueError(f"unexpected STOP message type {request.type}")
            source = parse_peer_id(ID(request.peer.id).to_base58(), "STOP peer")
            answer = messages.StopMessage(type=messages.StopMessage.STATUS, status=OK)
            await write_message(stream, answer)
        except Exception as exc:
            log.info("relayed connection from %s failed before its handshake: %s", relay, exc)
            await reset_quietly(stream)
            return
        circuit = multiaddr.Multiaddr(f"/p2p/{relay}/p2p-circuit/p2p/{source}")
        await self._admit(stream, circuit, relay)


class Reservations:
    """Keeps a reservation on each of the profile's relays (see the module docstring).

    `run(relays)` runs until cancelled; `circuit_addrs()` lists the
    `RELAY/p2p-circuit/p2p/SELF` multiaddrs at which peers can reach this node
    now (relays that hold a reservation for it). `tell(line)` hears of each
    change: a reservation made, a relay gone, a failure (each distinct reason
    once, not at every retry).
    """

    def __init__(
        self,
        host: BasicHost,
        connect: Connect,
        connected: Callable[[ID], bool],
        tell: Callable[[str], None],
    ) -> None:
        self._host = host
        self._connect = connect
        self._connected = connected
        self._tell = tell
        self._held: dict[str, float] = {}  # relay multiaddr -> expiry (time.time())

    def circuit_addrs(self) -> tuple[str, ...]:
        """Where peers reach this node through a relay now, as multiaddrs."""
        me = self._host.get_id().to_base58()
        now = time.time()
        return tuple(
            f"{relay}/p2p-circuit/p2p/{me}" for relay, until in self._held.items() if until > now
        )

    async def run(self, relays: Sequence[str]) -> None:
        """Keep a reservation on every relay in `relays` (`/ip4/A/tcp/P/p2p/RELAY`)
        until cancelled; failures are told and tried again, never raised."""
        async with trio.open_nursery() as nursery:
            for relay in relays:
                nursery.start_soon(self._keep, relay)

    async def _keep(self, relay_addr: str) -> None:
        relay_id = ID.from_base58(multiaddr.Multiaddr(relay_addr).get_peer_id())
        delay, last_failure = RETRY_FIRST_S, ""
        while True:
            try:
                ttl_s = await self.reserve(relay_addr, relay_id)
            except (GbrError, OSError, trio.TooSlowError) as exc:
                reason = str(exc) or "no answer in time"
                if self._held.pop(relay_addr, None) is not None or reason != last_failure:
                    self._tell(f"no reservation on relay {relay_addr}: {reason} (trying again)")
                last_failure = reason
                await trio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            delay, last_failure = RETRY_FIRST_S, ""
            renew_at = trio.current_time() + ttl_s / 2
            while trio.current_time() < renew_at and self._connected(relay_id):
                await trio.sleep(WATCH_INTERVAL_S)
            if not self._connected(relay_id):
                self._held.pop(relay_addr, None)
                self._tell(f"relay {relay_addr} gone: reserving again")

    async def reserve(self, relay_addr: str, relay_id: ID) -> float:
        """Make (or renew) one reservation; returns its length in seconds.

        Raises:
            PeerUnreachable: the relay cannot be reached, or refuses (`RelayRefused`).
            trio.TooSlowError: it did not answer within `EXCHANGE_TIMEOUT_S`.
        """
        await self._connect(relay_addr, EXCHANGE_TIMEOUT_S)
        messages = pb()
        try:
            stream = await self._host.new_stream(relay_id, [TProtocol(HOP_PROTOCOL_ID)])
        except Exception as exc:
            reason = explain_dial_failure(exc, protocol_id=HOP_PROTOCOL_ID)
            raise PeerUnreachable(f"not a relay? {reason} (a relay runs serve --relay)") from exc
        try:
            await write_message(stream, messages.HopMessage(type=messages.HopMessage.RESERVE))
            answer = await read_message(stream, messages.HopMessage)
        except trio.TooSlowError:
            raise
        except Exception as exc:
            raise PeerUnreachable(f"reservation cut short ({exc!r})") from exc
        finally:
            await reset_quietly(stream)
        if answer.status != OK:
            raise RelayRefused(relay_id.to_base58(), answer.status)
        expires_at = float(answer.reservation.expire) if answer.HasField("reservation") else 0.0
        ttl_s = expires_at - time.time()
        if ttl_s <= 0:
            raise PeerUnreachable("the reservation had expired on arrival (clocks apart?)")
        if relay_addr not in self._held:
            seen = await self.observed_by(relay_id)
            seen_as = f"; the relay sees this node come from {seen}" if seen else ""
            me = self._host.get_id()
            self._tell(f"reachable through relay: {relay_addr}/p2p-circuit/p2p/{me}{seen_as}")
        self._held[relay_addr] = expires_at
        return ttl_s

    async def observed_by(self, relay_id: ID) -> str | None:
        """The address `relay_id` sees this node's connection come from, as its identify
        answer tells it (`observed_addr`), or None when it does not say. A NAT's outer
        address and a port it chose for this connection: shown to the person, never
        announced or dialed on its word (issue 23)."""
        try:
            with trio.fail_after(EXCHANGE_TIMEOUT_S):
                stream = await self._host.new_stream(relay_id, [IDENTIFY_PROTOCOL_ID])
                try:
                    data = await read_varint_prefixed_bytes_limited(stream, MAX_IDENTIFY_BYTES)
                finally:
                    await reset_quietly(stream)
            answer = Identify()
            answer.ParseFromString(data)
            return str(multiaddr.Multiaddr(answer.observed_addr)) if answer.observed_addr else None
        except Exception as exc:  # no identify, cut short, malformed: nothing to show
            log.info("no observed address from relay %s: %s", relay_id, exc)
            return None


async def reset_quietly(stream: INetStream) -> None:
    """Reset `stream`; one already gone is left as it is."""
    try:
        await stream.reset()
    except Exception:  # already gone
        return
