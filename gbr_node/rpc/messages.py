"""JSON-RPC 2.0 messages and the MCP shapes of `/gbr/mcp/1.0.0`: a pure codec.

No I/O here (STYLE.md, "Pure cores"): `decode_message` takes the bytes of one
frame and gives a typed message or raises `RemoteProtocolError`;
`encode_message` gives the bytes of one frame body (compact UTF-8 JSON).

Rules and their sources:
- Envelopes follow JSON-RPC 2.0 (https://www.jsonrpc.org/specification):
  `"jsonrpc": "2.0"` is required; a request has an `id` (integer or string,
  never null here), a notification has none; a response has `result`, an
  error response has `error {code, message, data?}` and `id` (null when the
  request's id could not be read). Unknown envelope members are refused.
- Batches (a JSON array) are refused with -32600: the protocol carries one
  request per stream (protocols/gbr-mcp-1.0.0.md).
- `tools/list` and `tools/call` params and results follow MCP
  (https://modelcontextprotocol.io, "Tools"); unknown members inside them, such
  as MCP's `_meta`, are ignored.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    Tag,
    TypeAdapter,
    ValidationError,
    model_serializer,
)
from pydantic_core import PydanticSerializationError

from gbr_node.errors import LocalProtocolError, RemoteProtocolError
from gbr_node.rpc.codes import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR

RequestId = StrictInt | StrictStr
Params = dict[str, Any] | list[Any] | None


class _Envelope(BaseModel):
    """Base of the JSON-RPC envelopes and the error object: frozen, unknown members refused.

    Members named in `_omit_if_none` are left out of the JSON when None
    (JSON-RPC: `params` "MAY be omitted", `data` "MAY be omitted").
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    _omit_if_none: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_none(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in self._omit_if_none:
            if data.get(name) is None:
                data.pop(name, None)
        return data


class Request(_Envelope):
    """A call that expects a response: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`."""

    _omit_if_none = ("params",)
    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    method: StrictStr
    params: Params = None


class Notification(_Envelope):
    """A message without `id`; the receiver never answers it (JSON-RPC 2.0, 4.1)."""

    _omit_if_none = ("params",)
    jsonrpc: Literal["2.0"] = "2.0"
    method: StrictStr
    params: Params = None


class Response(_Envelope):
    """A successful answer; `result` is any JSON value (an object for every MCP method)."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    result: Any


class ErrorObject(_Envelope):
    """The `error` member: `code` (see gbr_node.rpc.codes), `message`, optional `data`."""

    _omit_if_none = ("data",)
    code: StrictInt
    message: StrictStr
    data: Any = None


class ErrorResponse(_Envelope):
    """A failed answer; `id` is null when the request's id could not be read."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId | None
    error: ErrorObject


def _kind(value: Any) -> str | None:
    if isinstance(value, dict):
        if "method" in value:
            return "request" if "id" in value else "notification"
        if "error" in value:
            return "error"
        if "result" in value:
            return "response"
        return None
    return _TAGS.get(type(value))


_TAGS: dict[type, str] = {
    Request: "request",
    Notification: "notification",
    Response: "response",
    ErrorResponse: "error",
}
Message = Request | Notification | Response | ErrorResponse
_MESSAGE = TypeAdapter(
    Annotated[
        Annotated[Request, Tag("request")]
        | Annotated[Notification, Tag("notification")]
        | Annotated[Response, Tag("response")]
        | Annotated[ErrorResponse, Tag("error")],
        Discriminator(
            _kind,
            custom_error_type="invalid_message",
            custom_error_message=(
                "not a JSON-RPC 2.0 message: needs 'method' (request or notification), "
                "'result' or 'error'"
            ),
        ),
    ]
)


# MCP shapes ("Tools": tools/list, tools/call).


class _Mcp(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ListToolsParams(_Mcp):
    """`tools/list` params (MCP). `cursor` is accepted and ignored: the list is never paged."""

    cursor: StrictStr | None = None


class ToolInfo(_Mcp):
    """One tool as `tools/list` reports it: `inputSchema` is a JSON Schema object."""

    name: Annotated[StrictStr, Field(min_length=1)]
    description: StrictStr = ""
    inputSchema: dict[str, Any]


class ListToolsResult(_Mcp):
    """`tools/list` result: `{"tools": [ToolInfo, ...]}`, only the tools granted to the caller."""

    tools: list[ToolInfo]


class CallToolParams(_Mcp):
    """`tools/call` params: `{"name": "read_file", "arguments": {...}}`; arguments may be absent."""

    name: Annotated[StrictStr, Field(min_length=1)]
    arguments: dict[str, Any] = {}


class TextContent(_Mcp):
    """A text content block: `{"type": "text", "text": "..."}` (the only block type used)."""

    type: Literal["text"] = "text"
    text: StrictStr


class CallToolResult(_Mcp):
    """`tools/call` result: `content` blocks and `isError` (true: the tool ran and failed),
    plus MCP's optional `structuredContent` (e.g. `{"status": "pending_approval", ...}`)."""

    content: list[TextContent]
    isError: StrictBool = False
    structuredContent: dict[str, Any] | None = None


def describe_validation_error(exc: ValidationError, *, limit: int = 5) -> str:
    """One readable line from a pydantic error: `"id: Input should be a valid integer or ..."`.

    Gives member locations and pydantic's plain-words messages, never input
    values or Python internals, so it is safe to send to a peer (STYLE.md,
    "Wire errors are data"). At most `limit` locations are listed.
    """
    problems: dict[str, list[str]] = {}
    for error in exc.errors(include_url=False, include_input=False):
        loc = [str(part) for part in error["loc"]]
        if loc and loc[0] in _TAGS.values():
            loc = loc[1:]
        where = ".".join(part for part in loc if not _is_union_label(part))
        messages = problems.setdefault(where, [])
        if error["msg"] not in messages:
            messages.append(error["msg"])
    parts = [
        f"{where}: {' or '.join(msgs)}" if where else " or ".join(msgs)
        for where, msgs in list(problems.items())[:limit]
    ]
    if len(problems) > limit:
        parts.append(f"and {len(problems) - limit} more")
    return "; ".join(parts)


def _is_union_label(part: str) -> bool:
    """pydantic names the member of a plain union in `loc` ("int", "dict[str,any]")."""
    return part in ("int", "str", "bool", "float", "none") or "[" in part


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def decode_message(data: bytes) -> Message:
    """Decode one frame body into a `Request`, `Notification`, `Response` or `ErrorResponse`.

    Args:
        data: the frame body, UTF-8 JSON (RFC 8259; NaN and Infinity refused).

    Raises:
        RemoteProtocolError: code -32700 (PARSE_ERROR) when the bytes are not
            UTF-8 or not JSON; code -32600 (INVALID_REQUEST) for a batch (JSON
            array), a non-object, a missing or wrong `jsonrpc`, or an object
            that is no JSON-RPC 2.0 message. Nothing else is raised.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(
            PARSE_ERROR, f"message is not valid UTF-8 (byte {exc.start})"
        ) from exc
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError as exc:
        raise RemoteProtocolError(PARSE_ERROR, "message is nested too deeply") from exc
    except ValueError as exc:
        raise RemoteProtocolError(PARSE_ERROR, f"message is not valid JSON: {exc}") from exc
    if isinstance(value, list):
        raise RemoteProtocolError(
            INVALID_REQUEST,
            "batch requests are not supported by /gbr/mcp/1.0.0: send one request per stream",
        )
    if not isinstance(value, dict):
        raise RemoteProtocolError(INVALID_REQUEST, "a JSON-RPC message must be a JSON object")
    if value.get("jsonrpc") != "2.0":
        raise RemoteProtocolError(INVALID_REQUEST, 'member "jsonrpc" must be exactly "2.0"')
    try:
        return _MESSAGE.validate_python(value)
    except ValidationError as exc:
        raise RemoteProtocolError(INVALID_REQUEST, describe_validation_error(exc)) from exc


def encode_message(msg: Message) -> bytes:
    """Encode a message as compact UTF-8 JSON (the body of one frame).

    Raises:
        LocalProtocolError: code -32603 (INTERNAL_ERROR) when a `result`,
            `params` or `data` value cannot be written as JSON (say, an object
            of a custom class, or nesting too deep).
    """
    try:
        return _MESSAGE.dump_json(msg)
    except (PydanticSerializationError, ValueError, RecursionError) as exc:
        raise LocalProtocolError(
            INTERNAL_ERROR, f"message cannot be encoded as JSON: {exc}"
        ) from exc


def error_response(
    request_id: RequestId | None, code: int, message: str, data: Any = None
) -> ErrorResponse:
    """Build an `ErrorResponse` for `request_id` (None when unknown)."""
    return ErrorResponse(id=request_id, error=ErrorObject(code=code, message=message, data=data))
