"""The serving side of `/gbr/mcp/1.0.0`: one request and its response per stream.

`RpcServer.handle_stream(stream, peer_id)` asks the `ToolHost` whether the
peer is trusted and takes one of the peer's slots before it reads anything
(GBR-DOS-01), then reads one frame under a deadline, decodes it, runs the
method (cancelled if the caller goes away) and writes one response, then
closes the stream. Every failure becomes a
JSON-RPC error response (or, for notifications, a log line); no exception
leaves `handle_stream` except trio's cancellation. The contract is
protocols/gbr-mcp-1.0.0.md.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import trio
from pydantic import BaseModel, ValidationError

from gbr_node.errors import (
    CallTimeout,
    GbrError,
    InvalidArguments,
    LocalProtocolError,
    RpcError,
    SecurityViolation,
    StreamBroken,
    ToolError,
    UnknownTool,
)
from gbr_node.rpc import codes
from gbr_node.rpc.admission import PeerSlots, unless_abandoned
from gbr_node.rpc.framing import FrameDecoder
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.messages import (
    CallToolParams,
    CallToolResult,
    ErrorResponse,
    ListToolsParams,
    ListToolsResult,
    Notification,
    Request,
    Response,
    TextContent,
    decode_message,
    describe_validation_error,
    encode_message,
    error_response,
)
from gbr_node.rpc.stream import ByteStream, read_frame, write_frame

log = logging.getLogger(__name__)

GrantT = TypeVar("GrantT")
GrantT_co = TypeVar("GrantT_co", covariant=True)
ModelT = TypeVar("ModelT", bound=BaseModel)


class Authorizer(Protocol[GrantT_co]):
    """Who may open a stream: the trust decision a `StreamServer` makes before reading.

    `GrantT` is whatever the host wants handed back with each request (say,
    the peer's `TrustedPeer` entry); the server never looks inside it.
    """

    def authorize(self, peer_id: str) -> GrantT_co | None:
        """The grant of the Noise-authenticated `peer_id`, or None: not trusted, nothing runs.

        May raise `RpcError` to refuse a trusted peer with that code (id null),
        still before anything of its stream is read (`/gbr/chat/1.0.0`'s
        "refused by policy")."""
        ...


class ToolHost(Authorizer[GrantT], Protocol[GrantT]):
    """What the `/gbr/mcp/1.0.0` server serves: trust decisions and tools (the node)."""

    def list_tools(self, grant: GrantT) -> list[dict[str, Any]]:
        """MCP tool descriptions `{name, description, inputSchema}` of the granted tools only."""
        ...

    async def call_tool(
        self, grant: GrantT, name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        """Run tool `name`; return an MCP result `{content: [{type, text}], isError}`.

        Raises (each becomes an error response): `UnknownTool` (no such tool or
        not granted; -32602 as MCP says), `InvalidArguments` (-32602),
        `SecurityViolation` (SECURITY_VIOLATION), `CallTimeout` (CALL_TIMEOUT),
        any `RpcError` (sent as is). `ToolError` becomes a result with
        `isError: true`. Approvals (EVD-AI-01) are the host's to turn into a
        "pending" result. Cancelled when `call_timeout_s` runs out, and when
        the caller's stream breaks before the answer (rpc/admission.py).
        """
        ...

    async def notify(self, grant: GrantT, method: str, params: dict[str, Any]) -> None:
        """Take a `notifications/*` notification (such as `notifications/approval_resolved`)."""
        ...


@dataclass(frozen=True)
class CallRecord:
    """What one request did, for the serve log: one record per answered stream (1.0.0)
    or request (1.1.0, rpc/pipelined.py), and per request whose caller left or
    withdrew it before its answer.

    `method` is None when no request was read (BUSY, bad frame); `tool` is set
    for `tools/call`; `error_code` is the JSON-RPC error sent, None for a
    result or a notification; `is_error` is a tool result's `isError`;
    `elapsed_s` runs from the stream's start (1.0.0) or the request's frame
    (1.1.0) to the response being written or queued; `note` says what the
    caller got when the code alone would mislead: "unknown tool" (also for a
    tool not granted), "invalid arguments", "pending approval #N" (a protected
    write held, EVD-AI-01), "caller left" (the call was cancelled unanswered:
    the caller's stream broke), "caller cancelled" (1.1.0: the caller withdrew
    it with `notifications/cancelled`; nothing was answered).
    """

    peer_id: str
    method: str | None
    tool: str | None
    error_code: int | None
    is_error: bool
    elapsed_s: float
    note: str | None = None

    @property
    def outcome(self) -> str:
        """For the serve log: what the caller got: "ok", "tool error", "pending
        approval #N", "unknown tool", or the error's name ("unauthorized peer")."""
        if self.note is not None:
            return self.note
        if self.error_code is not None:
            return codes.CODE_NAMES.get(self.error_code, f"error {self.error_code}")
        return "tool error" if self.is_error else "ok"


class _Prefixed:
    """`stream` with `first` put back in front of what it receives (`handle_session`)."""

    def __init__(self, stream: ByteStream, first: bytes) -> None:
        self._stream = stream
        self._first = first

    async def receive_some(self, max_bytes: int) -> bytes | bytearray:
        if self._first:
            first, self._first = self._first, b""
            return first
        return await self._stream.receive_some(max_bytes)

    async def send_all(self, data: bytes) -> None:
        await self._stream.send_all(data)

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __getattr__(self, name: str) -> Any:
        """The stream's own optional members (`cancel_on_break`, rpc/admission.py)."""
        return getattr(self._stream, name)


@dataclass
class Outcome:
    """Facts gathered while serving one request (one stream in 1.0.0), turned into a
    `CallRecord` at the end (`StreamServer.record`)."""

    method: str | None = None
    tool: str | None = None
    error_code: int | None = None
    is_error: bool = False
    answered: bool = False
    note: str | None = None


class StreamServer(Generic[GrantT]):
    """One JSON-RPC request and its response per stream, admitted before it is read.

    The part every protocol of the node served this way shares (`/gbr/mcp/1.0.0`
    here, `/gbr/chat/1.0.0` in chat/): trust, per-peer slots, the read
    deadline, decoding, error responses, cancellation when the caller goes
    away. Subclasses define the methods (`_dispatch`) and, if they take any,
    notifications (`_notify`). `on_call`, when given, is called with a
    `CallRecord` after each answered stream (its exceptions are logged and
    ignored).
    """

    def __init__(
        self,
        authorizer: Authorizer[GrantT],
        limits: Limits | None = None,
        *,
        on_call: Callable[[CallRecord], None] | None = None,
    ) -> None:
        self.authorizer = authorizer
        self.limits = limits or Limits()
        self._on_call = on_call
        self._slots = PeerSlots()

    @property
    def slots(self) -> PeerSlots:
        """The per-peer slots every protocol served by this server shares."""
        return self._slots

    def active_calls(self, peer_id: str) -> int:
        """Requests of `peer_id` being served right now (streams, in 1.0.0)."""
        return self._slots.held(peer_id)

    async def handle_stream(self, stream: ByteStream, peer_id: str) -> None:
        """Serve one request on `stream` from `peer_id`, answer it, and close the stream.

        `peer_id` must come from the authenticated (Noise) connection, never
        from the message. Trust is decided first, then the peer's slot is
        taken, and only then is the request read (GBR-DOS-01): an untrusted
        peer gets UNAUTHORIZED_PEER and a peer at its limit gets BUSY (both
        with id null) without a byte of their request being read. A call whose
        stream breaks before it is answered is cancelled (`unless_abandoned`).

        Returns when the stream is closed; raises nothing but `trio.Cancelled`
        (the stream is closed then too).
        """
        await self._serve_requests(stream, peer_id, None, many=False)

    async def handle_session(
        self, stream: ByteStream, peer_id: str, before_each: Callable[[], None] | None = None
    ) -> None:
        """Serve requests on `stream` one after another, each answered before the next is read.

        Each request is admitted as `handle_stream` admits a stream: trust and a
        slot are decided once its first byte is there (one byte of the length
        prefix, never the body) and before the rest is read, so a profile that
        withdrew trust or chat meanwhile refuses it (GBR-DOS-01); `before_each`,
        when given, is called first, e.g. to apply a hot-reloaded profile's
        limits. A slot is held per request, not while the stream waits. The
        stream is closed, quietly, when the peer ends its side or sends no byte
        for `read_timeout_s` between requests; and after an answer with id null
        (refused peer, BUSY, a broken, oversized or late frame: the stream's
        state is unknown). Raises nothing but `trio.Cancelled`.
        """
        await self._serve_requests(stream, peer_id, before_each, many=True)

    async def _serve_requests(
        self,
        stream: ByteStream,
        peer_id: str,
        before_each: Callable[[], None] | None,
        *,
        many: bool,
    ) -> None:
        """`handle_stream` (one request) and `handle_session` (`many`); closes `stream`."""
        served = stream
        try:
            while True:
                if before_each is not None:
                    before_each()
                started = trio.current_time()
                outcome = Outcome()
                try:
                    clean = await self._admit_and_serve(served, peer_id, outcome)
                finally:
                    if outcome.answered or outcome.note is not None:
                        self.record(peer_id, outcome, trio.current_time() - started)
                if not (many and clean):
                    return
                first = await self._first_byte(stream)
                if not first:
                    return
                served = _Prefixed(stream, first)
        except GbrError as exc:  # StreamClosed, or the stream adapter's own error
            log.info("stream from %s ended early: %s", peer_id, exc)
        except Exception:
            log.exception("unexpected failure serving a stream from %s", peer_id)
        finally:
            try:
                await stream.aclose()
            except Exception:
                log.exception("closing a stream from %s failed", peer_id)

    async def _first_byte(self, stream: ByteStream) -> bytes:
        """The next request's first byte, or b"" when the stream ended, broke or stayed
        silent for `read_timeout_s`."""
        first = b""
        ended = (GbrError, trio.BrokenResourceError, trio.ClosedResourceError)
        with trio.move_on_after(self.limits.read_timeout_s), contextlib.suppress(*ended):
            first = bytes(await stream.receive_some(1))
        return first

    async def _admit_and_serve(self, stream: ByteStream, peer_id: str, outcome: Outcome) -> bool:
        """Admit and serve one request; True when an answer with the request's id (or none,
        for a notification) left the stream ready for another."""
        try:
            grant = self.authorizer.authorize(peer_id)
        except RpcError as exc:
            await self._respond(
                stream, error_response(None, exc.code, exc.message, exc.data), outcome
            )
            return False
        except Exception:
            log.exception("deciding whether %s is trusted failed", peer_id)
            refusal = error_response(None, codes.INTERNAL_ERROR, "internal error while authorizing")
            await self._respond(stream, refusal, outcome)
            return False
        if grant is None:
            refusal = error_response(
                None, codes.UNAUTHORIZED_PEER, "this node does not trust your peer ID"
            )
            await self._respond(stream, refusal, outcome)
            return False
        limit = self.limits.max_concurrent_calls_per_peer
        if not self._slots.take_nowait(peer_id, limit):
            message = f"too many concurrent calls from this peer (limit {limit})"
            await self._respond(stream, error_response(None, codes.BUSY, message), outcome)
            return False
        try:
            response = await self._serve(stream, peer_id, grant, outcome)
            if response is not None:
                await self._respond(stream, response, outcome)
            return response is None or response.id is not None
        finally:
            self._slots.give_back(peer_id)

    async def _serve(
        self, stream: ByteStream, peer_id: str, grant: GrantT, outcome: Outcome
    ) -> Response | ErrorResponse | None:
        """Read and run one message; return the response to send (None for a notification)."""
        decoder = FrameDecoder(self.limits.max_message_bytes)
        try:
            message = decode_message(await read_frame(stream, decoder, self.limits.read_timeout_s))
        except RpcError as exc:
            return error_response(None, exc.code, exc.message, exc.data)
        except CallTimeout:
            timeout = self.limits.read_timeout_s
            return error_response(
                None, codes.CALL_TIMEOUT, f"request frame not complete within {timeout} s"
            )
        outcome.method = message.method if isinstance(message, Request | Notification) else None
        if isinstance(message, Notification):
            outcome.answered = True
            await self.take_notification(message, peer_id, grant)
            return None
        if not isinstance(message, Request):
            return error_response(
                None, codes.INVALID_REQUEST, "expected a request or a notification"
            )
        try:
            return await unless_abandoned(
                stream, lambda: self.answer(message, peer_id, grant, outcome)
            )
        except StreamBroken:
            outcome.note = "caller left"  # no one to answer; still a line in the serve log
            raise

    async def answer(
        self, request: Request, peer_id: str, grant: GrantT, outcome: Outcome
    ) -> Response | ErrorResponse:
        """Run one admitted request and return the response to send: its result, or the
        error it raised as a JSON-RPC error with the request's id (-32603 for anything
        unexpected, logged here, never sent). Raises nothing but `trio.Cancelled`.

        Shared by `/gbr/mcp/1.0.0` (`handle_stream`) and `/gbr/mcp/1.1.0`
        (rpc/pipelined.py), which admit, read and write each in their own way.
        """
        try:
            return Response(id=request.id, result=await self._dispatch(request, grant, outcome))
        except RpcError as exc:
            return error_response(request.id, exc.code, exc.message, exc.data)
        except Exception:
            log.exception("%s from %s failed", request.method, peer_id)
            return error_response(
                request.id, codes.INTERNAL_ERROR, f"internal error while serving {request.method}"
            )

    async def take_notification(
        self, notification: Notification, peer_id: str, grant: GrantT
    ) -> None:
        """Hand an admitted notification to the subclass (`_notify`); never answered."""
        await self._notify(notification, peer_id, grant)

    async def _dispatch(self, request: Request, grant: GrantT, outcome: Outcome) -> dict[str, Any]:
        """Run one method; return its result object or raise `RpcError` with the code to send."""
        raise RpcError(codes.METHOD_NOT_FOUND, f"method not found: {request.method}")

    async def _notify(self, notification: Notification, peer_id: str, grant: GrantT) -> None:
        """Take a notification; by default it is logged and dropped."""
        log.info("notification %s from %s dropped", notification.method, peer_id)

    async def _respond(
        self, stream: ByteStream, response: Response | ErrorResponse, outcome: Outcome
    ) -> None:
        """Write `response` within `read_timeout_s`; a peer that does not read is given up on."""
        body, outcome.error_code = encode_response(response, self.limits.max_message_bytes)
        outcome.answered = True
        with trio.move_on_after(self.limits.read_timeout_s) as scope:
            await write_frame(stream, body)
        if scope.cancelled_caught:
            log.info("response not written within %s s; stream dropped", self.limits.read_timeout_s)

    def record(self, peer_id: str, outcome: Outcome, elapsed_s: float) -> None:
        """Log what one request did and hand its `CallRecord` to `on_call` (errors logged)."""
        record = CallRecord(
            peer_id,
            outcome.method,
            outcome.tool,
            outcome.error_code,
            outcome.is_error,
            elapsed_s,
            outcome.note,
        )
        log.debug("served %s", record)
        if self._on_call is not None:
            try:
                self._on_call(record)
            except Exception:
                log.exception("on_call observer failed")


class RpcServer(StreamServer[GrantT]):
    """Serves `/gbr/mcp/1.0.0` streams from any number of peers with shared per-peer limits.

    `on_call`, when given, is called with a `CallRecord` after each answered
    stream (its exceptions are logged and ignored).
    """

    def __init__(
        self,
        host: ToolHost[GrantT],
        limits: Limits | None = None,
        *,
        on_call: Callable[[CallRecord], None] | None = None,
    ) -> None:
        super().__init__(host, limits, on_call=on_call)
        self.host = host

    async def _dispatch(self, request: Request, grant: GrantT, outcome: Outcome) -> dict[str, Any]:
        """Run one method; return its result object or raise `RpcError` with the code to send."""
        if request.method == "tools/list":
            parse_params(ListToolsParams, request.params)
            return _checked(ListToolsResult, {"tools": self.host.list_tools(grant)})
        if request.method == "tools/call":
            params = parse_params(CallToolParams, request.params)
            outcome.tool = params.name
            try:
                result = await self._call_tool(grant, params)
            except RpcError as exc:
                if isinstance(exc.__cause__, UnknownTool | InvalidArguments):
                    unknown = isinstance(exc.__cause__, UnknownTool)
                    outcome.note = "unknown tool" if unknown else "invalid arguments"
                raise
            outcome.is_error = result["isError"]
            held = result.get("structuredContent") or {}
            if str(held.get("status", "")).endswith("approval"):
                outcome.note = f"pending approval #{held.get('approval_id', '?')}"
            return result
        raise RpcError(codes.METHOD_NOT_FOUND, f"method not found: {request.method}")

    async def _call_tool(self, grant: GrantT, params: CallToolParams) -> dict[str, Any]:
        timeout = self.limits.call_timeout_s
        try:
            with trio.move_on_after(timeout):
                result = await self.host.call_tool(grant, params.name, dict(params.arguments))
                return _checked(CallToolResult, result)
        except (UnknownTool, InvalidArguments) as exc:
            raise RpcError(codes.INVALID_PARAMS, str(exc)) from exc
        except SecurityViolation as exc:
            data = None if exc.subject is None else {"subject": exc.subject}
            raise RpcError(codes.SECURITY_VIOLATION, exc.reason, data) from exc
        except CallTimeout as exc:
            raise RpcError(codes.CALL_TIMEOUT, str(exc)) from exc
        except ToolError as exc:
            failed = CallToolResult(content=[TextContent(text=str(exc))], isError=True)
            return failed.model_dump(exclude_none=True)
        raise RpcError(codes.CALL_TIMEOUT, f"tools/call {params.name} ran past {timeout} s")

    async def _notify(self, notification: Notification, peer_id: str, grant: GrantT) -> None:
        """Give a `notifications/*` notification to the host; log and drop anything else."""
        method = notification.method
        try:
            if not method.startswith("notifications/") or isinstance(notification.params, list):
                log.info("notification %s from %s dropped: not notifications/*", method, peer_id)
            else:
                with trio.move_on_after(self.limits.call_timeout_s):
                    await self.host.notify(grant, method, dict(notification.params or {}))
        except Exception:
            log.exception("notification %s from %s failed", method, peer_id)


def parse_params(model: type[ModelT], params: dict[str, Any] | list[Any] | None) -> ModelT:
    """Validate by-name params against an MCP params model; -32602 names each bad member."""
    if isinstance(params, list):
        raise RpcError(codes.INVALID_PARAMS, "params must be an object (by-name), not an array")
    try:
        return model.model_validate(params or {})
    except ValidationError as exc:
        raise RpcError(
            codes.INVALID_PARAMS, f"invalid params: {describe_validation_error(exc)}"
        ) from exc


def _checked(model: type[BaseModel], value: object) -> dict[str, Any]:
    """Validate what the host returned; a bad value is our fault: -32603, details in the log."""
    try:
        return model.model_validate(value).model_dump(mode="json", exclude_none=True)
    except ValidationError as exc:
        log.error("tool host returned an invalid %s: %s", model.__name__, exc)
        raise RpcError(
            codes.INTERNAL_ERROR, "internal error: the node built an invalid result"
        ) from exc


def encode_response(response: Response | ErrorResponse, max_bytes: int) -> tuple[bytes, int | None]:
    """Encode `response`; swap in -32603 if it cannot be encoded, TOO_LARGE if it is above
    `max_bytes` (bytes).

    Returns the body and the error code it carries (None for a result). Never raises.
    """
    try:
        body = encode_message(response)
    except LocalProtocolError:
        log.exception("response to request %r cannot be encoded", response.id)
        response = error_response(
            response.id, codes.INTERNAL_ERROR, "internal error: unencodable result"
        )
        body = encode_message(response)
    if len(body) > max_bytes:
        response = error_response(
            response.id,
            codes.TOO_LARGE,
            f"response of {len(body)} bytes exceeds the limit of {max_bytes} bytes",
            {"limit": max_bytes, "size": len(body)},
        )
        body = encode_message(response)
    return body, response.error.code if isinstance(response, ErrorResponse) else None
