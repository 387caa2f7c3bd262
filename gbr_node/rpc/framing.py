"""Length-prefixed frames: an unsigned varint byte count, then that many body bytes.

Pure: bytes in, frames out, no networking code (the shape of h11's
`receive_data` / `next_event`). The prefix follows the multiformats
unsigned-varint spec (https://github.com/multiformats/unsigned-varint):
LEB128, least significant group first, at most 9 bytes (63 bits), and only
the minimal encoding is valid. Examples: 0 -> `00`, 1 -> `01`, 127 -> `7f`,
128 -> `80 01`, 300 -> `ac 02`, 4 MiB (4194304) -> `80 80 80 02`.
"""

from __future__ import annotations

from gbr_node.errors import LocalProtocolError, RemoteProtocolError
from gbr_node.rpc.codes import PARSE_ERROR, TOO_LARGE

MAX_VARINT_BYTES = 9
_MAX_VARINT_VALUE = (1 << (7 * MAX_VARINT_BYTES)) - 1


def encode_varint(value: int) -> bytes:
    """Encode `value` (0 <= value < 2**63) as a minimal unsigned varint.

    Raises:
        LocalProtocolError: `value` is negative or needs more than 9 bytes.
    """
    if not 0 <= value <= _MAX_VARINT_VALUE:
        raise LocalProtocolError(
            TOO_LARGE, f"value {value} cannot be an unsigned varint of at most 9 bytes"
        )
    out = bytearray()
    while True:
        group = value & 0x7F
        value >>= 7
        if value:
            out.append(group | 0x80)
        else:
            out.append(group)
            return bytes(out)


def encode_frame(body: bytes) -> bytes:
    """Return `varint(len(body)) + body`: one frame ready to send.

    Raises:
        TypeError: `body` is not bytes-like (a `str` must be encoded first).
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        raise TypeError(f"body must be bytes, not {type(body).__name__}")
    return encode_varint(len(body)) + bytes(body)


class FrameDecoder:
    """Incremental frame decoder: `feed()` bytes as they arrive, get whole frame bodies back.

    `max_size` (bytes) caps a frame's body; a length prefix above it is refused
    as soon as the prefix is complete, before any body byte is awaited or
    stored, so a peer cannot make us buffer more than `max_size` plus 9 bytes.

    After a bad prefix the decoder is broken for good: every later `feed()`
    raises the same error (the stream cannot be resynchronised). Frames that
    the same `feed()` completed before the bad prefix are still returned; the
    error is raised by the next call.
    """

    def __init__(self, max_size: int) -> None:
        if max_size < 0:
            raise ValueError(f"max_size must be >= 0 bytes, got {max_size}")
        self.max_size = max_size
        self._buffer = bytearray()
        self._length: int | None = None
        self._prefix_size = 0
        self._error: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes of the frame in progress received so far, its length prefix included."""
        return self._prefix_size + len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """Add `data` and return the bodies of every frame it completes, in order.

        Raises:
            RemoteProtocolError: code TOO_LARGE when a prefix announces more than
                `max_size` bytes; code -32700 (PARSE_ERROR) when a prefix is not a
                minimal unsigned varint of at most 9 bytes.
        """
        if self._error is not None:
            raise self._error
        self._buffer += data
        frames: list[bytes] = []
        start = 0
        try:
            while True:
                if self._length is None:
                    parsed = self._read_prefix(start)
                    if parsed is None:
                        break
                    self._length, body_start = parsed
                    self._prefix_size, start = body_start - start, body_start
                end = start + self._length
                if len(self._buffer) < end:
                    break
                frames.append(bytes(self._buffer[start:end]))
                self._length, self._prefix_size = None, 0
                start = end
        except RemoteProtocolError:
            if not frames:
                raise
        finally:
            del self._buffer[:start]
        return frames

    def _read_prefix(self, start: int) -> tuple[int, int] | None:
        """Parse a varint at `start`: (length, body start), or None if more bytes are needed."""
        value = 0
        for index in range(MAX_VARINT_BYTES):
            position = start + index
            if position >= len(self._buffer):
                return None
            byte = self._buffer[position]
            value |= (byte & 0x7F) << (7 * index)
            if byte & 0x80:
                continue
            if index > 0 and byte == 0:
                raise self._fail(PARSE_ERROR, "frame length prefix is not minimally encoded")
            if value > self.max_size:
                raise self._fail(
                    TOO_LARGE,
                    f"frame of {value} bytes exceeds the limit of {self.max_size} bytes",
                    {"limit": self.max_size, "announced": value},
                )
            return value, position + 1
        raise self._fail(PARSE_ERROR, "frame length prefix is longer than 9 bytes")

    def _fail(self, code: int, message: str, data: object | None = None) -> RemoteProtocolError:
        self._error = RemoteProtocolError(code, message, data)
        return self._error
