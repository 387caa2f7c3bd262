"""What the model client yields: stream events and the final `Completion`. Pure.

A model turn is a sequence of zero or more `TextDelta`, `ReasoningDelta`,
`ToolCallStarted` and `KeepAlive` events, then exactly one `Completion`
(unless the request failed before the stream started, which raises
`ModelError`, or the iteration was cancelled).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TextDelta:
    """A piece of the answer text, in order."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of reasoning (`reasoning_content` or `reasoning`), kept apart from the answer."""

    text: str


@dataclass(frozen=True)
class ToolCallStarted:
    """The model began tool call number `position` (0-based, in stream order) named `name`.

    Only a progress hint for display: the call may still turn out invalid.
    """

    position: int
    name: str


@dataclass(frozen=True)
class KeepAlive:
    """The server sent an SSE comment (`: ...`): it is alive but has nothing to say yet."""


@dataclass(frozen=True)
class ToolCall:
    """A runnable tool call: its arguments parsed strictly as a JSON object.

    `raw_arguments` is the JSON text the model sent ("{}" when it sent none).
    """

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str

    def to_message(self) -> dict[str, Any]:
        """The call as an entry of an assistant message's `tool_calls` (OpenAI chat-completions)."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.raw_arguments},
        }


@dataclass(frozen=True)
class InvalidToolCall:
    """A tool call that must never run: `reason` says why, `raw_arguments` is what arrived.

    Causes: arguments that are not a strict JSON object, a missing tool name,
    or a stream that did not end normally (a half-written call).
    """

    id: str
    name: str
    raw_arguments: str
    reason: str


@dataclass(frozen=True)
class Completion:
    """The end of one model turn.

    - `message`: the assistant message ready to append to the history:
      `{"role": "assistant", "content": str | None, "tool_calls": [...]}`,
      `tool_calls` present only when there are runnable calls (each with
      its `raw_arguments`, so the next request stays a valid conversation);
      invalid calls are left out; `content` is None only when there are calls
      and no text.
    - `text` / `reasoning`: the whole answer and reasoning text.
    - `tool_calls`: runnable calls, in stream order; empty when `partial`.
    - `invalid_tool_calls`: calls that must not run (see `InvalidToolCall`).
    - `finish_reason`: as the server sent it ("stop", "tool_calls", "length",
      ...), or None when it sent none. Tool calls that end with "stop" still run;
      those of an answer cut short ("length", "content_filter") never do.
    - `usage`: the server's usage object (token counts), or None.
    - `partial`: True when the turn did not end normally (error event, closed
      connection, idle timeout, interruption); the text is what arrived.
    - `error`: why it did not end normally, or None.
    """

    message: dict[str, Any]
    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    invalid_tool_calls: tuple[InvalidToolCall, ...] = ()
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    partial: bool = False
    error: str | None = None


Event = TextDelta | ReasoningDelta | ToolCallStarted | KeepAlive | Completion


def parse_arguments(raw: str) -> dict[str, Any]:
    """Parse tool-call arguments strictly: a JSON object or nothing.

    Blank text means no arguments (`{}`; some servers send "" for tools
    without parameters). Raises ValueError (message fit for the model) when
    the text is not JSON, is not an object, repeats a key, or uses NaN or
    Infinity (RFC 8259 has none of them).
    """
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, not {type(value).__name__}")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"arguments repeat the key {key!r}")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"arguments use {name}, which JSON does not allow")
