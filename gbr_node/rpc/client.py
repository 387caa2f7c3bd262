"""The calling side of `/gbr/mcp/1.0.0`: write one request on a fresh stream, read its response.

The caller opens the stream (in `p2p/`), passes it here and closes it after:
one request per stream (protocols/gbr-mcp-1.0.0.md). After any exception the
stream is in an unknown state and must only be closed.

Errors a call can raise, by whose fault (errors.py):
- `RpcError` subclasses from `gbr_node.rpc.codes` (`UnauthorizedPeer`,
  `InvalidParams`, `PeerBusy`, `PeerCallTimeout`, ...): the peer answered with
  a JSON-RPC error;
- `RemoteProtocolError`: the peer's answer broke the protocol;
- `LocalProtocolError`: our own request could not be sent as asked;
- `StreamBroken` (a `PeerUnreachable`): the stream ended or was reset before
  the answer arrived (peer gone, process killed mid-call); the stream
  adapter's own `GbrError` for a broken stream passes through unchanged;
- `CallTimeout`: no answer within `timeout_s`.
"""

from __future__ import annotations

import itertools
from typing import Any, TypeVar

import trio
from pydantic import BaseModel, ValidationError

from gbr_node.errors import CallTimeout, LocalProtocolError, RemoteProtocolError, StreamBroken
from gbr_node.rpc.codes import INVALID_REQUEST, TOO_LARGE, error_from_wire
from gbr_node.rpc.framing import FrameDecoder
from gbr_node.rpc.messages import (
    CallToolResult,
    ErrorResponse,
    ListToolsResult,
    Message,
    Notification,
    Request,
    Response,
    ToolInfo,
    decode_message,
    describe_validation_error,
    encode_message,
)
from gbr_node.rpc.stream import ByteStream, read_frame, write_frame

_request_ids = itertools.count(1)
ModelT = TypeVar("ModelT", bound=BaseModel)


async def call(
    stream: ByteStream,
    method: str,
    params: dict[str, Any] | None,
    *,
    timeout_s: float,
    max_message_bytes: int,
) -> dict[str, Any]:
    """Send one request and return its `result` object.

    Args:
        stream: a stream to the peer with no request outstanding (a fresh one, or a
            `/gbr/chat/stream/1.0.0` one whose last answer was read); not closed here.
        method: JSON-RPC method, e.g. "tools/call".
        params: by-name params, or None to omit them.
        timeout_s: seconds for writing the request and reading the response.
        max_message_bytes: cap on the request and on the response body (bytes).

    Raises:
        See the module docstring. `LocalProtocolError` (TOO_LARGE) also means
        the request was not sent.
    """
    request = Request(id=next(_request_ids), method=method, params=params)
    body = encode_message(request)
    if len(body) > max_message_bytes:
        raise LocalProtocolError(
            TOO_LARGE, f"{method} request of {len(body)} bytes exceeds {max_message_bytes} bytes"
        )
    with trio.move_on_after(timeout_s):
        await write_frame(stream, body)
        try:
            frame = await read_frame(stream, FrameDecoder(max_message_bytes), timeout_s)
        except StreamBroken as exc:
            raise StreamBroken(f"{method}: the peer closed the stream without answering") from exc
        return _result_of(decode_message(frame), request)
    raise CallTimeout(f"{method}: no response within {timeout_s} s")


async def notify(
    stream: ByteStream, method: str, params: dict[str, Any] | None, *, timeout_s: float
) -> None:
    """Send one notification (no response comes back); `stream` is not closed here.

    Raises:
        LocalProtocolError: `method` does not start with "notifications/" (the
            only notifications the protocol defines; others would be dropped).
        StreamBroken: the stream was reset or closed.
        CallTimeout: the frame could not be written within `timeout_s` seconds.
    """
    if not method.startswith("notifications/"):
        raise LocalProtocolError(
            INVALID_REQUEST, f"notification method must start with 'notifications/': {method!r}"
        )
    body = encode_message(Notification(method=method, params=params))
    with trio.move_on_after(timeout_s):
        await write_frame(stream, body)
        return
    raise CallTimeout(f"{method}: notification not sent within {timeout_s} s")


async def list_tools(
    stream: ByteStream, *, timeout_s: float, max_message_bytes: int
) -> list[ToolInfo]:
    """`tools/list`: the tools this peer grants us. Raises like `call`."""
    result = await call(
        stream, "tools/list", None, timeout_s=timeout_s, max_message_bytes=max_message_bytes
    )
    return shaped(ListToolsResult, result, "tools/list").tools


async def call_tool(
    stream: ByteStream,
    name: str,
    arguments: dict[str, Any],
    *,
    timeout_s: float,
    max_message_bytes: int,
) -> CallToolResult:
    """`tools/call`: run tool `name` there. A result with `isError` true is returned, not raised.

    Raises like `call`; an unknown or non-granted tool is `InvalidParams` (-32602).
    """
    params = {"name": name, "arguments": arguments}
    result = await call(
        stream, "tools/call", params, timeout_s=timeout_s, max_message_bytes=max_message_bytes
    )
    return shaped(CallToolResult, result, "tools/call")


def _result_of(message: Message, request: Request) -> dict[str, Any]:
    """Check that `message` answers `request`; return its result or raise the error it carries."""
    if not isinstance(message, Response | ErrorResponse):
        raise RemoteProtocolError(INVALID_REQUEST, "expected a response, got a request")
    # One request per stream: an error response with a null id answers ours too.
    if message.id != request.id and not (isinstance(message, ErrorResponse) and message.id is None):
        raise RemoteProtocolError(
            INVALID_REQUEST, f"response id {message.id!r} does not match request id {request.id!r}"
        )
    if isinstance(message, ErrorResponse):
        raise error_from_wire(message.error.code, message.error.message, message.error.data)
    if not isinstance(message.result, dict):
        raise RemoteProtocolError(INVALID_REQUEST, f"{request.method} result is not an object")
    return message.result


def shaped(model: type[ModelT], result: dict[str, Any], method: str) -> ModelT:
    """`result` validated as `model` (an MCP result shape); `RemoteProtocolError` (-32600)
    names what is wrong."""
    try:
        return model.model_validate(result)
    except ValidationError as exc:
        raise RemoteProtocolError(
            INVALID_REQUEST, f"{method} result: {describe_validation_error(exc)}"
        ) from exc
