"""Yamux receive-window updates as go-yamux sends them: one per half window read.

py-libp2p 0.8.1's `YamuxStream._auto_tune_and_send_window_update` sends a
WINDOW_UPDATE frame after every read that returned data, however small (its
"partial slack" branch ignores the half-window threshold, and the
`PY_YAMUX_RELEASE_ON_READ=0` switch does not reach that branch). A
`/gbr/mcp/1.0.0` call reads four small messages on each side (two multistream-
select lines, the request or response, end of stream), so half the Yamux
frames of a call were window updates: ~5 of ~10 frames per side, each a Noise
message, a socket write and a wake-up of the peer's reader.

go-yamux (`stream.sendWindowUpdate`) and js-libp2p's yamux send an update only
once the bytes read but not yet credited reach half the maximum window; the
sender keeps sending on the credit it still has. `install()` replaces the
method with that rule, keeping the library's window auto-tuning (the window
doubles when updates come within 4 RTT). Flow control stays the same protocol
(RFC-less; the yamux spec at github.com/hashicorp/yamux/blob/master/spec.md):
a peer never gets more credit than the window, and a reader that keeps reading
always releases it. Measured with scripts/bench/rpc.py (see issue 3's note).

Suggested upstream change: apply the half-window threshold in the
"partial slack" and "release on read" branches too, as go-yamux does.
"""

from __future__ import annotations

from libp2p.stream_muxer.yamux.yamux import YamuxStream

__all__ = ["install"]


async def _send_window_update_past_half(self: YamuxStream, *, bytes_read: int = 0) -> None:
    """Credit the peer with what was read, once that is at least half the window."""
    async with self.window_lock:
        buffered = len(self.conn.stream_buffers.get(self.stream_id, b""))
        delta = self.target_recv_window - (self.recv_window + buffered)
        if delta < self.target_recv_window // 2:
            return
        self.recv_window += delta
        delta += self._apply_autotune_epoch(buffered)
    await self.send_window_update(delta, skip_lock=True)


def install() -> None:
    """Patch `YamuxStream` process-wide (idempotent). Called by gbr_node.p2p.host at import."""
    YamuxStream._auto_tune_and_send_window_update = _send_window_update_past_half  # type: ignore[method-assign]  # the patch is the point
