"""The shapes every tool shares: an MCP-shaped `ToolResult` and a `Tool` definition.

Kept apart from `registry.py` so the tool modules (`files`, `tree`, `search`,
`commands`) can import these without importing the registry that collects them.
`gbr_node.tools.registry` re-exports both names.
"""

from __future__ import annotations

import contextvars
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from gbr_node.checkpoints.plan import Owner
from gbr_node.sandbox import caller

# Who the call is for (GBR-PRIV-01): kept in the sandbox, the lowest layer that reads it.
# Approvals record it as the requester; a peer's write gets its check outcome in its
# result (UNW-AI-01).
CALLER = caller.CALLER

TURN: contextvars.ContextVar[str | None] = contextvars.ContextVar("gbr_turn", default=None)
"""The id of the local agent's turn the tool call being run belongs to, set by the
agent's runtime for each call it runs (None: not the agent's call). Checkpoints
of the call's changes are labelled with it (GBR-UNDO-01)."""


SEEN: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar(
    "gbr_seen", default=None
)
"""The paths the local agent read or wrote in its turn before the call being run (as
the model spelled them), set by the agent's runtime for each call it runs; None
for anyone else's call. `write_file` replaces an existing file only when the
agent read it (or wrote it) first in the turn, as Claude Code's Write tool
requires: a whole-file write of a file the model has not seen is how a small
model wiped `server.py` to one line (issue 32)."""


def change_owner() -> Owner:
    """Whom the change the running tool call makes is for (GBR-UNDO-01): the agent's
    turn (`TURN`; its calls share one group), or one group per call of a peer
    (`CALLER`, labelled with its alias) or of anyone else on this machine (a
    `gbr-node tool` command, an MCP client)."""
    peer, alias = CALLER.get()
    turn = TURN.get()
    if peer in (caller.CLI, caller.MCP):
        label = "command" if peer == caller.CLI else "MCP client"
        return Owner("call", label, f"call {secrets.token_hex(8)}")
    if peer != caller.LOCAL:
        return Owner("peer", alias or peer, f"peer {peer} {secrets.token_hex(8)}")
    if turn is not None:
        return Owner("turn", turn, f"turn {turn}")
    return Owner("call", "command", f"call {secrets.token_hex(8)}")


class Params(BaseModel):
    """Base of every tool's input model: frozen, and unknown arguments are an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call, shaped like an MCP `tools/call` result.

    `content` is a tuple of MCP content items, in practice one
    `{"type": "text", "text": ...}`. `is_error` marks a failure the model should
    see and react to (a missing file, a non-zero exit). `structured` carries
    machine-readable detail, e.g. `{"status": "approval_required", ...}`
    (EVD-AI-01).
    """

    content: tuple[dict[str, Any], ...]
    is_error: bool = False
    structured: dict[str, Any] | None = None

    @classmethod
    def text(
        cls, text: str, *, is_error: bool = False, structured: dict[str, Any] | None = None
    ) -> ToolResult:
        """A result holding one text item."""
        return cls(({"type": "text", "text": text},), is_error=is_error, structured=structured)

    def to_mcp(self) -> dict[str, Any]:
        """The MCP wire form: `{"content": [...], "isError": bool}` plus
        `"structuredContent"` when `structured` is set."""
        wire: dict[str, Any] = {
            "content": [dict(item) for item in self.content],
            "isError": self.is_error,
        }
        if self.structured is not None:
            wire["structuredContent"] = dict(self.structured)
        return wire


@dataclass(frozen=True)
class Tool:
    """One tool: `name`, a `description` written for a model, the pydantic
    model `params` that validates its arguments, and the `handler` that runs it.

    The handler is synchronous and may block; `Registry.run` runs it in a
    worker thread unless `quick`: work bounded to a few small syscalls (no
    fsync, no subprocess, no directory walk, no unbounded read), cheaper to
    run on the event loop than to hand to a thread (~0.1 ms of CPU a call;
    scripts/bench/rpc.py). It returns a `ToolResult` or raises `ToolError`,
    `ApprovalRequired` or `SecurityViolation`; `Registry.call` maps them.
    """

    name: str
    description: str
    params: type[BaseModel]
    handler: Callable[[Any], ToolResult]
    quick: bool = False

    def spec(self) -> dict[str, Any]:
        """The MCP `tools/list` item: `{"name", "description", "inputSchema"}`,
        where `inputSchema` is the JSON Schema of `params`."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.params.model_json_schema(),
        }
