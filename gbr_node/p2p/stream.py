"""A libp2p stream seen as a plain byte stream, the interface the RPC layer depends on.

`Libp2pByteStream` has the shape of `trio.abc.Stream` that gbr_node/rpc/
expects (`receive_some`, `send_all`, `aclose`), so rpc/ never imports libp2p
(STYLE.md, layers import downwards only). `NetStream.read(n)` may return fewer
than `n` bytes, as a socket does; callers loop (rpc/ frames its messages).
"""

from __future__ import annotations

import trio
from libp2p.abc import IMuxedStream, INetStream
from libp2p.network.stream.exceptions import StreamEOF, StreamError

from gbr_node.errors import StreamBroken
from gbr_node.p2p.yamux_guard import cancel_on_reset, discard_unread, is_broken

__all__ = ["DEFAULT_RECEIVE_BYTES", "Libp2pByteStream", "StreamBroken"]

DEFAULT_RECEIVE_BYTES = 64 * 1024


class Libp2pByteStream:
    """One libp2p stream (already past protocol negotiation) as a byte stream.

    Attributes:
        remote_peer_id: base58 peer ID at the other end, as authenticated by
            the Noise handshake of the stream's connection.
        protocol_id: the protocol negotiated on this stream, e.g. `/gbr/mcp/1.0.0`.
    """

    def __init__(self, stream: INetStream, remote_peer_id: str, protocol_id: str) -> None:
        self._stream = stream
        self.remote_peer_id = remote_peer_id
        self.protocol_id = protocol_id
        self._eof = False
        self._closed = False
        self._cut_short = False  # a send was cancelled: the peer got part of a message

    async def receive_some(self, max_bytes: int = DEFAULT_RECEIVE_BYTES) -> bytes:
        """Return the next 1..`max_bytes` bytes, or b"" once the peer has closed its side.

        Waits until at least one byte or the end of the stream arrives; every
        later call after the end also returns b"". Cancellation leaves the
        stream usable and loses no data.

        Raises:
            ValueError: `max_bytes` is less than 1.
            StreamBroken: the peer reset the stream or the connection dropped.
            trio.ClosedResourceError: `aclose()` was called before.
        """
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        if self._closed:
            raise trio.ClosedResourceError("stream was closed locally")
        if self._eof:
            return b""
        try:
            data = await self._stream.read(max_bytes)
        except StreamEOF as exc:
            # py-libp2p 0.8.1's Yamux forgets a stream once its RST arrives, and
            # later reads report EOF; its `reset_received` flag tells them apart.
            muxed = self._muxed_stream
            if getattr(muxed, "reset_received", False):
                raise StreamBroken(f"peer {self.remote_peer_id} reset the stream") from exc
            data = b""
        except StreamError as exc:  # StreamReset, StreamClosed, StreamError
            raise StreamBroken(f"stream from peer {self.remote_peer_id} broke: {exc!r}") from exc
        if not data:
            self._eof = True
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Send all of `data` (may be empty) to the peer.

        Cancellation may leave part of `data` sent (whole Yamux frames only:
        the connection and its other streams are never harmed, yamux_guard.py);
        `aclose()` then resets the stream, so the peer never takes a cut
        message for a whole one.

        Raises:
            StreamBroken: the peer reset the stream, closed its read side, or the
                connection dropped.
            trio.ClosedResourceError: `aclose()` was called before.
        """
        if self._closed:
            raise trio.ClosedResourceError("stream was closed locally")
        if not data:
            return
        try:
            await self._stream.write(bytes(data))
        except trio.Cancelled:
            self._cut_short = True
            raise
        except StreamError as exc:
            raise StreamBroken(f"stream to peer {self.remote_peer_id} broke: {exc!r}") from exc

    @property
    def _muxed_stream(self) -> IMuxedStream:
        """The Yamux stream under this stream (what the yamux_guard patches act on)."""
        muxed: IMuxedStream = self._stream.muxed_stream  # type: ignore[attr-defined]  # NetStream has it; INetStream does not declare it
        return muxed

    @property
    def broken(self) -> bool:
        """True once the peer reset the stream or its connection is going down (known
        without reading: a kept stream found broken is replaced before it is written to)."""
        return is_broken(self._muxed_stream)

    def cancel_on_break(self, scope: trio.CancelScope) -> None:
        """Cancel `scope` when the peer resets this stream or the connection drops.

        At once if that already happened; costs no task and reads nothing
        (rpc/admission.py `unless_abandoned` uses it).
        """
        cancel_on_reset(self._muxed_stream, scope)

    async def reset(self) -> None:
        """Reset the stream (the peer sees it broken, not ended); idempotent, never raises.

        What a caller does when it gives up on an answer, so that the other
        end stops working for it.
        """
        self._closed = True
        discard_unread(self._muxed_stream)
        with trio.CancelScope(shield=True):
            await self._reset_quietly()

    async def aclose(self) -> None:
        """Close the stream: the peer reads end-of-stream after what was sent.

        Idempotent. A stream that cannot close gracefully (it is already
        broken, a send was cancelled, or this call is cancelled) is reset
        instead; nothing is raised but `trio.Cancelled`. Data the peer sent
        that was never read is dropped at once.
        """
        if self._closed:
            return
        self._closed = True
        discard_unread(self._muxed_stream)
        if self._cut_short:
            with trio.CancelScope(shield=True):
                await self._reset_quietly()
            return
        try:
            await self._stream.close()
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await self._reset_quietly()
            raise
        except Exception:
            await self._reset_quietly()

    async def _reset_quietly(self) -> None:
        try:
            await self._stream.reset()
        except Exception:  # already gone: nothing left to release
            return
