"""Yamux in py-libp2p 0.8.1 made safe against cancelled writes and unbounded buffering.

Four patches of `libp2p.stream_muxer.yamux.yamux`, installed process-wide by
`install()` (gbr_node.p2p.host calls it at import), each a candidate for upstream:

1. A frame is written whole or not at all. `Yamux._write_frame` hands each
   frame to the Noise session, which encrypts it (using up a nonce) and then
   writes it to TCP. A trio cancellation in between, or inside the socket
   write, leaves the peer a nonce behind, or half a record: it fails to
   decrypt what comes next and drops the whole connection, with every other
   stream on it. So once the write lock is held the write is shielded from
   cancellation; a time limit runs out inside the write only for the stream
   that asked, after the frame. A frame that cannot be written within
   `FRAME_WRITE_LIMIT_S` (the peer stopped reading its TCP socket) closes
   the connection, which can no longer be used anyway.
   Suggested upstream change: shield `secured_conn.write` in `_write_frame`
   (go's writes are not cancellable mid-frame either).

2. A connection's unread data is bounded. The library notes a peer that
   sends past its receive window ("peer exceeded receive window") and keeps
   the data anyway, and it buffers every stream a peer opens, so one
   connection could make us hold any amount. `Yamux.receive_budget` (bytes;
   None: no bound) caps what all its streams may hold unread; a DATA frame
   that would go past it closes the connection, as go-yamux does for a
   window violation (`recvWindowExceeded`, GO_AWAY protocol error). The
   swarm sets the budget per connection (admission.py). On a connection with
   `stall_over_budget` set (the swarm's untrusted ones) such a frame is not
   read instead, nor is anything after it, until the connection ends (its
   grace runs out): closing it at once would only let the stranger reconnect
   and make the node pay a new Noise handshake, as fast as it likes (the
   stream flood of scripts/bench/flood.py took 85% of a core that way);
   stalled, it waits on its own TCP window.
   Suggested upstream change: close the session with GO_AWAY(protocol
   error) when a DATA frame exceeds the stream's receive window.

3. A stream reset locally forgets its unread data at once. The library keeps
   the buffer of a fully closed stream for 60 s so it can still be read;
   after a local reset nobody can read it. `discard_unread()` does the same
   for a stream whose reader has finished (Libp2pByteStream.aclose).
   Suggested upstream change: drop the buffer in `YamuxStream.reset`.

4. A stream can say when it is reset, without a task reading it:
   `cancel_on_reset(stream, scope)` cancels `scope` once the peer resets the
   stream, or the stream is reset here, which the swarm does to every stream
   of a connection that closed or dropped. The hooks sit where the library
   finalizes a stream the peer reset (`_finalize_stream_locked`) and in
   `YamuxStream.reset`.
   Suggested upstream change: a reset callback or event on `YamuxStream`.
"""

from __future__ import annotations

import logging
from typing import Any

import trio
from libp2p.network.connection.exceptions import RawConnError
from libp2p.stream_muxer.yamux.yamux import Yamux, YamuxStream

__all__ = [
    "FRAME_WRITE_LIMIT_S",
    "ReceiveBudgetExceeded",
    "cancel_on_reset",
    "discard_unread",
    "install",
]

log = logging.getLogger(__name__)

FRAME_WRITE_LIMIT_S = 10.0
"""Time one Yamux frame (at most 64 KiB + header) may take to reach the socket."""

STALL_RECHECK_S = 0.5
"""How often a stalled connection checks whether its budget or its stall was lifted."""

_stock_read_data_body = Yamux._read_data_body
_stock_reset = YamuxStream.reset
_stock_finalize_stream_locked = Yamux._finalize_stream_locked


class ReceiveBudgetExceeded(trio.TooSlowError):
    """A peer sent more unread data than its connection's budget.

    A `trio.TooSlowError` because that is what makes py-libp2p's
    `Yamux.handle_incoming` end the connection, from every frame type
    that carries data.
    """


async def _write_frame_whole(self: Yamux, data: bytes) -> None:
    """Write one frame under the write lock, shielded: whole, or the connection closes."""
    async with self._write_lock:
        deadline = trio.current_time() + FRAME_WRITE_LIMIT_S
        # its own deadline still applies: a shield only keeps outer cancellations out
        with trio.CancelScope(shield=True, deadline=deadline) as write:
            await self.secured_conn.write(data)
        if write.cancelled_caught:
            log.info("closing the connection to %s: a write stalled", self.peer_id)
            with trio.CancelScope(shield=True):
                await _close_quietly(self.secured_conn)
            raise RawConnError(f"a write to {self.peer_id} stalled for {FRAME_WRITE_LIMIT_S} s")
    await trio.lowlevel.checkpoint()


def _unread_bytes(conn: Yamux) -> int:
    return sum(len(buffer) for buffer in conn.stream_buffers.values())


def _over_budget(conn: Yamux, length: int) -> bool:
    budget = getattr(conn, "receive_budget", None)
    return budget is not None and length + _unread_bytes(conn) > budget


async def _read_data_body_within_budget(self: Yamux, length: int) -> bytes:
    """Read a DATA frame's body unless it would take the connection past its budget."""
    budget = getattr(self, "receive_budget", None)
    while _over_budget(self, length) and getattr(self, "stall_over_budget", False):
        with trio.move_on_after(STALL_RECHECK_S):  # it may have become trusted meanwhile
            await self.event_shutting_down.wait()
        if self.event_shutting_down.is_set():
            raise ReceiveBudgetExceeded(f"{self.peer_id} stalled past its receive budget")
    if budget is not None and _over_budget(self, length):
        log.info(
            "closing the connection to %s: %d bytes unread with %d more arriving, budget %d",
            self.peer_id,
            _unread_bytes(self),
            length,
            budget,
        )
        raise ReceiveBudgetExceeded(f"{self.peer_id} went past its receive budget")
    return await _stock_read_data_body(self, length)


def discard_unread(stream: Any) -> None:
    """Drop what a Yamux `stream` holds unread (its reader is done); no-op for other muxers."""
    if not isinstance(stream, YamuxStream):
        return
    buffer = stream.conn.stream_buffers.get(stream.stream_id)
    if buffer:
        buffer.clear()


async def _reset_and_discard(self: YamuxStream) -> None:
    await _stock_reset(self)
    discard_unread(self)
    _signal_reset(self)  # the swarm resets every stream of a connection that closed


def cancel_on_reset(stream: Any, scope: trio.CancelScope) -> None:
    """Cancel `scope` when Yamux `stream` is reset (by the peer, or its connection drops).

    At once if that already happened. A no-op for other muxers. Cancelling a
    scope that has exited does nothing, so nothing needs undoing.
    """
    if not isinstance(stream, YamuxStream):
        return
    if stream.reset_received or stream.conn.event_shutting_down.is_set():
        scope.cancel()
        return
    stream.__dict__.setdefault("_gbr_reset_scopes", []).append(scope)


def is_broken(stream: Any) -> bool:
    """True once Yamux `stream` was reset by the peer or its connection is going down;
    False for other muxers. Reads nothing."""
    if not isinstance(stream, YamuxStream):
        return False
    return bool(stream.reset_received) or stream.conn.event_shutting_down.is_set()


def _signal_reset(stream: YamuxStream) -> None:
    for scope in stream.__dict__.pop("_gbr_reset_scopes", ()):
        scope.cancel()


def _finalize_stream_and_signal(self: Yamux, stream: YamuxStream, *, fully_closed: bool) -> None:
    if stream.reset_received:  # the peer's RST
        _signal_reset(stream)
    _stock_finalize_stream_locked(self, stream, fully_closed=fully_closed)


async def _close_quietly(closer: Any) -> None:
    try:
        await closer.close()
    except Exception:  # already broken: nothing left to release
        return


def install() -> None:
    """Patch `Yamux` and `YamuxStream` process-wide (idempotent)."""
    Yamux._write_frame = _write_frame_whole  # type: ignore[method-assign]  # the patch this module exists for
    Yamux._read_data_body = _read_data_body_within_budget  # type: ignore[method-assign]  # the patch this module exists for
    Yamux._finalize_stream_locked = _finalize_stream_and_signal  # type: ignore[method-assign]  # the patch this module exists for
    YamuxStream.reset = _reset_and_discard  # type: ignore[method-assign]  # the patch this module exists for
