"""The node's libp2p host: TCP, Noise only, Yamux only, trusted peers only (DESIGN.md).

`open_host()` builds the host piece by piece instead of calling py-libp2p's
`new_host()`, whose defaults also offer `/tls/1.0.0`, `/secio/1.0.0`,
`/plaintext/2.0.0` and `/mplex/6.7.0`, retry every failed dial three times,
wait 250 ms per dial for extra connections, and attach a resource manager whose
per-peer rate-limiter state grows with every distinct peer ID (call limits live
in rpc/ instead). That resource manager is not used for admission either: its
connection limits count trusted and untrusted peers alike, its pre-handshake
admission knows only fixed CIDR rules (no per-address count), and it fails
open on its own errors. Here:

- security: `/noise` only; muxer: `/yamux/1.0.0` only (DESIGN.md, wire contracts);
- dials go to one given address at a time (`Swarm.dial_addr`, ~7 ms on
  loopback), never to addresses a peer advertised about itself;
  `ConnectionConfig(max_connections_per_peer=1)` also stops the library's own
  `dial_peer` (its fallback when a stream is opened on a dropped connection)
  from waiting 250 ms for a second and third connection;
- `RetryConfig(max_retries=0)`: a refused dial fails at once;
- `GbrSwarm` (swarm.py) admits inbound connections within `ConnectionLimits`
  (admission.py; GBR-DOS-01): handshakes bounded per address and in total,
  with py-libp2p's `inbound_upgrade_timeout` as their time limit, untrusted
  peers counted apart from trusted ones and closed after a short grace
  (at once with `close_untrusted`), idle connections closed; no auto-dialing;
- Yamux window updates once per half window read, as go-yamux sends them,
  not after every read (yamux_window.py); Yamux frames written whole even
  when a write is cancelled, and unread data bounded per connection
  (yamux_guard.py); multistream-select messages of at most 1024 bytes
  (multistream_limit.py); all installed when this module loads;
- no identify dials (`_QuietHost`);
- each stream handler registered with `require_trust` checks the peer ID
  again, since a stream can arrive before the connection's grace ends. Peer
  IDs are those authenticated by the Noise handshake.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from math import inf
from typing import TYPE_CHECKING

import multiaddr
import trio
from libp2p.abc import INetStream
from libp2p.connection_types import ConnectionType
from libp2p.crypto.keys import KeyPair
from libp2p.crypto.x25519 import create_new_key_pair as create_x25519_key_pair
from libp2p.custom_types import TProtocol
from libp2p.host.basic_host import BasicHost
from libp2p.network.config import ConnectionConfig, RetryConfig
from libp2p.peer.id import ID
from libp2p.peer.peerstore import PeerStore
from libp2p.rcmgr import Direction
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX_PROTOCOL_ID
from libp2p.stream_muxer.yamux.yamux import Yamux
from libp2p.transport.tcp.tcp import TCP
from libp2p.transport.upgrader import TransportUpgrader

from gbr_node.errors import GbrError, PeerUnreachable
from gbr_node.p2p import multistream_limit, yamux_guard, yamux_window
from gbr_node.p2p.addresses import (
    check_port_free,
    dialable,
    listen_multiaddr,
    parse_multiaddr,
    parse_peer_id,
    without_p2p,
)
from gbr_node.p2p.admission import ConnectionLimits
from gbr_node.p2p.circuit import (
    STOP_PROTOCOL_ID,
    CircuitDialer,
    Reservations,
    StopHandler,
    is_circuit,
)
from gbr_node.p2p.dial_errors import explain_dial_failure
from gbr_node.p2p.logs import route_libp2p_logs
from gbr_node.p2p.stream import Libp2pByteStream
from gbr_node.p2p.swarm import GbrSwarm

if TYPE_CHECKING:  # imported by the methods that start them: a host that only dials needs none
    from gbr_node.p2p.holepunch import HolePunch
    from gbr_node.p2p.lan import LanPeers
    from gbr_node.p2p.relay import RelayService
    from gbr_node.p2p.relaybook import HopLimits

yamux_window.install()
yamux_guard.install()
multistream_limit.install()

_NO_STOCK_CAP = 1_000_000

__all__ = ["DEFAULT_DIAL_TIMEOUT_S", "P2PHost", "StreamHandler", "open_host", "parse_target"]

logger = logging.getLogger(__name__)

DEFAULT_DIAL_TIMEOUT_S = 10.0
DIRECT_FIRST_S = 3.0
"""The most a direct address is given when a relayed one follows it, seconds: a
home router drops what it did not ask for, so that dial would wait for TCP's
own timeout (minutes) instead of failing (issue 23)."""

StreamHandler = Callable[[Libp2pByteStream, str], Awaitable[None]]
"""An inbound stream handler: `(stream, remote_peer_id)`; the host closes the stream after."""


class P2PHost:
    """A running libp2p host; obtain one from `open_host()`.

    Attributes (read-only): `peer_id` (base58), `addrs` (full dialable
    multiaddrs ending in `/p2p/<peer ID>`), `security_protocols` and
    `muxer_protocols` (the protocol IDs the connection upgrader offers and
    accepts, in preference order).
    """

    def __init__(
        self, host: BasicHost, is_trusted: Callable[[str], bool], background: trio.Nursery
    ) -> None:
        self._host = host
        self._is_trusted = is_trusted
        self._background = background
        self._address_book: dict[ID, list[multiaddr.Multiaddr]] = {}
        self._dial_locks: dict[ID, trio.Lock] = {}
        self._swarm.transport_manager.add_transport(CircuitDialer(host, self._connect_relay))
        self.reservations: Reservations | None = None
        self._hole_punch: HolePunch | None = None
        self.relay: RelayService | None = None
        self.lan: LanPeers | None = None

    @property
    def peer_id(self) -> str:
        return self._host.get_id().to_base58()

    @property
    def addrs(self) -> tuple[str, ...]:
        suffix = f"/p2p/{self.peer_id}"
        bound = self._host.get_transport_addrs()
        return tuple(f"{addr}{suffix}" for each in bound for addr in dialable(each))

    @property
    def security_protocols(self) -> tuple[str, ...]:
        return tuple(self._swarm.upgrader.security_multistream.transports)

    @property
    def muxer_protocols(self) -> tuple[str, ...]:
        return tuple(self._swarm.upgrader.muxer_multistream.transports)

    @property
    def _swarm(self) -> GbrSwarm:
        return self._host.get_network()  # type: ignore[return-value]  # open_host builds the host on a GbrSwarm

    def set_stream_handler(
        self, protocol_id: str, handler: StreamHandler, *, require_trust: bool = True
    ) -> None:
        """Serve inbound streams of `protocol_id` with `handler(stream, remote_peer_id)`.

        With `require_trust`, a stream from a peer the trust predicate rejects
        (asked anew for each stream) is reset and `handler` never runs. The
        stream is closed when `handler` returns; an exception escaping
        `handler` is logged on this module's logger and resets the stream,
        never the connection or the host. Replaces any earlier handler.
        """

        async def _on_stream(net_stream: INetStream) -> None:
            remote = net_stream.muxed_conn.peer_id.to_base58()
            if require_trust and not self._is_trusted(remote):
                logger.info("refused %s stream from untrusted peer %s", protocol_id, remote)
                await _reset_quietly(net_stream)
                return
            stream = Libp2pByteStream(net_stream, remote, protocol_id)
            try:
                await handler(stream, remote)
            except Exception:
                logger.exception("%s handler failed for peer %s", protocol_id, remote)
                await _reset_quietly(net_stream)
            finally:
                await stream.aclose()

        self._host.set_stream_handler(TProtocol(protocol_id), _on_stream)

    def add_addrs(self, peer_id: str, multiaddrs: Sequence[str]) -> None:
        """Remember where to dial `peer_id` (e.g. a trusted peer's profile `addrs`).

        Only addresses given here, or in a multiaddr target, are ever dialed;
        addresses a peer advertises about itself are not. Adds to earlier ones.

        Raises:
            GbrError: `peer_id` is not a base58 peer ID, or a multiaddr does not
                parse or names a different peer in its `/p2p/` part.
        """
        pid = parse_peer_id(peer_id, "peer_id")
        book = self._address_book.setdefault(pid, [])
        for text in multiaddrs:
            addr = parse_multiaddr(text, "multiaddrs")
            if text.endswith("/p2p-circuit"):  # RELAY/p2p-circuit: to this peer through RELAY
                addr = parse_multiaddr(f"{text}/p2p/{peer_id}", "multiaddrs")
            named = addr.get_peer_id()
            if named is not None and named != peer_id:
                raise GbrError(f"multiaddrs: {text!r} names peer {named}, not {peer_id}")
            addr = addr if is_circuit(addr) else without_p2p(addr)  # a circuit keeps its target
            if addr not in book:
                book.append(addr)
        book.sort(key=is_circuit)  # direct addresses are dialed first (issue 23)

    async def connect(self, target: str, *, timeout_s: float = DEFAULT_DIAL_TIMEOUT_S) -> str:
        """Make sure a connection to `target` exists (dial + Noise + Yamux); return its peer ID.

        `target` is a full multiaddr ending in `/p2p/<peer ID>` (only that
        address is dialed; `RELAY/p2p-circuit/p2p/<peer ID>` goes through the
        relay), or a bare peer ID whose addresses were given to `add_addrs()`
        (direct ones first, each given at most `DIRECT_FIRST_S` seconds when a
        relayed one follows, then relayed ones). An open connection to the peer
        is reused; concurrent calls for one peer share one dial. After a dial
        through a relay, hole punching (when enabled) tries to upgrade it to a
        direct connection in the background. Cancellation leaves no half-open
        connection behind.

        Raises:
            GbrError: `target` is neither a peer ID nor such a multiaddr.
            PeerUnreachable: no known address, refused, no answer within
                `timeout_s` seconds, Noise failure, or another peer ID answered.
        """
        pid, addrs = self._resolve_target(target)
        lock = self._dial_locks.setdefault(pid, trio.Lock())
        try:
            async with lock:
                if self._has_live_connection(pid):
                    return pid.to_base58()
                if not addrs:
                    raise PeerUnreachable(
                        f"{target}: no known address; dial a full multiaddr ending in "
                        "/p2p/<peer ID> or list the peer's addrs in the profile"
                    )
                await self._dial_any(target, pid, addrs, timeout_s)
        finally:
            if lock.statistics().tasks_waiting == 0 and not lock.locked():
                self._dial_locks.pop(pid, None)
        return pid.to_base58()

    async def _dial_any(
        self, target: str, pid: ID, addrs: Sequence[multiaddr.Multiaddr], timeout_s: float
    ) -> None:
        failures: list[tuple[multiaddr.Multiaddr, BaseException]] = []
        try:
            with trio.fail_after(timeout_s):
                for index, addr in enumerate(addrs):
                    relayed_next = any(is_circuit(later) for later in addrs[index + 1 :])
                    limit = DIRECT_FIRST_S if relayed_next and not is_circuit(addr) else inf
                    try:
                        with trio.fail_after(limit):
                            await self._swarm.dial_addr(addr, pid)
                    except trio.TooSlowError:
                        failures.append((addr, PeerUnreachable(f"no answer within {limit:g} s")))
                        continue
                    except Exception as exc:
                        failures.append((addr, exc))
                        continue
                    if is_circuit(addr) and self._hole_punch is not None:
                        self._hole_punch.upgrade_soon(pid)
                    return
        except trio.TooSlowError as exc:
            raise PeerUnreachable(f"{target}: no connection within {timeout_s:g} s") from exc
        if len(failures) == 1:
            reasons = explain_dial_failure(failures[0][1])
        else:
            reasons = "; ".join(f"{addr}: {explain_dial_failure(exc)}" for addr, exc in failures)
        raise PeerUnreachable(f"{target}: {reasons}") from failures[-1][1]

    async def _connect_relay(self, relay_addr: str, timeout_s: float) -> str:
        """`connect()` in the shape circuit.py calls it (`Connect`), for a relay's own
        TCP address."""
        return await self.connect(relay_addr, timeout_s=timeout_s)

    async def keep_reservations(self, relays: Sequence[str], tell: Callable[[str], None]) -> None:
        """Keep a reservation on each relay of `relays` (circuit.py `Reservations`) until
        cancelled, telling `tell(line)` what changes; `reservations.circuit_addrs()`
        says where peers reach this node meanwhile."""
        self.reservations = Reservations(
            self._host, self._connect_relay, self._has_live_connection, tell
        )
        await self.reservations.run(relays)

    def accept_relayed(self, relays: Callable[[], set[str]]) -> None:
        """Accept connections that relays in `relays()` (peer IDs, asked per connection)
        bring; any other peer's STOP stream is reset. Each goes through the same
        admission as an inbound TCP connection (GBR-DOS-01)."""
        handler = StopHandler(relays, self._swarm.handle_relayed)
        self._host.set_stream_handler(TProtocol(STOP_PROTOCOL_ID), handler)

    def enable_hole_punching(self, announce: Callable[[], Sequence[str]]) -> None:
        """Upgrade relayed connections with DCUtR (holepunch.py): started after our own
        dials through a relay, served to trusted peers. `announce()` gives the
        multiaddrs (no `/p2p/`) to tell the other side; empty means the bound
        listen addresses."""
        from gbr_node.p2p.holepunch import HolePunch

        def told() -> Sequence[str]:
            return announce() or [a.rsplit("/p2p/", 1)[0] for a in self.addrs]

        self._hole_punch = HolePunch(self._host, self._is_trusted, told, self._background)

    def serve_relay(
        self,
        limits: HopLimits,
        *,
        serves_any: bool,
        tell: Callable[[str], None] = lambda _line: None,
        name: Callable[[str], str] = lambda peer_id: peer_id,
    ) -> RelayService:
        """Be a circuit relay v2 relay (relay.py) within `limits`, for trusted peers only
        or (`serves_any`) for anyone, telling `tell(line)` of reservations and circuits
        (peers named by `name(peer_id)`). Peers holding a reservation or a circuit stay
        connected (no idle close, no untrusted grace)."""
        from gbr_node.p2p.relay import RelayService
        from gbr_node.p2p.relaybook import RelayBook

        book = RelayBook(limits, serves_any=serves_any)
        bound = [a.rsplit("/p2p/", 1)[0] for a in self.addrs]
        self.relay = RelayService(self._host, book, self._is_trusted, lambda: bound, tell, name)
        self._swarm.keeps_open = self.relay.holds
        self.relay.start()
        return self.relay

    async def find_on_lan(self) -> LanPeers:
        """Announce this node on the LAN and find others with mDNS (lan.py); they
        become dialable by peer ID when no address was given for them, and are never
        trusted for being found. Stopped when the host closes."""
        from gbr_node.p2p.lan import LanPeers

        lan = LanPeers()
        await trio.to_thread.run_sync(lan.start, self.peer_id, self.addrs)
        self.lan = lan
        self._background.start_soon(lan.forget_stale)
        return lan

    def connection_types(self, peer_id: str) -> tuple[str, ...]:
        """ "direct" or "relayed" for each open connection to `peer_id`."""
        conns = self._swarm.get_connections(parse_peer_id(peer_id, "peer_id"))
        return tuple(
            "relayed" if c.get_connection_type() == ConnectionType.RELAYED else "direct"
            for c in conns
            if not c.is_closed
        )

    async def new_stream(
        self,
        target: str,
        protocol_id: str,
        *,
        timeout_s: float = DEFAULT_DIAL_TIMEOUT_S,
        fallback: tuple[str, ...] = (),
    ) -> Libp2pByteStream:
        """Open a stream speaking `protocol_id` to `target`, dialing first if needed.

        `target` is as for `connect()`; `timeout_s` (seconds) bounds dialing
        and protocol negotiation together. `fallback`: protocol IDs proposed
        in turn when the peer refuses `protocol_id` (multistream-select); the
        stream's `protocol_id` is the one agreed. A connection that closes before the
        stream opens on it is dialed once more. The caller owns the returned
        stream and must `aclose()` it.

        Raises:
            GbrError: `target` is neither a peer ID nor a `/p2p/` multiaddr.
            PeerUnreachable: as for `connect()`, or the peer does not support
                `protocol_id`, or the connection broke while negotiating.
        """
        await self.connect(target, timeout_s=timeout_s)
        pid = parse_target(target)[0]
        deadline = trio.current_time() + timeout_s
        protocols = (protocol_id, *fallback)
        try:
            return await self._open_stream(target, pid, protocols, deadline, timeout_s)
        except PeerUnreachable:
            if self._has_live_connection(pid) or trio.current_time() >= deadline:
                raise
        # The connection chosen closed before the stream opened on it (the peer's
        # idle timeout, a disconnect under way): py-libp2p's fallback re-dials from
        # its peerstore, which holds none of our addresses, so dial once more here.
        await self.connect(target, timeout_s=deadline - trio.current_time())
        return await self._open_stream(target, pid, protocols, deadline, timeout_s)

    async def _open_stream(
        self, target: str, pid: ID, protocols: tuple[str, ...], deadline: float, timeout_s: float
    ) -> Libp2pByteStream:
        named = " or ".join(protocols)
        try:
            with trio.fail_at(deadline):
                net_stream = await self._host.new_stream(pid, [TProtocol(p) for p in protocols])
        except trio.TooSlowError as exc:
            reason = f"{named} not negotiated within {timeout_s:g} s"
            raise PeerUnreachable(f"{target}: {reason}") from exc
        except Exception as exc:
            reason = explain_dial_failure(exc, protocol_id=named)
            raise PeerUnreachable(f"{target}: {reason}") from exc
        agreed = str(net_stream.get_protocol() or protocols[0])
        return Libp2pByteStream(net_stream, pid.to_base58(), agreed)

    async def disconnect(self, peer_id: str) -> None:
        """Close every connection to `peer_id` (takes ~0.2 s inside py-libp2p); no-op if none."""
        await self._host.disconnect(parse_peer_id(peer_id, "peer_id"))

    def connected_peers(self) -> tuple[str, ...]:
        """Peer IDs with at least one open connection, in no particular order."""
        return tuple(
            pid.to_base58() for pid in self._swarm.connections if self._has_live_connection(pid)
        )

    async def drop_untrusted(self) -> int:
        """Close inbound connections of peers the trust predicate now rejects.

        Call after the trust list changes (a hot-reloaded profile). Returns the
        number of peers disconnected. Outbound connections, which this node
        chose to make, are kept.
        """
        dropped = 0
        for pid, conns in list(self._swarm.connections.items()):
            if self._is_trusted(pid.to_base58()):
                continue
            inbound = [c for c in conns if getattr(c, "direction", None) == Direction.INBOUND]
            for conn in inbound:
                await conn.close()
            dropped += bool(inbound)
        return dropped

    def _has_live_connection(self, pid: ID) -> bool:
        # a closing connection stays listed for ~0.2 s while py-libp2p tears it down
        return any(not conn.is_closed for conn in self._swarm.get_connections(pid))

    def _resolve_target(self, target: str) -> tuple[ID, list[multiaddr.Multiaddr]]:
        """Return (peer ID, addresses to dial) for a peer ID or a /p2p/ multiaddr."""
        pid, addr = parse_target(target)
        if addr is not None:
            return pid, [addr]
        known = self._address_book.get(pid)
        if not known and self.lan is not None:  # found on the LAN (lan.py)
            return pid, [parse_multiaddr(a, "LAN address") for a in self.lan.addrs(target)]
        return pid, list(known or ())


@functools.lru_cache(maxsize=256)
def parse_target(target: str) -> tuple[ID, multiaddr.Multiaddr | None]:
    """(peer ID, address without `/p2p/`, or None for a bare peer ID) of a `connect()` target.

    Cached: py-multiaddr takes ~0.1-0.25 ms to parse and split one multiaddr,
    and every call to a peer resolves its target again (scripts/bench/rpc.py).
    Both values are immutable. Raises GbrError as `P2PHost.connect` documents.
    """
    if not target.startswith("/"):
        return parse_peer_id(target, "target"), None
    addr = parse_multiaddr(target, "target")
    named = addr.get_peer_id()
    if named is None or addr.protocols()[-1].name != "p2p":
        raise GbrError(f"target: multiaddr {target!r} must end in /p2p/<peer ID>")
    # the swarm appends /p2p/<peer ID> to a dialed address only when it has no /p2p/ part
    return parse_peer_id(named, "target"), addr if is_circuit(addr) else without_p2p(addr)


@asynccontextmanager
async def open_host(
    keypair: KeyPair,
    listen: Sequence[str],
    *,
    is_trusted: Callable[[str], bool],
    close_untrusted: bool = True,
    limits: ConnectionLimits | None = None,
    log_handler: logging.Handler | None = None,
) -> AsyncIterator[P2PHost]:
    """Run a libp2p host with identity `keypair`, listening on every multiaddr in `listen`.

    `listen` holds `/ip4/A/tcp/P` or `/ip6/A/tcp/P` multiaddrs (port 0 picks a
    free port; `P2PHost.addrs` reports the bound ones); it may be empty for a
    dial-only host. `is_trusted(peer_id)` is asked on each inbound connection
    (when `close_untrusted`) and each inbound stream of a handler registered
    with `require_trust`, so it may read state that changes on hot reload;
    `lambda _: True` admits everyone. With `close_untrusted=False`, untrusted
    peers stay connected so that a handler registered with `require_trust=False`
    can answer them itself (e.g. with an "unauthorized" error), for at most
    `limits.untrusted_grace_s` seconds. `limits` bound inbound connections
    (admission.py; the defaults of `ConnectionLimits` when None).
    py-libp2p's own log records go to `log_handler` (discarded when None),
    never to the terminal; see logs.py. On exit every connection and
    listener is closed.

    Raises:
        GbrError: a listen multiaddr does not parse, is not plain TCP, its
            port is already in use, or listening failed for another reason.
    """
    route_libp2p_logs(log_handler)
    maddrs = [listen_multiaddr(text) for text in listen]
    for maddr in maddrs:
        check_port_free(maddr)
    limits = limits or ConnectionLimits()
    if close_untrusted:
        limits = dataclasses.replace(limits, untrusted_grace_s=0.0)
    host = _build_host(keypair, is_trusted, limits)
    async with host.run(listen_addrs=[]), trio.open_nursery() as background:
        swarm = host.get_network()
        if maddrs:
            await swarm.listen(*maddrs)
        failed = [str(m) for m in maddrs if str(m) not in swarm.listeners]
        if failed:
            raise GbrError(f"could not listen on {', '.join(failed)} (details in the libp2p log)")
        p2p = P2PHost(host, is_trusted, background)
        try:
            yield p2p
        finally:
            background.cancel_scope.cancel()
            if p2p.lan is not None:
                p2p.lan.stop()


class _QuietHost(BasicHost):
    """`BasicHost` that never dials identify (it still answers it).

    The stock host opens an identify stream to every peer that connects, in
    either direction, and logs an ERROR when the peer refuses it, a normal
    event. gbr-node uses nothing identify learns: it dials only addresses it
    was given (`disable_identify_address_discovery`), and negotiates its
    protocols on each stream; and an identify stream to a stranger is work
    done for it before its trust is known.
    """

    def _schedule_identify(self, peer_id: ID, *, reason: str) -> None:
        return None


def _build_host(
    keypair: KeyPair, is_trusted: Callable[[str], bool], limits: ConnectionLimits
) -> BasicHost:
    peer_id = ID.from_pubkey(keypair.public_key)
    noise = NoiseTransport(keypair, noise_privkey=create_x25519_key_pair().private_key)
    upgrader = TransportUpgrader(
        secure_transports_by_protocol={NOISE_PROTOCOL_ID: noise},
        muxer_transports_by_protocol={TProtocol(YAMUX_PROTOCOL_ID): Yamux},
    )
    peerstore = PeerStore()
    peerstore.add_key_pair(peer_id, keypair)
    swarm = GbrSwarm(
        peer_id,
        peerstore,
        upgrader,
        transports=[TCP()],
        retry_config=RetryConfig(max_retries=0),
        connection_config=ConnectionConfig(
            max_connections_per_peer=1,
            inbound_upgrade_timeout=limits.handshake_timeout_s,
            # admission.py decides who gets in; the stock caps (300 connections,
            # pruning above 300) would count trusted and untrusted peers alike
            max_connections=_NO_STOCK_CAP,
            high_watermark=_NO_STOCK_CAP,
        ),
        is_trusted=is_trusted,
        limits=limits,
    )
    return _QuietHost(network=swarm, disable_identify_address_discovery=True)


async def _reset_quietly(net_stream: INetStream) -> None:
    try:
        await net_stream.reset()
    except Exception:  # already gone: nothing left to release
        return
