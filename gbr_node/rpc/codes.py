"""JSON-RPC 2.0 error codes of `/gbr/mcp/1.0.0` and the errors a caller sees for them.

Pure: no I/O. The standard codes come from the JSON-RPC 2.0 specification,
section 5.1; the application codes sit in its "server error" range
-32000..-32099 and are defined by `protocols/gbr-mcp-1.0.0.md`. Unknown tools
are -32602, as MCP specifies for `tools/call`.

A caller that receives an error response gets `error_from_wire(...)`: an
`RpcError` subclass chosen by the code, carrying `code`, `message`, `data`.
"""

from __future__ import annotations

from gbr_node.errors import CallTimeout, RpcError

# JSON-RPC 2.0, section 5.1.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Application codes (server error range -32000..-32099), protocols/gbr-mcp-1.0.0.md.
UNAUTHORIZED_PEER = -32001
SECURITY_VIOLATION = -32002
CALL_TIMEOUT = -32003
TOO_LARGE = -32004
BUSY = -32005
CHAT_REFUSED = -32006
"""`/gbr/chat/1.0.0`: a message refused by the receiver's policy or limits; `data.reason`
says which (protocols/gbr-chat-1.0.0.md)."""

CODE_NAMES: dict[int, str] = {
    PARSE_ERROR: "parse error",
    INVALID_REQUEST: "invalid request",
    METHOD_NOT_FOUND: "method not found",
    INVALID_PARAMS: "invalid params",
    INTERNAL_ERROR: "internal error",
    UNAUTHORIZED_PEER: "unauthorized peer",
    SECURITY_VIOLATION: "security violation",
    CALL_TIMEOUT: "call timeout",
    TOO_LARGE: "too large",
    BUSY: "busy",
    CHAT_REFUSED: "chat refused",
}


class RequestRejected(RpcError):
    """The peer could not parse our request (-32700) or found it invalid (-32600)."""


class MethodNotFound(RpcError):
    """The peer does not serve that method (-32601)."""


class InvalidParams(RpcError):
    """The peer refused the params: bad shape, unknown or non-granted tool (-32602)."""


class InternalError(RpcError):
    """The peer failed while serving the request (-32603); details stay in its log."""


class UnauthorizedPeer(RpcError):
    """The peer does not trust our peer ID; nothing ran there (UNAUTHORIZED_PEER)."""


class PeerSecurityViolation(RpcError):
    """The peer's sandbox refused the call (SECURITY_VIOLATION, UBQ-DEV-01)."""


class PeerCallTimeout(RpcError, CallTimeout):
    """A time limit of the peer ran out (CALL_TIMEOUT); also caught as `CallTimeout`."""


class MessageTooLarge(RpcError):
    """A message exceeded the peer's size limit (TOO_LARGE)."""


class PeerBusy(RpcError):
    """The peer is already running its limit of concurrent calls for us (BUSY); retry later."""


class ChatRefused(RpcError):
    """The peer refused our chat message (CHAT_REFUSED): `data["reason"]` is
    "policy", "too_fast" or "inbox_full" (protocols/gbr-chat-1.0.0.md)."""


_ERROR_CLASSES: dict[int, type[RpcError]] = {
    PARSE_ERROR: RequestRejected,
    INVALID_REQUEST: RequestRejected,
    METHOD_NOT_FOUND: MethodNotFound,
    INVALID_PARAMS: InvalidParams,
    INTERNAL_ERROR: InternalError,
    UNAUTHORIZED_PEER: UnauthorizedPeer,
    SECURITY_VIOLATION: PeerSecurityViolation,
    CALL_TIMEOUT: PeerCallTimeout,
    TOO_LARGE: MessageTooLarge,
    BUSY: PeerBusy,
    CHAT_REFUSED: ChatRefused,
}


def error_from_wire(code: int, message: str, data: object | None = None) -> RpcError:
    """Turn an error object received from a peer into the matching `RpcError` subclass.

    Codes this protocol does not define (other JSON-RPC implementations may
    send any integer) give a plain `RpcError`. Never raises.
    """
    return _ERROR_CLASSES.get(code, RpcError)(code, message, data)
