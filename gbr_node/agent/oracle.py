"""The oracle: runs one inference per `DirectPrompt` and reports back by prompt id.

It turns the model client's events into agent messages (ADR-0012b): text and
reasoning pieces become `OracleChunk`s, the end becomes `OracleDone`, and any
failure `OracleFailed` with the partial text. Cancelling the task (the
agent's cancel scope, on `/s` or Ctrl-C) closes the HTTP stream at once and
sends nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import trio

from gbr_node.agent.messages import DirectPrompt, OracleChunk, OracleDone, OracleFailed
from gbr_node.errors import ModelError
from gbr_node.llm.events import (
    Completion,
    Event,
    InvalidToolCall,
    ReasoningDelta,
    TextDelta,
    ToolCall,
)


class ChatModel(Protocol):
    """What the oracle needs of a model client (`llm.client.ModelClient`):
    `stream_chat(...)` returns an async context manager that gives an async
    iterable of `llm.events` events ending with one `Completion`."""

    def stream_chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> AbstractAsyncContextManager[AsyncIterable[Event]]: ...


async def run_inference(
    model: Callable[[], ChatModel], prompt: DirectPrompt, send: trio.MemorySendChannel[object]
) -> None:
    """Stream one inference and send its chunks and end to `send`.

    Args:
        model: returns the current client (settings may change on hot reload;
            an inference keeps the client it started with).
        prompt: the work order; its `prompt_id` tags every message sent.
        send: the agent's inbox.
    Never raises except trio.Cancelled.
    """
    pid = prompt.prompt_id
    text: list[str] = []
    try:
        chat = model().stream_chat(list(prompt.messages), list(prompt.tools) or None)
        async with chat as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    text.append(event.text)
                    await send.send(OracleChunk(pid, "text", event.text))
                elif isinstance(event, ReasoningDelta):
                    await send.send(OracleChunk(pid, "reasoning", event.text))
                elif isinstance(event, Completion):
                    await send.send(_finished(pid, event))
                    return
        await send.send(
            OracleFailed(pid, "the model stream ended without an answer", "".join(text))
        )
    except ModelError as exc:
        failed = OracleFailed(pid, str(exc), "".join(text), exc.context_exceeded, exc.context_limit)
        await send.send(failed)


def _finished(pid: int, done: Completion) -> OracleDone | OracleFailed:
    if done.partial:
        return OracleFailed(pid, done.error or "the answer was cut short", done.text)
    calls: tuple[ToolCall | InvalidToolCall, ...] = (*done.tool_calls, *done.invalid_tool_calls)
    return OracleDone(pid, done.text, calls, done.finish_reason, done.usage)
