"""The byte-stream interface the RPC layer runs on, and frame I/O over it.

The RPC layer knows nothing of libp2p (STYLE.md, "Layers import downwards
only"): `p2p/` adapts a libp2p stream to `ByteStream`, tests use
`trio.testing.memory_stream_pair()`. Any `trio.abc.Stream` satisfies it.
"""

from __future__ import annotations

from typing import Protocol

import trio

from gbr_node.errors import CallTimeout, RemoteProtocolError, StreamBroken
from gbr_node.rpc.codes import PARSE_ERROR
from gbr_node.rpc.framing import FrameDecoder, encode_frame

RECEIVE_CHUNK = 64 * 1024


class ByteStream(Protocol):
    """A reliable, ordered, bidirectional byte stream (the shape of `trio.abc.Stream`).

    Contract for implementations (an adapter must translate foreign errors):
    - `receive_some(max_bytes)` returns 1..max_bytes bytes, or b"" once the
      peer has finished sending (EOF); when the stream was reset or the
      connection died it raises `trio.BrokenResourceError` or a `GbrError` of
      the adapter's (p2p's `StreamBroken`); after a local `aclose()`,
      `trio.ClosedResourceError`.
    - `send_all(data)` returns once all of `data` is handed to the transport;
      it raises the same errors in the same cases.
    - `aclose()` closes gracefully: the peer reads everything sent, then EOF,
      even if it had unread data of its own in flight (the server answers
      BUSY and TOO_LARGE without reading the request). Idempotent; must not
      raise when the peer is already gone.

    The trio errors become `StreamBroken` here; an adapter's `GbrError`
    passes through unchanged.

    Optional: `cancel_on_break(scope: trio.CancelScope) -> None`, cancelling
    `scope` once the stream is reset or its connection drops, without being
    read (rpc/admission.py and rpc/pipelined.py use it when present); a
    `broken` property, True once that happened (rpc/session.py does not send
    on a kept stream that is); `reset()`, ending the stream as broken rather
    than closed (rpc/pipelined.py when requests were cut short).
    """

    async def receive_some(self, max_bytes: int) -> bytes | bytearray: ...

    async def send_all(self, data: bytes) -> None: ...

    async def aclose(self) -> None: ...


async def read_frame(stream: ByteStream, decoder: FrameDecoder, timeout_s: float) -> bytes:
    """Read until `decoder` completes a frame and return its body.

    `timeout_s` (seconds) bounds the whole read, so a peer that sends half a
    frame and stalls cannot hold the stream. Only the first frame is returned:
    `/gbr/mcp/1.0.0` carries one message each way per stream, and bytes that
    arrive after it are discarded.

    Raises:
        RemoteProtocolError: TOO_LARGE or -32700 from the decoder, or -32700
            when the stream ends inside a frame.
        StreamBroken: EOF before any byte of a frame, or the stream was reset
            or closed.
        CallTimeout: no whole frame within `timeout_s`. Cancellation leaves the
            stream in an unknown state: close it.
    """
    with trio.move_on_after(timeout_s):
        while True:
            try:
                chunk = await stream.receive_some(RECEIVE_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise StreamBroken(f"stream broken while reading a frame: {exc}") from exc
            if not chunk:
                if decoder.buffered:
                    raise RemoteProtocolError(
                        PARSE_ERROR,
                        f"stream ended inside a frame ({decoder.buffered} bytes received)",
                    )
                raise StreamBroken("stream ended before a frame arrived")
            frames = decoder.feed(bytes(chunk))
            if frames:
                return frames[0]
    raise CallTimeout(f"no complete frame within {timeout_s} s")


async def write_frame(stream: ByteStream, body: bytes) -> None:
    """Send `body` as one frame (varint length prefix + body).

    No time limit of its own: wrap it in `trio.move_on_after` / `fail_after`.

    Raises:
        StreamBroken: the stream was reset or closed before all bytes were sent.
    """
    try:
        await stream.send_all(encode_frame(body))
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        raise StreamBroken(f"stream broken while writing a frame: {exc}") from exc
