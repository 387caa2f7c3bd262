"""Fitting each request to the model's context window, pure (GBR-CTX-01).

`ContextManager.prepare` is called before every inference. It caps tool
results (`RESULT_SHARE` of the window each; the cut says how to read on),
sends shorter tool specs when the full ones take more than `TOOLS_SHARE` of
the window, estimates the request (`agent.tokens`, corrected by the sizes the
server reports) and, when it would not fit the window less the room kept for
the answer, compacts the session (`Session.compact`): large old tool results
become a short note first, then the oldest turns are left out, down to
`COMPACT_TO` of the budget so that the next turns fit without compacting
again; last, older tool results of the current turn are shortened. The
session's system message, the person's last request, a valid conversation
and the note of what must not be forgotten always stay (`agent.session`).

Turns are dropped, not summarised by the model: a summary costs an
inference with the very window that is full, and on the small local models
it is unreliable; the note keeps the person's own words instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gbr_node.agent.session import LIBRARY_NOTE, Session
from gbr_node.agent.tokens import request_tokens, text_tokens
from gbr_node.llm.window import DEFAULT_CONTEXT_TOKENS

RESERVE_SHARE = 0.25  # of the window kept free for the answer ...
RESERVE_MAX_TOKENS = 4096  # ... but never more than this
RESULT_SHARE = 0.25  # one tool result is sent cut to this share of the window
NOTE_SHARE = 0.08  # the compaction note's size
TOOLS_SHARE = 0.3  # tool specs above this share of the window are sent in their short form
COMPACT_TO = 0.6  # an automatic compaction aims at this share of the budget
OVERFLOW_TO = 0.45  # ... and one after the server said the request did not fit
SMALL_WINDOW_TOKENS = 8192  # at or under this, a model counts as small (agent.machine)
_SMALL_RESULT_TOKENS = 64  # tool results this small are not worth trimming
_RATIO_RANGE = (0.7, 2.0)  # bounds of the correction learned from the server


@dataclass(frozen=True)
class Window:
    """The model's context size in tokens and where it was learned (for `gbr-node model`)."""

    tokens: int
    source: str


DEFAULT_WINDOW = Window(DEFAULT_CONTEXT_TOKENS, "conservative default")


@dataclass(frozen=True)
class Prepared:
    """One request ready to send.

    `estimate` is its estimated prompt size in tokens (corrected), `raw` the
    uncorrected one (kept to learn from the server's count); `notice` is the
    line for the person when a compaction happened; `fits` is False when even
    the fullest compaction leaves it over the budget.
    """

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    estimate: int
    raw: int
    notice: str | None
    fits: bool


class ContextManager:
    """Keeps every request inside the model's window. `window` may be replaced any time."""

    def __init__(self, window: Window = DEFAULT_WINDOW) -> None:
        self.window = window
        self.ratio = 1.0  # server tokens per estimated token

    @property
    def budget(self) -> int:
        """Prompt tokens a request may take: the window less the room kept for the answer."""
        reserve = min(RESERVE_MAX_TOKENS, int(self.window.tokens * RESERVE_SHARE))
        return self.window.tokens - reserve

    def prepare(
        self, session: Session, tools: list[dict[str, Any]], mode: str = "auto"
    ) -> Prepared:
        """The next request over `session` offering `tools`, compacting first if needed.

        `mode`: "auto" compacts only when the request would not fit; "overflow"
        (after a server's context error) always compacts, to `OVERFLOW_TO` of the
        budget or half the estimate, whichever is less;
        "manual" (`/compact`) leaves out every turn but the last and every
        old tool result. Raises ValueError for another mode.
        """
        if mode not in ("auto", "overflow", "manual"):
            raise ValueError(f"unknown compaction mode {mode!r}")
        session.result_cap_tokens = int(self.window.tokens * RESULT_SHARE)
        session.note_cap_tokens = int(self.window.tokens * NOTE_SHARE)
        sent_tools = self.fit_tools(tools)
        before = self._estimate(session, sent_tools)
        notice = None
        if mode != "auto" or before > self.budget:
            share = {"auto": COMPACT_TO, "overflow": OVERFLOW_TO, "manual": 0.0}[mode]
            target = int(self.budget * share)
            if mode == "overflow":  # the estimate was wrong: at least halve the request
                target = min(target, before // 2)
            notice = self._compact(session, sent_tools, target, before)
        messages = _without_unoffered_notes(session.request_messages(), sent_tools)
        raw = request_tokens(messages, sent_tools)
        estimate = math.ceil(raw * self.ratio)
        return Prepared(
            tuple(messages), tuple(sent_tools), estimate, raw, notice, estimate <= self.budget
        )

    def observe(self, raw_estimate: int, prompt_tokens: object) -> None:
        """Learn from the server's count (`usage.prompt_tokens`) of a request estimated at
        `raw_estimate`; the correction stays within `_RATIO_RANGE`."""
        if isinstance(prompt_tokens, int) and prompt_tokens > 0 and raw_estimate > 0:
            low, high = _RATIO_RANGE
            self.ratio = min(high, max(low, prompt_tokens / raw_estimate))

    def server_overflow(self, limit: int | None) -> None:
        """The server said a request did not fit: count more per token and, when it named
        its window, believe it."""
        self.ratio = min(_RATIO_RANGE[1], self.ratio * 1.25)
        if limit and limit < self.window.tokens:
            self.window = Window(limit, "the model server's error answer")

    def fit_tools(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`tools` as sent: whole when they take at most `TOOLS_SHARE` of the window; else
        in their short form (first sentence, no parameter descriptions or titles), and
        with only as many as fit that share, in the order given (local tools first).
        The same for every model, the embedded one too (issue 32): a window of 8k
        tokens still gets every tool, the library's included (STD-AI-01)."""
        cap = int(self.window.tokens * TOOLS_SHARE)
        if _spec_tokens(tools) <= cap:
            return list(tools)
        return _prefix_within(list(map(short_spec, tools)), cap)

    # -- planning ------------------------------------------------------------

    def _estimate(self, session: Session, tools: list[dict[str, Any]]) -> int:
        return math.ceil(request_tokens(session.request_messages(), tools) * self.ratio)

    def _compact(
        self, session: Session, tools: list[dict[str, Any]], target: int, before: int
    ) -> str:
        """Compact `session` towards `target` tokens; the line for the person."""
        starts = session.turn_starts()
        last = starts[-1] if starts else len(session.entries)
        fixed = math.ceil(
            (request_tokens([session.entries[0].message], tools) + (session.note_cap_tokens or 0))
            * self.ratio
        )
        cut, trimmed = session.cut, set(session.trimmed)
        costs = {i: self._cost(session, i, False) for i in range(1, len(session.entries))}

        def total() -> int:
            return fixed + sum(
                self._cost(session, i, True) if i in trimmed else costs[i]
                for i in range(cut, len(session.entries))
            )

        def trim(indices: list[int]) -> None:
            for i in indices:
                if total() <= target:
                    return
                trimmed.add(i)

        old_results = [i for i in range(cut, last) if self._trimmable(session, i, trimmed)]
        trim(old_results)
        for start in starts:
            if total() <= target or start > last:
                break
            if start > cut:
                cut = start
        if target == 0:  # by hand: every old tool result too, the last turn as it is
            trimmed.update(i for i in range(1, last) if self._trimmable(session, i, trimmed))
        else:
            current = range(last, len(session.entries) - 1)
            trim([i for i in current if self._trimmable(session, i, trimmed)])
        trimmed = {i for i in trimmed if i >= cut}
        turns = sum(1 for s in starts if session.cut <= s < cut)
        shortened = len(trimmed - set(session.trimmed))
        full = round(100 * before / self.window.tokens)
        if cut == session.cut and not shortened:
            return f"context {full}% full: nothing left to compact"
        session.compact(cut, frozenset(trimmed))
        parts = [f"compacted {turns} old turn{'s' if turns != 1 else ''}"] if turns else []
        if shortened:
            parts.append(f"shortened {shortened} tool result{'s' if shortened != 1 else ''}")
        return f"context {full}% full: " + " and ".join(parts)

    def _cost(self, session: Session, index: int, trimmed: bool) -> int:
        entry = session.entries[index]
        if entry.meta.get("stale"):
            return 0
        message = session.sent_message(index, trimmed=trimmed)
        return math.ceil(request_tokens([message], []) * self.ratio)

    @staticmethod
    def _trimmable(session: Session, index: int, trimmed: set[int]) -> bool:
        entry = session.entries[index]
        content = entry.message.get("content")
        return (
            index not in trimmed
            and entry.message.get("role") == "tool"
            and isinstance(content, str)
            and text_tokens(content) > _SMALL_RESULT_TOKENS
        )


def _prefix_within(tools: list[dict[str, Any]], cap: int) -> list[dict[str, Any]]:
    """The first of `tools` whose specs together take at most `cap` tokens."""
    kept: list[dict[str, Any]] = []
    used = 0
    for tool in tools:
        cost = _spec_tokens([tool])
        if used + cost > cap:
            break
        kept.append(tool)
        used += cost
    return kept


def _without_unoffered_notes(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """`messages` with the system message's `LIBRARY_NOTE` left out when no library tool
    is offered: the model is not told about tools it cannot call (issue 32)."""
    names = {(tool.get("function") or {}).get("name") for tool in tools}
    if names & {"search_library", "read_library"} or not messages:
        return messages
    first = messages[0]
    content = first.get("content")
    if first.get("role") != "system" or not isinstance(content, str):
        return messages
    if LIBRARY_NOTE not in content:
        return messages
    trimmed = content.replace(f"\n\n{LIBRARY_NOTE}", "").replace(LIBRARY_NOTE, "")
    return [{**first, "content": trimmed}, *messages[1:]]


def short_spec(tool: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions tool entry in its short form: the description's first sentence,
    parameters without descriptions, titles or defaults (names, types and `required` stay)."""
    function = tool.get("function", {})
    description = (function.get("description") or "").strip()
    first = description.split(". ")[0].split("\n")[0].rstrip(".")
    return {
        "type": "function",
        "function": {
            "name": function.get("name"),
            "description": first[:120],
            "parameters": _bare_schema(function.get("parameters") or {}),
        },
    }


def only_arguments(tool: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """A chat-completions tool entry whose parameters keep only the properties `names`
    (and only those of them in `required`); the entry is copied, never changed."""
    function = dict(tool.get("function", {}))
    parameters = dict(function.get("parameters") or {})
    properties = parameters.get("properties") or {}
    parameters["properties"] = {k: v for k, v in properties.items() if k in names}
    if "required" in parameters:
        parameters["required"] = [k for k in parameters["required"] if k in names]
    function["parameters"] = parameters
    return {**tool, "function": function}


def _bare_schema(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                out[key] = {name: _bare_schema(sub) for name, sub in value.items()}
            elif key not in ("description", "title", "default", "examples"):
                out[key] = _bare_schema(value)
        return out
    if isinstance(schema, list):
        return [_bare_schema(item) for item in schema]
    return schema


def _spec_tokens(tools: list[dict[str, Any]]) -> int:
    return request_tokens([], tools)
