"""Frames written whole, in order, and together when they come together (`/gbr/mcp/1.1.0`).

Many tasks answer (or call) on one stream at once. `FrameWriter.write(body)`
queues one frame; the first task to find the stream free writes every frame
queued so far in one `send_all`, and frames queued meanwhile go out together
in the next: under load, one send, one Yamux frame and one Noise message
carry many messages instead of one each; alone, a frame goes out at once.

What waits to be written is bounded: while a write is under way and
`max_queued_bytes` are already queued behind it, `write` waits for room
before it queues its frame. A write is shielded from cancellation (a frame
cut half-way would break every call on the stream) and bounded by
`timeout_s`. Once one fails, the writer is broken for good: every queued and
later write raises the same error.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from gbr_node.errors import CallTimeout, GbrError, StreamBroken
from gbr_node.rpc.framing import encode_frame
from gbr_node.rpc.stream import ByteStream

__all__ = ["FrameWriter"]


class _Batch:
    """Frames that go out in one `send_all`, and how that went."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.size = 0
        self.done = trio.Event()
        self.error: GbrError | None = None


class FrameWriter:
    """The one writer of `stream`'s frames (unsigned-varint prefix + body, rpc/framing.py).

    Args:
        stream: the stream written to.
        max_queued_bytes: bytes that may wait behind a write under way (at least one
            frame always may).
    """

    def __init__(self, stream: ByteStream, max_queued_bytes: int) -> None:
        self._stream = stream
        self._max_queued = max_queued_bytes
        self._open = _Batch()  # where frames queue while a write is under way
        self._writing = False
        self._free = trio.Event()  # set when the write under way ends
        self._room = trio.Event()  # set when the queued frames start being written
        self.failure: GbrError | None = None
        """The error that broke the writer, or None."""

    async def write(
        self, body: bytes, timeout_s: float, on_queued: Callable[[], None] | None = None
    ) -> None:
        """Write `body` as one frame, after every frame queued before it; return once it
        is handed to the stream.

        Args:
            body: the frame body (bytes of one JSON-RPC message).
            timeout_s: seconds the write this frame goes out in may take.
            on_queued: called once the frame has its place in the queue, before it is
                sent, so before the peer can learn of it (what the frame's answer
                releases, a slot or a request id, is free by then).

        Raises:
            StreamBroken: the stream was reset or closed before the frame went out.
            CallTimeout: the write did not finish within its `timeout_s`; the stream
                may hold part of a frame and must be reset.
            Either is also raised by every later write. Cancelled while waiting for
            room, nothing was queued; once queued, the frame goes out with its batch.
        """
        while self.failure is None and self._writing and self._open.size >= self._max_queued:
            await self._room.wait()
        if self.failure is not None:
            raise self.failure
        batch = self._open
        frame = encode_frame(body)
        batch.frames.append(frame)
        batch.size += len(frame)
        if on_queued is not None:
            on_queued()
        while not batch.done.is_set():
            if self.failure is not None:
                raise self.failure
            if batch is self._open and not self._writing:
                await self._flush(batch, timeout_s)
            elif batch is self._open:
                await self._free.wait()
            else:
                await batch.done.wait()
        if batch.error is not None:
            raise batch.error

    async def _flush(self, batch: _Batch, timeout_s: float) -> None:
        self._writing = True
        self._open = _Batch()
        self._free = free = trio.Event()
        self._room.set()
        self._room = trio.Event()
        try:
            with trio.CancelScope(shield=True), trio.move_on_after(timeout_s) as timer:
                await self._stream.send_all(b"".join(batch.frames))
            if timer.cancelled_caught:
                raise CallTimeout(f"a frame could not be written within {timeout_s} s")
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.failure = batch.error = StreamBroken(f"stream broken while writing: {exc}")
        except GbrError as exc:  # the adapter's StreamBroken, or the time limit
            self.failure = batch.error = exc
        finally:
            self._writing = False
            batch.done.set()
            free.set()
            if self.failure is not None:
                self._room.set()  # waiters for room see the failure
