"""py-libp2p 0.8.1's Swarm with isolated fixes, each a candidate for upstream.

`GbrSwarm` subclasses `libp2p.network.swarm.Swarm` and changes only what the
notes below describe; everything else is the library's behaviour.

1. Inbound admission instead of one shared slot count (GBR-DOS-01). The
   stock `_handle_inbound_connection` takes one token of `_inbound_limiter`
   (`max_connections - min_connections`, 250) per accepted TCP socket, before
   the handshake, and the stock `_do_handle_inbound_connection` holds it
   until the swarm stops. 250 connections that never finish a handshake, or
   250 untrusted peers that stay connected, lock every trusted peer out.
   Here each inbound connection goes through the limits of admission.py:
   a handshake slot per remote address and in total (the newcomer always
   gets in; a silent or an older one gives way), py-libp2p's own
   `inbound_upgrade_timeout` as the handshake time limit, then, once the
   Noise-authenticated peer ID is known, a separate count for untrusted
   peers, so room for trusted ones is always left. The task serving a
   connection returns when it closes, releasing everything (it must outlive
   the upgrade, because trio's `serve_listeners` closes the socket as soon
   as the handler returns). Untrusted connections are closed
   `untrusted_grace_s` after their handshake; trusted inbound ones after
   `idle_timeout_s` without a stream. Each connection gets a Yamux receive
   budget (yamux_guard.py; an untrusted one that goes past it is stalled
   until its grace ends) and a cap on the inbound streams it may have open;
   an untrusted one that keeps opening more (`REFUSED_STREAMS_BEFORE_STALL`
   refused) is stalled too (its budget drops to 0:
   resetting each of 2,000 streams carrying data, as the stream flood of
   scripts/bench/flood.py sends them, took the node 68% of a core).
   An address in backoff (admission.py, point 4: its untrusted peers found
   no room) is refused first thing, before the multiaddr, the gate and the
   upgrade: the socket is reset and its task returns. Its handshakes were
   what the node spent its CPU on (Noise's X25519 and Ed25519 work, py-spy).
   Suggested upstream changes: release the inbound token when the
   connection closes (wait on the registered SwarmConn's `event_closed`
   instead of `manager.wait_finished()`), and an "intercept secured" hook in
   `ConnectionGate` (go-libp2p's `InterceptSecured`) to decide on a peer ID
   before the connection is registered.

2. Silent sockets wait in the kernel. `listen` sets TCP_DEFER_ACCEPT
   (`limits.defer_accept_s`) on each TCP listening socket and a listen backlog
   of `limits.listen_backlog` (py-libp2p listens with 128). A flood of sockets
   that never send a byte then costs the node nothing: no accept, no task, no
   handshake slot, no descriptor, whatever address it comes from (the trusted
   peer's own included); py-spy showed serve spending a whole core accepting,
   spawning a task for, starting the multistream upgrade of, evicting and
   closing sockets that reconnected at once. A libp2p dialer sends first, so
   its connection is accepted as soon as its first bytes arrive. Suggested
   upstream: both as options of the TCP transport.

3. No auto-connector. The stock `AutoConnector` re-dials, every
   `auto_connect_interval` and after every disconnect, any peer with addresses
   in the peerstore until `low_watermark` connections exist, dead peers
   included. A gbr-node dials only the peers it is asked to dial or that the
   profile trusts (DESIGN.md, security model), so `_NoAutoConnector` never dials.

4. No negative dial cache. After a failed dial the stock swarm refuses to dial
   that peer again for 60 s without trying. Every dial here is an explicit
   request (a user's call, a trusted peer), so it always tries the network.

4. Several connections per peer ID. host.py sets `max_connections_per_peer=1`
   so that the stock `dial_peer` stops at its first connection instead of
   waiting 250 ms for more, but the stock swarm also uses that number to trim
   a peer's connections as each new one registers: the processes that share
   one identity (a REPL waiting for an approval's outcome, then `gbr-node call`
   or `gbr-node mcp` with the same key) closed each other's connections, and
   the outcome had no connection left to go back on. Here trimming keeps up
   to `limits.max_connections_per_peer` (the stock rules otherwise: none
   younger than its 20 s grace, fewest streams and oldest first).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
from collections.abc import Callable
from typing import Any

import trio
from libp2p.abc import IMuxedConn, INetStream
from libp2p.connection_types import ConnectionType
from libp2p.custom_types import StreamHandlerFn
from libp2p.io.trio import TrioTCPStream
from libp2p.network.auto_connector import AutoConnector
from libp2p.network.connection.raw_connection import RawConnection
from libp2p.network.connection.swarm_connection import SwarmConn
from libp2p.network.exceptions import SwarmException
from libp2p.network.swarm import Swarm
from libp2p.peer.id import ID
from multiaddr import Multiaddr

from gbr_node.p2p.admission import Backoff, ConnectionLimits, Handshakes

__all__ = ["GbrSwarm"]

log = logging.getLogger(__name__)

REFUSED_STREAMS_BEFORE_STALL = 16
"""Streams past its cap an untrusted connection may open (each reset) before it is stalled."""


class _NoAutoConnector(AutoConnector):
    """An AutoConnector that never dials (fix 3 in the module docstring)."""

    async def run_background_task(self, nursery: trio.Nursery) -> None:
        return None

    async def maybe_connect(self) -> None:
        return None


class _NoNegativeCache:
    """Stands in for `libp2p.network.swarm._NegativePeerCache` (fix 4)."""

    def mark_failed(self, peer_id: str) -> None:
        return None

    def is_blocked(self, peer_id: str) -> bool:
        return False

    def evict(self, peer_id: str) -> None:
        return None

    def clear(self) -> None:
        return None


class _HeardConnection(RawConnection):
    """An inbound raw connection that remembers whether the remote end sent anything."""

    has_spoken = False

    async def read(self, n: int | None = None) -> bytes:
        data = await super().read(n)
        self.has_spoken = self.has_spoken or bool(data)
        return data


class _Handshake:
    """One inbound connection in its handshake: an entry of `Handshakes`, keyed by
    `address` (the remote IP, or the relay it came through)."""

    def __init__(self, conn: _HeardConnection, address: str) -> None:
        self.conn = conn
        self.address = address
        self.scope = trio.CancelScope()

    @property
    def has_spoken(self) -> bool:
        return self.conn.has_spoken


class GbrSwarm(Swarm):
    """`Swarm` with admission of inbound connections, no auto-dialing and no
    cache of past dial failures (see the module docstring).

    Takes the arguments of `libp2p.network.swarm.Swarm`, plus:
        is_trusted: `is_trusted(peer_id)` (base58) is asked when an inbound
            connection's handshake is done, and again when its grace ends.
        limits: the bounds of admission.py; `connection_config`'s
            `inbound_upgrade_timeout` should be `limits.handshake_timeout_s`.
    """

    def __init__(
        self,
        *args: Any,
        is_trusted: Callable[[str], bool],
        limits: ConnectionLimits,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._negative_peer_cache = _NoNegativeCache()  # type: ignore[assignment]  # a stand-in for py-libp2p's cache class
        self._is_trusted = is_trusted
        self.limits = limits
        self._handshakes: Handshakes[_Handshake] = Handshakes(
            limits.max_handshakes, limits.max_handshakes_per_address
        )
        self._untrusted: set[IMuxedConn] = set()
        self._backoff = Backoff(
            limits.backoff_s,
            limits.max_backoff_s,
            limits.idle_timeout_s,
            limits.max_backoff_addresses,
        )
        self.keeps_open: Callable[[ID], bool] = lambda _peer_id: False
        """Peers whose idle inbound connections stay open (a relay's reservation holders)."""

    def _init_connection_management(self) -> None:
        super()._init_connection_management()
        self.auto_connector = _NoAutoConnector(swarm=self)

    def _schedule_auto_connect(self) -> None:
        return None

    def _trim_connections(self, peer_id: ID) -> None:
        """Trim `peer_id`'s connections beyond `limits.max_connections_per_peer` (fix 4)."""
        config = self.connection_config
        dial_cap = config.max_connections_per_peer
        config.max_connections_per_peer = self.limits.max_connections_per_peer
        try:  # synchronous: no other task sees the borrowed value
            super()._trim_connections(peer_id)
        finally:
            config.max_connections_per_peer = dial_cap

    def admission_statistics(self) -> tuple[int, int]:
        """(inbound connections in their handshake, established untrusted inbound ones)."""
        return len(self._handshakes), len(self._untrusted)

    async def listen(self, *multiaddrs: Multiaddr) -> bool:
        """`Swarm.listen`, then silent TCP connections held in the kernel (fix 2)."""
        listening = await super().listen(*multiaddrs)
        for listener in self.listeners.values():
            for socket_listener in getattr(listener, "listeners", ()):
                _hold_silent_connections(socket_listener.socket, self.limits)
        return listening

    async def _handle_inbound_connection(self, read_write_closer: Any, maddr: Multiaddr) -> None:
        """Admit, upgrade and watch one inbound TCP connection; return when it closes (fix 1)."""
        address = _address_of(read_write_closer)
        if self._backoff.refuses(address, trio.current_time()):
            await _reset_quietly(read_write_closer)
            return
        await self._admit(_HeardConnection(read_write_closer, False), maddr, address)

    async def handle_relayed(self, stream: INetStream, circuit: Multiaddr, relay: str) -> None:
        """Admit, upgrade and watch one inbound relayed connection (circuit relay v2, issue
        23): `stream` is the accepted STOP stream from `relay` (a peer ID), `circuit` its
        `/p2p/RELAY/p2p-circuit/p2p/SOURCE` address. The same limits as a TCP connection
        apply: handshake slots are shared by everyone coming through one relay, and
        backoff is kept per circuit address, so a stranger behind a relay never has the
        relay itself, or the trusted peers that use it, refused. Returns when the
        connection closes; resets `stream` when it is refused or its handshake fails.
        """
        if self._backoff.refuses(str(circuit), trio.current_time()):
            await _reset_quietly(stream)
            return
        conn = _HeardConnection(stream, False, ConnectionType.RELAYED, [circuit])
        await self._admit(conn, circuit, f"/p2p/{relay}/p2p-circuit")

    async def _admit(self, conn: _HeardConnection, maddr: Multiaddr, address: str) -> None:
        """Give `conn` a handshake slot keyed by `address`, upgrade it, then watch it
        until it closes (fix 1)."""
        handshake = _Handshake(conn, address)
        gives_way = self._handshakes.admit(handshake)
        if gives_way is not None:
            log.debug("inbound handshake from %s gives way", gives_way.address)
            gives_way.scope.cancel()
        muxed = None
        try:
            with handshake.scope:
                muxed = await self._upgrade_inbound(conn, maddr)
        finally:
            self._handshakes.release(handshake)
        if muxed is None:
            with trio.CancelScope(shield=True):
                await _close_quietly(conn)
            return
        if muxed in self._untrusted:  # what the kernel may hold for it once it is stalled
            _limit_receive_buffer(conn.stream, self.limits.untrusted_socket_receive_bytes)
        for swarm_conn in list(self.connections.get(muxed.peer_id, ())):
            # The swarm registers SwarmConns only (its map is typed as INetConn).
            if isinstance(swarm_conn, SwarmConn) and swarm_conn.muxed_conn is muxed:
                await self._watch(swarm_conn)
                return

    async def _upgrade_inbound(self, conn: RawConnection, maddr: Multiaddr) -> IMuxedConn | None:
        """Gate, Noise and Yamux; the muxed connection, or None when refused or failed."""
        remote_maddr = self._build_remote_multiaddr(conn)
        if remote_maddr is not None and not await self.connection_gate.is_allowed(remote_maddr):
            return None
        try:
            return await self.upgrade_inbound_raw_conn(conn, maddr)
        except Exception:  # failed handshakes are routine; the swarm logged why
            return None

    async def add_conn(self, muxed_conn: IMuxedConn, direction: str = "unknown") -> SwarmConn:
        """Register a connection; an inbound one of an untrusted peer only while there is room.

        Raises SwarmException (and closes `muxed_conn`) when `max_untrusted`
        untrusted inbound connections are open already.
        """
        inbound = direction == "inbound"
        untrusted = inbound and not self._is_trusted(muxed_conn.peer_id.to_base58())
        address = _address_of(muxed_conn)
        if inbound and not untrusted:
            self._backoff.vouch(address, trio.current_time())
        if untrusted:
            if len(self._untrusted) >= self.limits.max_untrusted:
                refused_s = self._backoff.offend(address, trio.current_time())
                log.info(
                    "refusing untrusted peer %s: %d untrusted connections open%s",
                    muxed_conn.peer_id,
                    len(self._untrusted),
                    f"; refusing {address} for {refused_s:.0f} s" if refused_s else "",
                )
                await _close_quietly(muxed_conn)
                raise SwarmException("untrusted inbound connections at their limit")
            self._untrusted.add(muxed_conn)
        muxed_conn.receive_budget = (  # type: ignore[attr-defined]  # read by yamux_guard's patch
            self.limits.untrusted_receive_bytes if untrusted else self.limits.trusted_receive_bytes
        )
        muxed_conn.stall_over_budget = untrusted  # type: ignore[attr-defined]
        try:
            return await super().add_conn(muxed_conn, direction)
        except BaseException:
            self._untrusted.discard(muxed_conn)
            raise

    def remove_conn(self, swarm_conn: SwarmConn) -> None:
        self._untrusted.discard(swarm_conn.muxed_conn)
        super().remove_conn(swarm_conn)

    async def _watch(self, conn: SwarmConn) -> None:
        """Close `conn` when its grace (untrusted) or its idle time (trusted) runs out."""
        conn._gbr_last_stream_at = trio.current_time()  # type: ignore[attr-defined]  # our mark on py-libp2p's SwarmConn
        address = _address_of(conn.muxed_conn)
        if conn.muxed_conn in self._untrusted:
            with trio.move_on_after(self.limits.untrusted_grace_s):
                await conn.event_closed.wait()
            if conn.is_closed:
                return
            peer_id = conn.muxed_conn.peer_id
            if not (self._is_trusted(peer_id.to_base58()) or self.keeps_open(peer_id)):
                log.info("closing the connection of untrusted peer %s", peer_id)
                await conn.close()
                return
            self._untrusted.discard(conn.muxed_conn)  # trusted since: a hot reload
            conn.muxed_conn.receive_budget = self.limits.trusted_receive_bytes  # type: ignore[attr-defined]  # read by yamux_guard's patch
            conn.muxed_conn.stall_over_budget = False  # type: ignore[attr-defined]
        await self._close_when_idle(conn)
        self._backoff.vouch(address, trio.current_time())  # from its last moment on

    async def _close_when_idle(self, conn: SwarmConn) -> None:
        idle = self.limits.idle_timeout_s
        while not conn.is_closed:
            now = trio.current_time()
            due = (now if conn.streams else conn._gbr_last_stream_at) + idle  # type: ignore[attr-defined]  # our mark, set in _watch
            if not conn.streams and now >= due and not self.keeps_open(conn.muxed_conn.peer_id):
                log.info("closing the idle connection of peer %s", conn.muxed_conn.peer_id)
                await conn.close()
                return
            with trio.move_on_after(max(due - now, 0.05)):
                await conn.event_closed.wait()

    def set_stream_handler(self, stream_handler: StreamHandlerFn) -> None:
        """Serve inbound streams with `stream_handler`, within each connection's stream cap."""

        async def within_cap(stream: INetStream) -> None:
            conn = stream.swarm_conn  # type: ignore[attr-defined]  # NetStream has it; INetStream does not declare it
            cap = (
                self.limits.max_streams_untrusted
                if stream.muxed_conn in self._untrusted
                else self.limits.max_streams_trusted
            )
            if conn is not None and len(conn.streams) > cap:
                muxed = stream.muxed_conn
                refused = muxed.__dict__.get("_gbr_refused_streams", 0) + 1
                muxed.__dict__["_gbr_refused_streams"] = refused
                if muxed in self._untrusted and refused > REFUSED_STREAMS_BEFORE_STALL:
                    muxed.receive_budget = 0  # type: ignore[attr-defined]  # nothing more is read
                await _reset_quietly(stream)
                return
            await stream_handler(stream)

        super().set_stream_handler(within_cap)

    async def notify_opened_stream(self, stream: INetStream) -> None:
        _stamp(stream)
        await super().notify_opened_stream(stream)

    async def notify_closed_stream(self, stream: INetStream) -> None:
        _stamp(stream)
        await super().notify_closed_stream(stream)


def _hold_silent_connections(sock: Any, limits: ConnectionLimits) -> None:
    """Set TCP_DEFER_ACCEPT (where the platform has it) and the backlog on a listening socket."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    defer = getattr(socket, "TCP_DEFER_ACCEPT", None)
    if defer is not None:
        sock.setsockopt(socket.IPPROTO_TCP, defer, limits.defer_accept_s)
    sock.listen(limits.listen_backlog)


def _limit_receive_buffer(tcp: Any, size: int) -> None:
    """Fix the kernel receive buffer of a TrioTCPStream at `size` bytes (no autotuning)."""
    if isinstance(tcp, TrioTCPStream):
        with contextlib.suppress(OSError):  # already closed
            tcp.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)


def _address_of(conn: Any) -> str:
    """The remote IP address of a raw, secured or muxed connection ("unknown" when gone);
    for a relayed one, its circuit address (`/p2p/RELAY/p2p-circuit/p2p/SOURCE`): the
    relay's IP is not the peer's."""
    kind = getattr(conn, "get_connection_type", None)  # a TCP stream has none
    if kind is not None and kind() == ConnectionType.RELAYED:
        return str(conn.get_transport_addresses()[0])
    try:
        remote = conn.get_remote_address()
    except Exception:  # a closed socket has no peer name
        return "unknown"
    return str(remote[0]) if remote else "unknown"


def _stamp(stream: INetStream) -> None:
    """Note on the stream's connection when it last opened or closed a stream (idle time)."""
    conn = getattr(stream, "swarm_conn", None)
    if conn is not None:
        conn._gbr_last_stream_at = trio.current_time()


async def _close_quietly(closer: Any) -> None:
    try:
        await closer.close()
    except Exception:  # already broken: nothing left to release
        return


async def _reset_quietly(stream: Any) -> None:
    """Reset a stream, or a TCP connection (SO_LINGER 0: an RST, no TIME_WAIT left here)."""
    try:
        if isinstance(stream, TrioTCPStream):
            sock = stream.stream.socket
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        else:
            await stream.reset()
    except Exception:  # already gone
        return
