"""The serving side of `/gbr/mcp/1.1.0`: many requests in flight on one stream, answered by id.

`serve_pipelined(server, stream, peer_id)` reads frames one after another and
runs each request in a task of its own, so answers leave as they are ready,
each with its request's id (protocols/gbr-mcp-1.1.0.md). What `/gbr/mcp/1.0.0`
does per stream it does per request (GBR-DOS-01, GBR-FAIL-01):

- trust is asked of the server's `Authorizer` before the first byte of the
  stream is read and again before each frame is decoded: a peer not (or no
  longer) trusted gets -32001 with id null, and nothing more is read;
- a request takes one of the peer's slots (the same `PeerSlots` its 1.0.0
  streams take) or is answered -32005 BUSY with its id at once; the slot is
  held until its answer is queued for writing (before it is sent, so a caller
  that sends again on each answer never finds its previous slot still held;
  rpc/writer.py bounds what is queued) or it is cancelled;
- a frame's length prefix is checked against `max_message_bytes` before its
  body is awaited; a frame must arrive whole within `read_timeout_s` of its
  first byte; each method runs under `call_timeout_s`; each answer is written
  whole (shielded from cancellation; with the answers ready at the same time,
  rpc/writer.py) within `read_timeout_s`, or the stream is reset.

An answer with id null ends the stream: nothing more is read, the requests
already in flight are answered, then the stream is closed. So does the
caller's end of stream, and `read_timeout_s` without a byte while nothing is
in flight. `notifications/cancelled` (MCP) cancels one request, which is then
not answered; a reset or dropped stream cancels every request on it, and a
stream some of whose requests were cut short that way (or by the node shutting
down) is reset, never closed cleanly: a clean end promises the caller that its
unanswered requests never ran. Nothing but `trio.Cancelled` leaves
`serve_pipelined`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import trio

from gbr_node.errors import GbrError, RemoteProtocolError, RpcError, StreamBroken
from gbr_node.rpc import codes
from gbr_node.rpc.framing import FrameDecoder
from gbr_node.rpc.messages import (
    ErrorResponse,
    Notification,
    Request,
    RequestId,
    Response,
    decode_message,
    error_response,
)
from gbr_node.rpc.server import Outcome, StreamServer, encode_response
from gbr_node.rpc.stream import RECEIVE_CHUNK, ByteStream
from gbr_node.rpc.writer import FrameWriter

__all__ = ["CANCELLED", "serve_pipelined"]

CANCELLED = "notifications/cancelled"
"""MCP's cancellation notification: `{"requestId": ID, "reason"?: TEXT}`."""
log = logging.getLogger(__name__)
GrantT = TypeVar("GrantT")


async def serve_pipelined(
    server: StreamServer[GrantT],
    stream: ByteStream,
    peer_id: str,
    before_each: Callable[[], None] | None = None,
) -> None:
    """Serve `/gbr/mcp/1.1.0` requests of `peer_id` on `stream` until it ends; close it.

    `peer_id` comes from the authenticated (Noise) connection, never from a
    message. `before_each`, when given, is called before each frame is
    admitted (to apply a hot-reloaded profile's limits to `server.limits`).
    Records one `CallRecord` per request through `server.record`. Raises
    nothing but `trio.Cancelled`; the stream is closed (or reset) on return.
    """
    pipeline = _Pipeline(server, stream, peer_id, before_each)
    ended = False
    try:
        await pipeline.run()
        ended = True
    except GbrError as exc:
        log.info("1.1.0 stream from %s ended early: %s", peer_id, exc)
    except Exception:
        log.exception("unexpected failure serving a 1.1.0 stream from %s", peer_id)
    finally:
        # anything but a normal end (the node shutting down included) may have cut
        # requests short: a reset, never the clean end that says "nothing ran"
        await pipeline.close(reset=not ended)


class _Pipeline(Generic[GrantT]):
    """One stream being served: its frames, its requests in flight, its one writer."""

    def __init__(
        self,
        server: StreamServer[GrantT],
        stream: ByteStream,
        peer_id: str,
        before_each: Callable[[], None] | None,
    ) -> None:
        self._server = server
        self._stream = stream
        self._peer_id = peer_id
        self._before_each = before_each
        self._decoder = FrameDecoder(server.limits.max_message_bytes)
        self._frames: deque[bytes | RemoteProtocolError] = deque()
        self._frame_started = 0.0
        self._active_at = trio.current_time()  # last byte received or request finished
        self._in_flight: dict[RequestId, trio.CancelScope] = {}
        self._writer = FrameWriter(stream, server.limits.max_message_bytes)
        self._cut = False  # reset, never close: a write failed, or the stream broke
        self._calls: trio.Nursery | None = None

    async def run(self) -> None:
        """Read and dispatch until the stream ends, then wait for the requests in flight."""
        async with trio.open_nursery() as calls:
            self._calls = calls
            cancel_on_break = getattr(self._stream, "cancel_on_break", None)
            if cancel_on_break is not None:
                cancel_on_break(calls.cancel_scope)  # a reset ends every call at once
            try:
                if await self._admit() is not None:
                    while (frame := await self._next_frame()) is not None:
                        if not await self._take(frame, calls, trio.current_time()):
                            break
            except StreamBroken as exc:
                log.info("1.1.0 stream from %s broke: %s", self._peer_id, exc)
                calls.cancel_scope.cancel()
        if calls.cancel_scope.cancelled_caught or calls.cancel_scope.cancel_called:
            self._cut = True

    async def close(self, *, reset: bool) -> None:
        """Close the stream; reset it instead when asked, or when a request was cut
        short or a write failed."""
        resetter = getattr(self._stream, "reset", None)
        try:
            if (reset or self._cut) and resetter is not None:
                await resetter()
            else:
                await self._stream.aclose()
        except Exception:
            log.exception("closing a 1.1.0 stream from %s failed", self._peer_id)

    # -- reading ------------------------------------------------------------------------

    async def _next_frame(self) -> bytes | RemoteProtocolError | None:
        """The next whole frame's body, or the decoder's error in its turn; None when
        reading is over (end of stream, idle with nothing in flight, a refusal sent)."""
        limits = self._server.limits
        while not self._frames:
            buffered = self._decoder.buffered
            if buffered:
                deadline = self._frame_started + limits.read_timeout_s
            elif self._in_flight:  # idle time counts only while nothing runs
                deadline = trio.current_time() + limits.read_timeout_s
            else:
                deadline = self._active_at + limits.read_timeout_s
            with trio.move_on_at(deadline) as timer:
                chunk = await self._receive()
            if timer.cancelled_caught:
                if buffered:
                    message = f"request frame not complete within {limits.read_timeout_s} s"
                    await self._refuse(codes.CALL_TIMEOUT, message)
                    return None
                idle_until = self._active_at + limits.read_timeout_s
                if self._in_flight or trio.current_time() < idle_until:
                    continue
                return None
            self._active_at = trio.current_time()
            if not chunk:
                if buffered:
                    message = f"stream ended inside a frame ({buffered} bytes received)"
                    await self._refuse(codes.PARSE_ERROR, message)
                return None
            if not buffered:
                self._frame_started = trio.current_time()
            try:
                frames = self._decoder.feed(chunk)
            except RemoteProtocolError as exc:
                self._frames.append(exc)
                break
            self._frames.extend(frames)
            if frames:
                self._frame_started = trio.current_time()
                try:
                    self._decoder.feed(b"")  # a bad prefix after these frames: refused in turn
                except RemoteProtocolError as exc:
                    self._frames.append(exc)
        return self._frames.popleft()

    async def _receive(self) -> bytes:
        try:
            return bytes(await self._stream.receive_some(RECEIVE_CHUNK))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise StreamBroken(f"1.1.0 stream broke while reading: {exc}") from exc

    # -- admitting ----------------------------------------------------------------------

    async def _admit(self) -> Any:
        """The peer's grant now, or None once a refusal with id null was written."""
        try:
            grant = self._server.authorizer.authorize(self._peer_id)
        except RpcError as exc:
            await self._refuse(exc.code, exc.message, exc.data)
            return None
        except Exception:
            log.exception("deciding whether %s is trusted failed", self._peer_id)
            await self._refuse(codes.INTERNAL_ERROR, "internal error while authorizing")
            return None
        if grant is None:
            await self._refuse(codes.UNAUTHORIZED_PEER, "this node does not trust your peer ID")
        return grant

    async def _take(
        self, frame: bytes | RemoteProtocolError, calls: trio.Nursery, started: float
    ) -> bool:
        """Admit, decode and start one frame's message; False when reading must stop."""
        if isinstance(frame, RemoteProtocolError):  # a bad length prefix: no way to go on
            await self._refuse(frame.code, frame.message, frame.data)
            return False
        if self._before_each is not None:
            self._before_each()
            self._decoder.max_size = self._server.limits.max_message_bytes
        grant = await self._admit()
        if grant is None:
            return False
        try:
            message = decode_message(frame)
        except RpcError as exc:
            await self._refuse(exc.code, exc.message, exc.data)
            return False
        if isinstance(message, Notification):
            self._notification(message, grant, calls, started)
            return True
        if not isinstance(message, Request):
            await self._refuse(codes.INVALID_REQUEST, "expected a request or a notification")
            return False
        if message.id in self._in_flight:
            already = f"request id {message.id!r} is already in flight on this stream"
            await self._refuse(codes.INVALID_REQUEST, already)
            return False
        limit = self._server.limits.max_concurrent_calls_per_peer
        if not self._server.slots.take_nowait(self._peer_id, limit):
            outcome = Outcome(method=message.method)
            busy = f"too many concurrent calls from this peer (limit {limit})"
            await self._write(error_response(message.id, codes.BUSY, busy), outcome)
            self._server.record(self._peer_id, outcome, trio.current_time() - started)
            return not self._cut
        scope = trio.CancelScope()
        self._in_flight[message.id] = scope
        calls.start_soon(self._call, message, grant, scope, started)
        return True

    def _notification(
        self, message: Notification, grant: Any, calls: trio.Nursery, started: float
    ) -> None:
        """`notifications/cancelled` cancels a request in flight (an unknown id is
        ignored, as MCP says); any other notification runs in a slot, or is dropped."""
        if message.method == CANCELLED:
            params = message.params if isinstance(message.params, dict) else {}
            target = params.get("requestId")
            if isinstance(target, int | str) and not isinstance(target, bool):
                scope = self._in_flight.get(target)
                if scope is not None:
                    scope.cancel()
            return
        limit = self._server.limits.max_concurrent_calls_per_peer
        if not self._server.slots.take_nowait(self._peer_id, limit):
            log.info("notification %s from %s dropped: busy", message.method, self._peer_id)
            return
        calls.start_soon(self._notify, message, grant, started)

    # -- running and answering ----------------------------------------------------------

    async def _call(
        self, request: Request, grant: Any, scope: trio.CancelScope, started: float
    ) -> None:
        outcome = Outcome(method=request.method)
        finished = False

        def finish() -> None:  # once its answer is queued: its id and slot are free
            nonlocal finished
            if not finished:
                finished = True
                del self._in_flight[request.id]
                self._server.slots.give_back(self._peer_id)
                self._active_at = trio.current_time()

        try:
            with scope:
                response = await self._server.answer(request, self._peer_id, grant, outcome)
            if scope.cancelled_caught:
                outcome.note = "caller cancelled"
            else:
                await self._write(response, outcome, finish)
        except trio.Cancelled:
            outcome.note = "caller left"  # the stream broke: no one to answer
            raise
        finally:
            finish()
            self._server.record(self._peer_id, outcome, trio.current_time() - started)

    async def _notify(self, message: Notification, grant: Any, started: float) -> None:
        outcome = Outcome(method=message.method, answered=True)
        try:
            with trio.move_on_after(self._server.limits.call_timeout_s):
                await self._server.take_notification(message, self._peer_id, grant)
        finally:
            self._server.slots.give_back(self._peer_id)
            self._server.record(self._peer_id, outcome, trio.current_time() - started)

    async def _refuse(self, code: int, message: str, data: object | None = None) -> None:
        """Answer with id null (the stream ends: nothing more is read) and record it."""
        outcome = Outcome()
        started = trio.current_time()
        await self._write(error_response(None, code, message, data), outcome)
        self._server.record(self._peer_id, outcome, trio.current_time() - started)

    async def _write(
        self,
        response: Response | ErrorResponse,
        outcome: Outcome,
        on_queued: Callable[[], None] | None = None,
    ) -> None:
        """Write one answer whole (with any written at the same time, rpc/writer.py); give
        the stream up (reset it, cancel every request on it) when that fails or takes
        over `read_timeout_s`."""
        limits = self._server.limits
        body, outcome.error_code = encode_response(response, limits.max_message_bytes)
        outcome.answered = True
        try:
            await self._writer.write(body, limits.read_timeout_s, on_queued)
        except GbrError as exc:
            if not self._cut:
                log.info("1.1.0 answers to %s not written, stream dropped: %s", self._peer_id, exc)
            self._cut = True
            if self._calls is not None:
                self._calls.cancel_scope.cancel()
