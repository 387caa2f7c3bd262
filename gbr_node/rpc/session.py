"""The calling side of `/gbr/mcp/1.1.0`: many requests in flight on one stream, matched by id.

`CallSession(stream)` sends each request as soon as it is asked for and hands
each response to the call whose id it carries, in whatever order they come
(protocols/gbr-mcp-1.1.0.md). No task of its own: a call waiting for its
answer reads the stream for everyone while no other call does (one reader at
a time; it hands the reading over when its own answer is in), so a session
needs no nursery and holds nothing while no call waits.

Per call, errors a caller sees (errors.py), by whose fault:
- an `RpcError` subclass of `gbr_node.rpc.codes`: the peer answered this
  request with a JSON-RPC error, or refused the stream with id null before
  reading this request (`UnauthorizedPeer`, `MessageTooLarge`, ...);
- `LocalProtocolError`: the request is above `max_message_bytes` (not sent);
- `RemoteProtocolError`: the peer broke the protocol (a bad frame, a
  response to an id never sent); the session ends and every call in flight
  on it fails with this error;
- `StreamBroken`: the stream was reset or its connection dropped: every call
  in flight fails; `StreamEnded` (a `StreamBroken`): the peer ended the
  stream cleanly before answering, so by the protocol nothing of the request
  ran and it may be sent again;
- `CallTimeout`: no answer within the call's `timeout_s`.

A call that is cancelled or times out after its request was sent is
withdrawn with MCP's `notifications/cancelled` on the same stream; the other
calls go on, and its late answer, if one comes, is dropped. Once a session
has ended (`usable` is False) every new call fails at once: open a new stream.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import trio

from gbr_node.errors import (
    CallTimeout,
    GbrError,
    LocalProtocolError,
    RemoteProtocolError,
    RpcError,
    StreamBroken,
    StreamEnded,
)
from gbr_node.rpc.codes import INVALID_REQUEST, PARSE_ERROR, TOO_LARGE, error_from_wire
from gbr_node.rpc.framing import FrameDecoder
from gbr_node.rpc.messages import (
    ErrorResponse,
    Notification,
    Request,
    Response,
    decode_message,
    encode_message,
)
from gbr_node.rpc.stream import RECEIVE_CHUNK, ByteStream
from gbr_node.rpc.writer import FrameWriter

__all__ = ["CANCEL_SEND_S", "CallSession"]

CANCEL_SEND_S = 1.0
"""At most this long (seconds) is spent writing the `notifications/cancelled` of a
call given up; past it, the session is given up too."""


@dataclass
class _Waiter:
    """One call in flight: its request, then its response or the error that ended it."""

    request: Request
    answer: Response | ErrorResponse | GbrError | None = None
    wake: trio.Event = field(default_factory=trio.Event)


class CallSession:
    """Calls in flight on one `/gbr/mcp/1.1.0` stream (already negotiated), matched by id.

    Args:
        stream: the stream; owned by the session from now on (`aclose`).
        max_message_bytes: cap on each request and each response body (bytes).

    Request ids are integers 1, 2, 3, ... in the order calls start; an id is
    never used twice on a session.
    """

    def __init__(self, stream: ByteStream, *, max_message_bytes: int) -> None:
        self._stream = stream
        self._max_message_bytes = max_message_bytes
        self._decoder = FrameDecoder(max_message_bytes)
        self._next_id = 1
        self._waiting: dict[int, _Waiter] = {}
        self._writer = FrameWriter(stream, max_message_bytes)
        self._reading = False
        self._refusal: RpcError | None = None  # the peer's answer with id null
        self._ended: GbrError | None = None
        self.last_used = trio.current_time()
        """When the last call started or was answered (`trio.current_time()`, seconds)."""

    @property
    def usable(self) -> bool:
        """False once the stream ended, broke or was refused: new calls must go elsewhere.

        A stream that says it is `broken` (rpc/stream.py: reset, or its connection
        went down while no call read it) counts as ended."""
        if self._ended is None and getattr(self._stream, "broken", False):
            self._end(StreamBroken("the stream was reset or its connection went down"))
        return self._ended is None and self._refusal is None

    @property
    def in_flight(self) -> int:
        """Calls sent or being sent and not answered yet."""
        return len(self._waiting)

    async def call(self, method: str, params: dict[str, Any] | None, *, timeout_s: float) -> Any:
        """Send one request and return its `result`, however many other calls are in flight.

        `timeout_s` (seconds) bounds writing the request and awaiting its answer.
        Raises as the module docstring says. Cancelled (or timed out) after its
        request was sent, the call is withdrawn with `notifications/cancelled`
        and the session stays usable for the others.
        """
        if not self.usable:
            raise self._ended or self._refusal or StreamBroken("session ended")
        request_id = self._next_id
        self._next_id += 1
        request = Request(id=request_id, method=method, params=params)
        body = encode_message(request)
        if len(body) > self._max_message_bytes:
            raise LocalProtocolError(
                TOO_LARGE,
                f"{method} request of {len(body)} bytes exceeds {self._max_message_bytes} bytes",
            )
        waiter = _Waiter(request)
        self._waiting[request_id] = waiter
        self.last_used = trio.current_time()
        try:
            with trio.move_on_after(timeout_s):
                await self._send(body, timeout_s)
                return _result_of(await self._await(waiter), request)
            raise CallTimeout(f"{method}: no response within {timeout_s} s")
        finally:
            if self._waiting.pop(request_id, None) is not None and self.usable:
                await self._withdraw(request_id)

    async def notify(self, method: str, params: dict[str, Any] | None, *, timeout_s: float) -> None:
        """Send one notification (never answered). Raises `StreamBroken` or the refusal
        when the session is not usable, `CallTimeout` when not written in `timeout_s`."""
        if not self.usable:
            raise self._ended or self._refusal or StreamBroken("session ended")
        await self._send(encode_message(Notification(method=method, params=params)), timeout_s)

    async def aclose(self) -> None:
        """Fail the calls still in flight and close the stream (reset it when the peer broke
        the protocol). Idempotent; raises nothing but `trio.Cancelled`."""
        broke = isinstance(self._ended, RemoteProtocolError)
        self._end(StreamBroken("the session was closed"))
        reset = getattr(self._stream, "reset", None)
        if broke and reset is not None:
            await reset()
        else:
            await self._stream.aclose()

    # -- writing ------------------------------------------------------------------------

    async def _send(self, body: bytes, timeout_s: float) -> None:
        """Write one frame whole, with any frames written at the same time (rpc/writer.py);
        a write that fails or takes over `timeout_s` ends the session."""
        if self._ended is not None:
            raise self._ended
        try:
            await self._writer.write(body, timeout_s)
        except GbrError as exc:
            self._end(exc)
            raise

    async def _withdraw(self, request_id: int) -> None:
        """Tell the peer a call was given up (MCP `notifications/cancelled`); never raises."""
        params = {"requestId": request_id, "reason": "the caller gave up"}
        body = encode_message(Notification(method="notifications/cancelled", params=params))
        # on failure the session has ended, and the peer cancels everything on it
        with trio.CancelScope(shield=True), contextlib.suppress(GbrError):
            await self._send(body, CANCEL_SEND_S)

    # -- reading ------------------------------------------------------------------------

    async def _await(self, waiter: _Waiter) -> Response | ErrorResponse:
        """Wait for `waiter`'s answer, reading the stream for every call while no other
        call does. Raises the error that ended the session."""
        while waiter.answer is None:
            if self._reading:
                if waiter.wake.is_set():
                    waiter.wake = trio.Event()
                await waiter.wake.wait()
                continue
            self._reading = True
            try:
                while waiter.answer is None:
                    await self._receive()
            finally:
                self._reading = False
                self._hand_over(waiter)
        if isinstance(waiter.answer, GbrError):
            raise waiter.answer
        return waiter.answer

    def _hand_over(self, leaving: _Waiter) -> None:
        """Wake one call still waiting, other than `leaving`, to read in its turn."""
        for other in self._waiting.values():
            if other.answer is None and other is not leaving:
                other.wake.set()
                return

    async def _receive(self) -> None:
        """Read one chunk and deliver every response it completes."""
        try:
            chunk = await self._stream.receive_some(RECEIVE_CHUNK)
        except (GbrError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            broken = exc if isinstance(exc, StreamBroken) else None
            self._end(broken or StreamBroken(f"the stream broke: {exc}"))
            return
        if not chunk:
            if self._decoder.buffered:  # an answer cut short: something ran
                cut = f"the stream ended inside a frame ({self._decoder.buffered} bytes received)"
                self._end(RemoteProtocolError(PARSE_ERROR, cut))
            else:
                unanswered = StreamEnded(
                    "the peer ended the stream without answering (nothing ran)"
                )
                self._end(self._refusal or unanswered)
            return
        try:
            frames = self._decoder.feed(bytes(chunk))
        except RemoteProtocolError as exc:
            self._end(exc)
            return
        for frame in frames:
            if self._ended is not None:
                return
            self._deliver(frame)
        self.last_used = trio.current_time()

    def _deliver(self, frame: bytes) -> None:
        """Hand one frame to the call it answers; a frame that answers none ends the session."""
        try:
            message = decode_message(frame)
        except RemoteProtocolError as exc:
            self._end(exc)
            return
        if not isinstance(message, Response | ErrorResponse):
            self._end(RemoteProtocolError(INVALID_REQUEST, "the peer sent a request on 1.1.0"))
            return
        if message.id is None:
            assert isinstance(message, ErrorResponse)
            error = message.error
            self._refusal = error_from_wire(error.code, error.message, error.data)
            return  # the peer answers what it read, then ends the stream
        request_id = message.id
        if not (isinstance(request_id, int) and 0 < request_id < self._next_id):
            never = f"response id {request_id!r} answers no request sent on this stream"
            self._end(RemoteProtocolError(INVALID_REQUEST, never))
            return
        waiter = self._waiting.pop(request_id, None)
        if waiter is None:
            return  # late: a call withdrawn or answered before (MCP: ignore it)
        waiter.answer = message
        waiter.wake.set()

    def _end(self, error: GbrError) -> None:
        """End the session (the first error stays) and fail every call still waiting."""
        if self._ended is None:
            self._ended = error
        for waiter in self._waiting.values():
            if waiter.answer is None:
                waiter.answer = self._ended
                waiter.wake.set()


def _result_of(message: Response | ErrorResponse, request: Request) -> Any:
    """The result of `message`, or the error it carries raised as an `RpcError` subclass."""
    if isinstance(message, ErrorResponse):
        raise error_from_wire(message.error.code, message.error.message, message.error.data)
    if not isinstance(message.result, dict):
        raise RemoteProtocolError(INVALID_REQUEST, f"{request.method} result is not an object")
    return message.result
