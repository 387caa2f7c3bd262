"""Typed messages between the agent's parts (DESIGN.md "Shape"): frozen dataclasses.

Inbox of the agent (from the REPL, the oracle, tool runners, the env watcher):
`UserPrompt`, `Interrupt`, `InterruptAndSuggest`, `OracleChunk`, `OracleDone`,
`OracleFailed`, `ToolExecutionFeedback`, `CheckDone`, `UpdateEnv`, `CompactContext`.

Every inference has its own `prompt_id` (ADR-0012b): chunks, completions and
tool feedback carry the id of the inference they belong to, so an answer that
arrives after the person moved on is recognised as stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gbr_node.checks.verdict import Verdict
from gbr_node.config.events import UpdateEnv
from gbr_node.llm.events import InvalidToolCall, ToolCall

__all__ = [
    "ApprovalResolved",
    "CheckDone",
    "CompactContext",
    "DirectPrompt",
    "Interrupt",
    "InterruptAndSuggest",
    "OracleChunk",
    "OracleDone",
    "OracleFailed",
    "ToolExecutionFeedback",
    "UpdateEnv",
    "UserPrompt",
]


REMOTE_SEPARATOR = "__"  # `ALIAS__TOOL`: a peer's or a mounted server's tool (MCP names)


@dataclass(frozen=True)
class UserPrompt:
    """A line the person typed that is not a slash command.

    `context` is what the node looked up for it before the first inference
    (the library lookup, STD-AI-01); the model gets it before `text`.
    """

    text: str
    context: str = ""

    @property
    def content(self) -> str:
        """The user message's content as the model gets it."""
        return f"{self.context}\n\n{self.text}" if self.context else self.text


@dataclass(frozen=True)
class Interrupt:
    """Ctrl-C: stop the current generation and wait (ADR-0010 without a suggestion)."""


@dataclass(frozen=True)
class InterruptAndSuggest:
    """`/s TEXT`: cut the stream, keep the partial answer, add TEXT, prompt again (ADR-0010)."""

    text: str


@dataclass(frozen=True)
class CompactContext:
    """`/compact`: leave every turn but the last out of the next requests (GBR-CTX-01)."""


@dataclass(frozen=True)
class ApprovalResolved:
    """A protected write this agent (or a peer on its behalf) asked for was decided.

    The call itself was answered "pending" long ago, so the outcome reaches the
    model as a new message (EVD-AI-01, EVD-DEV-02): `text` says what was
    written, edited or refused.
    """

    approval_id: int
    text: str


@dataclass(frozen=True)
class DirectPrompt:
    """Oracle work order: run one inference over `messages` with `tools` (ADR-0012b)."""

    prompt_id: int
    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class OracleChunk:
    """A piece of streamed answer: `kind` is "text" or "reasoning"."""

    prompt_id: int
    kind: str
    text: str


@dataclass(frozen=True)
class OracleDone:
    """The inference `prompt_id` ended normally.

    `text` is the whole answer text; `tool_calls` the calls in stream order,
    runnable ones and `InvalidToolCall`s (never run; the model is told why);
    `finish_reason` and `usage` as the server sent them.
    """

    prompt_id: int
    text: str
    tool_calls: tuple[ToolCall | InvalidToolCall, ...] = ()
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None


@dataclass(frozen=True)
class OracleFailed:
    """The inference `prompt_id` failed; `partial` is the text received before it did.

    `context_exceeded`: the server said the request did not fit its context
    window, whose size it stated as `context_limit` (tokens) if it did (GBR-CTX-01).
    """

    prompt_id: int
    error: str
    partial: str = ""
    context_exceeded: bool = False
    context_limit: int | None = None


@dataclass(frozen=True)
class ToolExecutionFeedback:
    """The outcome of one tool call, local or remote (ADR-0012b).

    `result` is the MCP result object (`{"content": [...], "isError": bool}`)
    or None when the call failed before producing one, in which case `error`
    says why (peer unreachable, refused, timed out, ...). `elapsed_s` in seconds.
    """

    prompt_id: int
    call_id: str
    tool: str
    result: dict[str, Any] | None = None
    error: str | None = None
    peer: str | None = None
    elapsed_s: float = 0.0

    @property
    def failed(self) -> bool:
        """True when the call produced no result (`error`) or an MCP error result."""
        return self.result is None or bool(self.result.get("isError"))

    def as_text(self) -> str:
        """The tool message content the model will see."""
        if self.result is None:
            return f"error: {self.error or 'the tool produced no result'}"
        parts = [c.get("text", "") for c in self.result.get("content", []) if isinstance(c, dict)]
        text = "\n".join(parts)
        return f"error: {text}" if self.result.get("isError") else text


@dataclass(frozen=True)
class CheckDone:
    """The write check the agent asked for after inference `prompt_id`'s tool calls
    ended (UNW-AI-01 / STD-DEV-01): one `Verdict` per check set, against the turn's
    baseline. Stale, like any feedback, when `prompt_id` is not the current one."""

    prompt_id: int
    verdicts: tuple[Verdict, ...]
