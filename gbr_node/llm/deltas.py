"""The delta assembler: chat-completions chunks in, events and a `Completion` out. Pure.

Source of the wire shapes: OpenAI chat-completions streaming
(`chat.completion.chunk`: `choices[0].delta.{content, tool_calls}`,
`finish_reason`, `usage`, the `data: [DONE]` sentinel), plus what the
compatible servers actually send (Gemini, Ollama, vLLM, llama.cpp,
LM Studio, OpenRouter, DeepSeek):

- a stream that ends with the whole answer as a `message` instead of a last
  `delta` (its text is not doubled: only what it adds to the streamed text
  counts, and its tool calls only when none was streamed);
- a usage-only chunk whose `choices` is empty or null; a chunk whose only
  choice has an index other than 0 (one per token, as Foundry Local sends);
- reasoning under `reasoning_content` or `reasoning` (one is taken per delta);
- tool-call fragments without `index`; every parallel call at index 0 with
  different ids; no ids (unique `call_<hex>` ids are generated); parallel
  calls sharing one id at their own indexes (DeepSeek, GLM) or at the same
  index (some engines behind OpenRouter), streamed or not (the later ones get
  generated ids, so that no two results answer one id); the id sent
  inside `function` instead of beside it; one id with the name and another
  with every later fragment of the same call; the name repeated or blanked in
  later fragments; whole arguments at once, or as a JSON object instead of a
  string; the complete arguments re-sent in the final chunk (not doubled);
  arguments first sent as an empty placeholder `{}` and then as the real
  object, whole or in pieces (the placeholder is dropped, not prefixed:
  `{}{"p": 1}` is never what the call gets); tool calls ending with
  finish_reason "stop";
- an error object (`{"error": {...}}`, Gemini's `[{"error": {...}}]`, vLLM's
  `{"object": "error", "message": ..., "code": ...}`, `{"type": "error",
  ...}`, an SSE `event: error`, or llama.cpp's `error:` field) in the middle
  of the stream: the partial text is kept, the result marked partial and its
  error is the server's message; a `finish_reason` of "error" (OpenRouter's
  mid-stream failures) ends the turn the same way, with or without an error
  object beside it.

A tool call is runnable only when the stream ended normally ([DONE] or a
finish_reason, and no error), the answer was not cut short (finish_reason
"length" or "content_filter": the arguments that arrived may parse and still
be a truncated call, such as the placeholder `{}` of a call cut after its
name), and its arguments parse strictly as a JSON object
(`events.parse_arguments`).

With `text_calls` (a request constrained by `llm.grammar`), a call arrives as
text: an answer whose first character is `<` is a `<tool_call>` block, held
back from the text events and turned into the call when the turn ends (one
that does not parse is an invalid call, never text shown as an answer).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gbr_node.llm.events import (
    Completion,
    Event,
    InvalidToolCall,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallStarted,
    parse_arguments,
)
from gbr_node.llm.grammar import parse_text_call

_ERROR_TEXT_LIMIT = 500
_CUT_SHORT = frozenset({"length", "content_filter"})
"""finish_reason values that say the answer was cut (OpenAI chat-completions): a tool
call then never runs, even when what arrived parses (vLLM then sent a placeholder
"{}" for a call cut after its name)."""


def _is_error_object(body: Mapping[str, Any]) -> bool:
    """vLLM's error chunk: `{"object": "error", "message": ..., "type": ..., "code": ...}`,
    or `{"type": "error", ...}` as Anthropic-style servers and proxies send it."""
    return body.get("object") == "error" or body.get("type") == "error"


def new_call_id() -> str:
    """A fresh tool-call id for servers that send none: `call_` + 24 hex digits."""
    return "call_" + secrets.token_hex(12)


def error_message(body: object) -> str | None:
    """The human message of an error body, or None when `body` holds no error.

    Shapes: OpenAI `{"error": {"message": ..., "code": ..., "type": ...}}`,
    `{"error": "text"}`, Gemini's list `[{"error": {...}}]`, vLLM's
    `{"object": "error", "message": ..., "code": ...}`, and
    `{"message": ...}` / `{"detail": ...}` as some proxies send.
    """
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, Mapping):
        return None
    error = body.get("error") or (body if _is_error_object(body) else None)
    if isinstance(error, str) and error:
        return error[:_ERROR_TEXT_LIMIT]
    if isinstance(error, Mapping):
        message = str(error.get("message") or "").strip() or json.dumps(error)
        code = error.get("code") or error.get("status") or error.get("type")
        text = f"{message} [{code}]" if code and str(code) not in message else message
        return text[:_ERROR_TEXT_LIMIT]
    for key in ("message", "detail"):
        value = body.get(key)
        if isinstance(value, str) and value:
            return value[:_ERROR_TEXT_LIMIT]
    return None


@dataclass(eq=False)
class _Slot:
    index: int | None
    id: str | None
    name: str = ""
    arguments: str = ""
    problem: str | None = None  # why it can never run, known before the end


class DeltaAssembler:
    """Accumulates one model turn; call `result()` when the stream is over.

    Feed it with `feed_data` (one SSE event's data text), `feed_chunk` (one
    parsed chunk) or `feed_message` (a whole non-streamed answer). Each
    returns the events that data produced. `ended` turns True after [DONE]
    or an error: the caller stops reading. `got_data` says whether anything
    but comments arrived (an empty stream is the caller's error to raise).

    `new_id` makes ids for calls that arrive without one (tests pass a
    deterministic one). `text_calls`: tool calls come as `<tool_call>` text
    (module docstring).
    """

    def __init__(
        self, new_id: Callable[[], str] = new_call_id, *, text_calls: bool = False
    ) -> None:
        self._new_id = new_id
        self._text_calls = text_calls
        self._held: list[str] | None = None  # the text of a call written as text
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._slots: list[_Slot] = []
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None
        self._error: str | None = None
        self._done = False
        self.got_data = False

    @property
    def ended(self) -> bool:
        """True once [DONE] or an error arrived: nothing after it counts."""
        return self._done or self._error is not None

    def feed_data(self, data: str, event: str = "message") -> list[Event]:
        """Feed the data of one SSE event (`event` is its SSE event type)."""
        self.got_data = True
        if self.ended:
            return []
        if data.strip() == "[DONE]":
            self._done = True
            return []
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = None
        if event == "error":  # its data is the error itself, or a body holding one
            if isinstance(chunk, Mapping) and "error" not in chunk:
                chunk = {"error": chunk}
            self._error = error_message(chunk) or data.strip()[:_ERROR_TEXT_LIMIT] or "error"
            return []
        if chunk is None:
            self._error = f"the model server sent data that is not JSON: {data[:200]!r}"
            return []
        return self.feed_chunk(chunk)

    def feed_chunk(self, chunk: object) -> list[Event]:
        """Feed one parsed `chat.completion.chunk` (or an error object in its place)."""
        self.got_data = True
        if self.ended:
            return []
        if isinstance(chunk, list) or (
            isinstance(chunk, Mapping) and (chunk.get("error") or _is_error_object(chunk))
        ):
            self._error = error_message(chunk) or f"the model server sent an error: {chunk!r:.200}"
            return []
        if not isinstance(chunk, Mapping):
            self._error = f"the model server sent a chunk that is not an object: {chunk!r:.200}"
            return []
        if isinstance(chunk.get("usage"), Mapping):
            self._usage = dict(chunk["usage"])
        events: list[Event] = []
        choices = chunk.get("choices") or ()
        for choice in choices:
            if not isinstance(choice, Mapping):
                continue
            # the first choice; a chunk's only choice is it whatever its index says
            if len(choices) == 1 or choice.get("index", 0) in (0, None):
                if choice.get("delta") or not isinstance(choice.get("message"), Mapping):
                    events += self._choice(choice.get("delta") or {})
                else:
                    events += self._choice(self._news_of(choice["message"]))
                if choice.get("finish_reason"):
                    self._finish_reason = str(choice["finish_reason"])
        if self._finish_reason == "error":
            self._error = "the model server stopped the answer with an error (finish_reason error)"
        return events

    def feed_message(self, body: object) -> list[Event]:
        """Feed a whole non-streamed `chat.completion` answer; it ends the turn."""
        events = self.feed_chunk(body)
        if not self.ended and not (isinstance(body, Mapping) and body.get("choices")):
            self._error = "the model server answered without any choices"
        self._done = True
        return events

    def result(self, *, stream_error: str | None = None) -> Completion:
        """The turn as it stands. `stream_error` says why reading stopped early, if it did.

        Without an error, a stream that saw neither [DONE] nor a finish_reason
        is reported as closed early. Never raises.
        """
        error = self._error or stream_error
        if error is None and not (self._done or self._finish_reason):
            error = "the connection closed before the model finished its answer"
        partial = error is not None
        if self._held is not None:
            self._slots.append(_text_call_slot("".join(self._held)))
            self._held = None
        calls: list[ToolCall] = []
        invalid: list[InvalidToolCall] = []
        given: set[str] = set()
        for slot in self._slots:
            # a call without an id, or with the id of one before it, gets a fresh one:
            # each tool result must answer exactly one call
            call_id = slot.id if slot.id and slot.id not in given else self._new_id()
            given.add(call_id)
            problem = "the answer ended before this tool call was complete" if partial else None
            problem = problem or slot.problem
            if problem is None and self._finish_reason in _CUT_SHORT:
                problem = (
                    f"the server cut the answer short (finish_reason {self._finish_reason}): "
                    "this tool call may be incomplete even where its arguments parse"
                )
            if problem is None and not slot.name:
                problem = "the tool call has no tool name"
            arguments: dict[str, Any] = {}
            if problem is None:
                try:
                    arguments = parse_arguments(slot.arguments)
                except ValueError as exc:
                    problem = str(exc)
            if problem is None:
                calls.append(
                    ToolCall(call_id, slot.name, arguments, slot.arguments.strip() or "{}")
                )
            else:
                invalid.append(InvalidToolCall(call_id, slot.name, slot.arguments, problem))
        text = "".join(self._text)
        message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
        if calls:
            message["tool_calls"] = [call.to_message() for call in calls]
        return Completion(
            message=message,
            text=text,
            reasoning="".join(self._reasoning),
            tool_calls=tuple(calls),
            invalid_tool_calls=tuple(invalid),
            finish_reason=self._finish_reason,
            usage=self._usage,
            partial=partial,
            error=error,
        )

    def _news_of(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """What a whole `message` (a non-streamed answer, or the snapshot of the whole
        answer some streams end with instead of a last delta) adds to what arrived:
        the end of its text and reasoning past what was streamed, and its tool calls
        when none was streamed (they restate the streamed ones otherwise)."""
        news = dict(message)
        for key, before in (("content", self._text), ("reasoning_content", self._reasoning),
                            ("reasoning", self._reasoning)):  # fmt: skip
            whole, so_far = message.get(key), "".join(before)
            if isinstance(whole, str) and so_far:
                news[key] = whole[len(so_far) :] if whole.startswith(so_far) else ""
        if self._slots:
            news.pop("tool_calls", None)
        return news

    def _choice(self, delta: object) -> list[Event]:
        if not isinstance(delta, Mapping):
            return []
        events: list[Event] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
            events.append(ReasoningDelta(reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            if self._held is not None:  # a call written as text (`text_calls`)
                self._held.append(content)
            elif self._text_calls and not self._text and content.startswith("<"):
                self._held = [content]
            else:
                self._text.append(content)
                events.append(TextDelta(content))
        for fragment in delta.get("tool_calls") or ():
            if isinstance(fragment, Mapping):
                events += self._fragment(fragment)
        return events

    def _fragment(self, fragment: Mapping[str, Any]) -> list[Event]:
        index = fragment.get("index") if isinstance(fragment.get("index"), int) else None
        raw = fragment.get("function")
        function: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        # The id beside `function`, or inside it as some servers send it; "" is no id.
        call_id = next(
            (v for v in (fragment.get("id"), function.get("id")) if isinstance(v, str) and v), None
        )
        name = function.get("name")
        name = name if isinstance(name, str) else ""
        arguments = function.get("arguments")
        if isinstance(arguments, Mapping):
            arguments = json.dumps(arguments, ensure_ascii=False)
        arguments = arguments if isinstance(arguments, str) else ""

        slot = self._route(index, call_id, name, arguments)
        events: list[Event] = []
        if name and not slot.name:
            slot.name = name
            events.append(ToolCallStarted(self._slots.index(slot), name))
        if arguments and not _same_object(slot.arguments, arguments):
            if _as_object(slot.arguments) == {} and arguments.lstrip().startswith("{"):
                slot.arguments = arguments  # "{}" was a placeholder for these
            else:
                slot.arguments += arguments
        return events

    def _route(self, index: int | None, call_id: str | None, name: str, arguments: str) -> _Slot:
        if call_id is not None:
            # The latest call with this id, unless their indexes differ: DeepSeek and
            # GLM give parallel calls one id (`result` makes the ids unique again).
            same = [
                slot
                for slot in self._slots
                if slot.id == call_id and (None in (index, slot.index) or slot.index == index)
            ]
            if same:
                if not _another_call(same[-1], name, arguments):
                    return same[-1]
                slot = _Slot(index, call_id)
                self._slots.append(slot)
                return slot
        if index is not None:
            same_index = [slot for slot in self._slots if slot.index == index]
            candidate = same_index[-1] if same_index else None
        else:
            candidate = self._slots[-1] if self._slots else None
        if candidate is not None and not _starts_new_call(candidate, call_id, name, arguments):
            if candidate.id is None:
                candidate.id = call_id  # the first id the call is given stays its id
            return candidate
        slot = _Slot(index, call_id)
        self._slots.append(slot)
        return slot


def _another_call(slot: _Slot, name: str, arguments: str) -> bool:
    """Whether a fragment with the id (and index) of `slot` is in fact another call, as
    some engines behind OpenRouter send parallel calls: it names another tool once
    this call's arguments are whole, or brings another whole object after arguments
    that were not the empty placeholder."""
    whole = _as_object(slot.arguments)
    if not (name and slot.name) or whole is None:
        return False
    if name != slot.name:
        return True
    return (
        bool(whole)
        and _as_object(arguments) is not None
        and not _same_object(slot.arguments, arguments)
    )


def _text_call_slot(text: str) -> _Slot:
    """The slot of a call written as text (`text_calls`); one that does not parse gets
    no name and the text as its arguments, so it is reported invalid."""
    slot = _Slot(None, None)
    parsed = parse_text_call(text)
    if parsed is None:
        slot.arguments = text
        slot.problem = "the tool call is not a <tool_call> block with a JSON object"
    else:
        slot.name, slot.arguments = parsed
    return slot


def _starts_new_call(slot: _Slot, call_id: str | None, name: str, arguments: str) -> bool:
    """Whether a fragment routed to `slot` is in fact another call."""
    if call_id is not None and slot.id is not None:
        # A different id (same ids were matched before) is another call, unless the
        # fragment names no tool while this call's arguments are still being written:
        # some servers send one id with the name and another with every later piece.
        return bool(name) or bool(_as_object(slot.arguments))
    if name and slot.name and name != slot.name:
        return True
    # Same name, no telling id: a second whole call after a complete one (an
    # empty "{}" so far is a placeholder, not a complete call).
    return bool(
        name
        and _as_object(slot.arguments)
        and _as_object(arguments) is not None
        and not _same_object(slot.arguments, arguments)
    )


def _same_object(accumulated: str, arguments: str) -> bool:
    """True when `arguments` re-sends the complete object already accumulated."""
    whole = _as_object(accumulated)
    return whole is not None and (arguments == accumulated or _as_object(arguments) == whole)


def _as_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if text.strip() else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
