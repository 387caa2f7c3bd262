"""An incremental Server-Sent Events decoder: bytes in, events out. Pure.

Follows the WHATWG HTML standard, section 9.2 "Server-sent events"
("Interpreting an event stream"), with one deliberate difference noted on
`SseDecoder.close`. No I/O, no trio, no httpx: the model client feeds it the
bytes it reads, in chunks split anywhere (inside a line ending, inside a
UTF-8 character).

Rules applied:
- lines end with CRLF, LF or CR; a CR at the end of a chunk waits for the
  next chunk to tell whether an LF follows;
- a leading UTF-8 BOM is dropped; bytes that are not UTF-8 become U+FFFD;
- `:` at the start of a line is a comment; each comment is surfaced as an
  `SseComment` so the caller can treat it as a keep-alive;
- `field:value`, `field: value` (one leading space removed) and `field`
  alone (empty value); fields `data`, `event`, `id`, `retry`; others ignored;
- several `data` lines join with LF; an empty line dispatches the event; an
  event with no data field is not dispatched;
- unlike the standard, which ignores unknown fields, an `error` field is an
  event of type "error" with that value as its data: llama.cpp's server
  (builds of 2025) sent its mid-stream errors as `error: {...}` lines and
  then `data: [DONE]`, which would otherwise read as a complete answer.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: `event` type ("message" unless named), `data` text, last `id`."""

    data: str
    event: str = "message"
    id: str | None = None


@dataclass(frozen=True)
class SseComment:
    """A comment line (`: text`); servers send these as keep-alives."""

    text: str


SseItem = SseEvent | SseComment


class SseDecoder:
    """Turns a byte stream into `SseEvent`s and `SseComment`s.

    Call `feed(chunk)` for each chunk read and `close()` once at end of
    stream. Both return the items completed so far, in stream order.
    `retry` is the last reconnection time the server asked for
    (milliseconds), or None.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._at_start = True
        self._data: list[str] = []
        self._event = ""
        self._last_id: str | None = None
        self.retry: int | None = None

    def feed(self, chunk: bytes) -> list[SseItem]:
        """Decode `chunk` (any split) and return the items it completes."""
        return self._consume(self._decoder.decode(chunk, final=False), final=False)

    def close(self) -> list[SseItem]:
        """End of stream: process the last unterminated line and flush.

        Unlike the WHATWG text (which discards an event not followed by an
        empty line), a pending event is dispatched here: several
        OpenAI-compatible servers end the stream right after the last
        `data:` line.
        """
        items = self._consume(self._decoder.decode(b"", final=True), final=True)
        if self._buffer:
            self._line(self._buffer, items)
            self._buffer = ""
        self._dispatch(items)
        return items

    def _consume(self, text: str, *, final: bool) -> list[SseItem]:
        if self._at_start and text:
            text = text.removeprefix("\ufeff")
            self._at_start = False
        buffer = self._buffer + text
        items: list[SseItem] = []
        start = 0
        length = len(buffer)
        while True:
            cr = buffer.find("\r", start)
            lf = buffer.find("\n", start)
            if cr == -1 and lf == -1:
                break
            if cr != -1 and (lf == -1 or cr < lf):
                if cr + 1 == length and not final:
                    break  # a CR at the end: wait to see whether an LF follows
                end, nxt = cr, cr + 2 if buffer.startswith("\n", cr + 1) else cr + 1
            else:
                end, nxt = lf, lf + 1
            self._line(buffer[start:end], items)
            start = nxt
        self._buffer = buffer[start:]
        return items

    def _line(self, line: str, items: list[SseItem]) -> None:
        if not line:
            self._dispatch(items)
            return
        if line.startswith(":"):
            items.append(SseComment(line[1:].removeprefix(" ")))
            return
        name, colon, value = line.partition(":")
        if colon:
            value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "error":  # llama.cpp's non-standard field (see the module doc)
            self._data.append(value)
            self._event = "error"
        elif name == "event":
            self._event = value
        elif name == "id" and "\x00" not in value:
            self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)

    def _dispatch(self, items: list[SseItem]) -> None:
        if self._data:
            items.append(SseEvent("\n".join(self._data), self._event or "message", self._last_id))
        self._data = []
        self._event = ""
