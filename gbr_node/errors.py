"""The error tree of gbr-node: every error we raise derives from `GbrError`.

The tree says who is at fault (STYLE.md, "Errors say who is at fault"):

    GbrError
    ├── ProfileError        a profile file is unreadable, not TOML, or invalid (UBQ-AI-02)
    ├── SecurityViolation   a path, command or argument would leave the sandbox
    │                       (UBQ-DEV-01, UNW-DEV-01)
    ├── ApprovalRequired    a write touches a protected file (EVD-AI-01); not a
    │                       failure, the caller turns it into a "pending" outcome
    ├── UnknownTool         no such tool, or not enabled or granted
    ├── InvalidArguments    tool arguments failed validation (-32602)
    ├── ToolError           a tool ran into a user-visible problem (file missing,
    │   │                   no match for an edit, command failed to start, ...)
    │   └── NotConfined     a command was not run: the OS sandbox could not be
    │                       applied to it (GBR-CONF-01)
    ├── RpcError            JSON-RPC 2.0 errors; subclasses below say whose fault
    │   ├── LocalProtocolError   we would send something invalid
    │   └── RemoteProtocolError  the peer sent something invalid
    ├── PeerUnreachable     dial failed: refused, timeout, Noise failure, wrong peer ID
    │   └── StreamBroken    the stream ended or was reset mid-exchange
    │       └── StreamEnded the peer ended a kept stream cleanly with our request
    │                       unread: nothing ran (`/gbr/mcp/1.1.0`), send it again
    ├── CallTimeout         a remote call or a command ran past its time limit
    ├── ModelError          the model server answered with an error or broke the stream
    └── LibraryError        a `[library]` environment or the library index cannot be read

Foreign exceptions (OSError, httpx, libp2p) are translated at the boundary with
`raise ... from exc`, so callers only ever catch `GbrError` subclasses.
"""

from __future__ import annotations

from typing import Any


class GbrError(Exception):
    """Root of every error gbr-node raises on purpose."""


class ProfileError(GbrError):
    """A profile could not be loaded (UBQ-AI-02).

    Attributes:
        file: path of the profile file, or None when not file-bound.
        line, column: 1-based position when TOML reported one, else None.
        key: dotted key that was wrong (``tools.run_command.allow``), or None.
        message: what was expected, in plain words.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        key: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.key = key
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file or "<profile>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        key = f" [{self.key}]" if self.key else ""
        return f"{where}{key}: {self.message}"


class SecurityViolation(GbrError):
    """A request would act outside what the sandbox allows.

    Raised before any filesystem or process call is made on the offending
    input (UNW-DEV-01). `reason` is a short sentence fit for a model or a
    peer; `subject` is the offending path or argument as given.
    """

    def __init__(self, reason: str, subject: str | None = None) -> None:
        self.reason = reason
        self.subject = subject
        super().__init__(f"{reason}: {subject!r}" if subject is not None else reason)


class ApprovalRequired(GbrError):
    """A write, edit, move or delete touches a protected path (EVD-AI-01).

    Not a failure: the tool layer turns it into an "approval required"
    outcome. Attributes: `tool` (tool name), `path` (root-relative POSIX
    path of the protected file), `absolute` (absolute path), `content`
    (proposed new content as text, or None for moves and deletes).
    """

    def __init__(
        self,
        tool: str,
        path: str,
        absolute: str,
        content: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        self.tool = tool
        self.path = path
        self.absolute = absolute
        self.content = content
        self.detail = detail or {}
        super().__init__(f"{tool} on protected path {path!r} needs the operator's approval")


class ToolError(GbrError):
    """A tool could not do what was asked; the message is shown to the model."""


class NotConfined(ToolError):
    """A command was not run because it could not be confined (GBR-CONF-01): the OS
    sandbox failed for it, or the profile requires one the OS does not offer."""


class RpcError(GbrError):
    """A JSON-RPC 2.0 error (code, message, optional data), as on the wire."""

    def __init__(self, code: int, message: str, data: object | None = None) -> None:
        self.code = code
        self.message = message
        self.data = data
        super().__init__(f"JSON-RPC error {code}: {message}")


class LocalProtocolError(RpcError):
    """We were about to send something the protocol does not allow."""


class RemoteProtocolError(RpcError):
    """The peer sent bytes or JSON the protocol does not allow."""


class PeerUnreachable(GbrError):
    """A peer could not be reached: refused, timed out, Noise failed or wrong peer ID."""


class StreamBroken(PeerUnreachable):
    """A stream ended, was reset, or its connection dropped before a whole
    message was exchanged: the peer went away mid-call."""


class StreamEnded(StreamBroken):
    """The peer ended a `/gbr/mcp/1.1.0` stream cleanly (end of stream, not a reset)
    before answering a request and without refusing the stream: by the protocol it
    ran nothing of it (protocols/gbr-mcp-1.1.0.md, section 2), so the request may be
    sent again on a new stream."""


class CallTimeout(GbrError):
    """An operation ran past its time limit (seconds given in the message)."""


class ModelError(GbrError):
    """The model server failed: HTTP error, broken stream, or unusable answer.

    Attributes: `status` (HTTP status or None), `retryable` (bool),
    `context_exceeded` (the server said the request did not fit its context
    window, GBR-CTX-01) and `context_limit` (the window size it stated, tokens).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        context_exceeded: bool = False,
        context_limit: int | None = None,
    ):
        self.status = status
        self.retryable = retryable
        self.context_exceeded = context_exceeded
        self.context_limit = context_limit
        super().__init__(message)


class UnknownTool(GbrError):
    """No tool of that name exists, or it is not enabled or not granted to the caller."""


class InvalidArguments(GbrError):
    """A tool's arguments failed validation; the message names each bad field.

    Maps to JSON-RPC -32602 Invalid params on the wire.
    """


class LibraryError(GbrError):
    """A `[library]` environment cannot be read, or the library index is unusable (issue 18)."""
