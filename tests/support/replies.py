"""Scripted replies of the test model server: exact SSE chunks, errors, or well-formed answers.

`Answer` is the easy form (text and/or tool calls, rendered as an OpenAI
chat-completions stream or JSON body as the request asks); `SseReply`,
`ErrorReply` and `JsonReply` act out server quirks byte for byte.
`reply_from_json` reads the JSON script form used by scripts/model_server.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Delay:
    """Pause `seconds` before the next item of an `SseReply` (a client disconnect ends it early)."""

    seconds: float


@dataclass(frozen=True)
class Drop:
    """Close the connection abruptly at this point of an `SseReply` (no end of body)."""


SseItem = Mapping[str, Any] | bytes | str | Delay | Drop


@dataclass(frozen=True)
class Hangup:
    """Close the connection before any byte of the answer (as a server does with a
    keep-alive connection it had already dropped: the client sees no status line)."""


@dataclass(frozen=True)
class SseReply:
    """A `200 text/event-stream` answer, item by item.

    A mapping is sent as `data: <json>` + blank line; bytes and str are sent
    as they are (comments, odd framing, broken JSON). `done` appends
    `data: [DONE]`. `SseReply(())` with `done=False` is a stream with no event.
    """

    items: Sequence[SseItem]
    done: bool = True


@dataclass(frozen=True)
class ErrorReply:
    """An error status: `body` as JSON (mapping or list) or text, plus `headers`."""

    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JsonReply:
    """A `200 application/json` body, whatever the request asked for."""

    body: Any


@dataclass(frozen=True)
class Answer:
    """A well-formed answer, streamed or not as the request's `stream` says.

    `tool_calls` items: `{"name": str, "arguments": dict | str, "id": str}`
    (`id` optional). Streamed, the text is cut into `pieces` chunks and each
    call's arguments into two fragments, with `delay_s` seconds between chunks.
    `finish` is the `finish_reason` sent (None: "tool_calls" with calls, else "stop";
    "length" plays an answer cut at the token limit).
    """

    text: str = ""
    tool_calls: Sequence[Mapping[str, Any]] = ()
    reasoning: str = ""
    pieces: int = 3
    delay_s: float = 0.0
    finish: str | None = None

    def render(
        self, *, stream: bool, usage: bool, prompt_tokens: int | None = None
    ) -> SseReply | JsonReply:
        """This answer as the exact reply for a request with that `stream` flag;
        `prompt_tokens` is the usage reported (10 when None)."""
        calls = [
            {
                "id": call.get("id") or f"call_{n}",
                "type": "function",
                "function": {"name": call["name"], "arguments": _arguments_text(call)},
            }
            for n, call in enumerate(self.tool_calls)
        ]
        finish = self.finish or ("tool_calls" if calls else "stop")
        prompt = 10 if prompt_tokens is None else prompt_tokens
        counts = {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5}
        if not stream:
            message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
            if calls:
                message["tool_calls"] = calls
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return JsonReply({"object": "chat.completion", "choices": [choice], "usage": counts})
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"reasoning_content": part} for part in _split(self.reasoning, self.pieces)]
        deltas += [{"content": part} for part in _split(self.text, self.pieces)]
        for index, call in enumerate(calls):
            function = call["function"]
            assert isinstance(function, dict)
            head = {**call, "index": index, "function": {**function, "arguments": ""}}
            deltas.append({"tool_calls": [head]})
            for part in _split(function["arguments"], 2):
                deltas.append({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
        items: list[SseItem] = []
        for delta in deltas:
            items += [_chunk(delta), Delay(self.delay_s)] if self.delay_s else [_chunk(delta)]
        items.append(_chunk({}, finish))
        if usage:
            items.append({"object": "chat.completion.chunk", "choices": [], "usage": counts})
        return SseReply(items)


Reply = Answer | SseReply | ErrorReply | JsonReply | Hangup


def text_reply(
    text: str, *, pieces: int = 3, delay_s: float = 0.0, finish: str | None = None
) -> Answer:
    """Answer with `text`, streamed in `pieces` chunks `delay_s` seconds apart, ended by
    `finish_reason` `finish` (default "stop")."""
    return Answer(text=text, pieces=pieces, delay_s=delay_s, finish=finish)


def tool_call_reply(
    name: str, arguments: Mapping[str, Any] | str, *, call_id: str | None = None, text: str = ""
) -> Answer:
    """Answer with one call of tool `name` (and optional `text` before it)."""
    call: dict[str, Any] = {"name": name, "arguments": arguments}
    if call_id:
        call["id"] = call_id
    return Answer(text=text, tool_calls=[call])


def empty_stream() -> SseReply:
    """`200 text/event-stream` and then no event at all (llama-cpp-python's tools quirk)."""
    return SseReply((), done=False)


def reply_from_json(spec: Mapping[str, Any]) -> Reply:
    """A reply from its JSON script form (used by scripts/model_server.py).

    Forms: `{"text": ..., "pieces": 3, "delay_s": 0, "reasoning": ...,
    "tool_calls": [...], "finish": "length"}`; `{"status": 429, "body": ..., "headers": {...}}`;
    `{"json": {...}}`; `{"empty_stream": true}`; `{"sse": [item, ...],
    "done": true}` with items `{"data": {...}}`, `{"raw": "text"}`,
    `{"sleep": seconds}` or `{"drop": true}`. Raises ValueError otherwise.
    """
    if "status" in spec:
        return ErrorReply(int(spec["status"]), spec.get("body"), dict(spec.get("headers") or {}))
    if "json" in spec:
        return JsonReply(spec["json"])
    if spec.get("empty_stream"):
        return empty_stream()
    if "sse" in spec:
        return SseReply([_item_from_json(item) for item in spec["sse"]], bool(spec.get("done", 1)))
    if "text" in spec or "tool_calls" in spec:
        keys = ("text", "tool_calls", "reasoning", "pieces", "delay_s", "finish")
        return Answer(**{key: spec[key] for key in keys if key in spec})
    raise ValueError(f"not a reply: {spec!r}")


def sse_bytes(item: SseItem) -> bytes:
    """The bytes one non-pause `SseReply` item puts on the wire."""
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode()
    return b"data: " + json.dumps(item).encode() + b"\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "choices": [choice]}


def _split(text: str, pieces: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _arguments_text(call: Mapping[str, Any]) -> str:
    arguments = call.get("arguments", {})
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _item_from_json(item: Mapping[str, Any]) -> SseItem:
    if "data" in item:
        return item["data"]
    if "raw" in item:
        return str(item["raw"])
    if "sleep" in item:
        return Delay(float(item["sleep"]))
    if item.get("drop"):
        return Drop()
    raise ValueError(f"not an SSE item: {item!r}")
