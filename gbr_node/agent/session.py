"""The conversation history, pure: system message first, then the turns.

Each entry is a chat-completions message plus local-only metadata (`meta`:
interrupted, stale, ...). `request_messages()` gives what is sent to the
model, and it is always a valid conversation (DESIGN.md "Model side"): every
assistant tool call is answered by exactly one tool message before anything
else. Entries marked `stale=True` (late tool results of an interrupted turn,
ADR-0010) are kept for `/history` and the journal but never sent. Changes
are reported to an optional `on_change(op, payload)` callback so the journal
can persist them as they happen.

Compaction (GBR-CTX-01) never deletes an entry: `/history`, the journal and
`--resume` keep everything. It changes only what is sent: entries before
`cut` (always the start of a turn, a user message) are left out, tool results
listed in `trimmed` are replaced by a short note, and every tool result is
cut to `result_cap_tokens`. When anything is left out, the system message
gets a note of what must not be forgotten: the person's earlier requests
(their standing instructions among them), the files changed this session and
the approvals still pending with their ids.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gbr_node.agent.tokens import cut_tool_result, text_tokens

INTERRUPTED_MARK = "[interrupted by the user]"
INTERRUPTED_NOTE = (
    f"An answer of yours that ends with {INTERRUPTED_MARK} was stopped by the person on "
    "purpose while you were writing it, and any tool call you had not finished was dropped. "
    "Do not repeat it or carry on from where it stopped; follow their next message, which "
    "usually corrects or redirects what you were doing."
)
LIBRARY_NOTE = (
    "When a question or a change depends on the API of an installed library (not on the "
    "project's own files), search_library and read_library read the version installed "
    "here, which beats what you remember. A message may begin with a [Library lookup ...] "
    "block that the node added from that source, and with the project's files."
)


@dataclass
class Entry:
    """One message of the history and its local metadata (never sent to the model)."""

    message: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)


OnChange = Callable[[str, dict[str, Any]], None]
REQUEST_NOTE_CHARS = 240  # of each earlier request quoted in the compaction note


class Session:
    """Conversation history with the profile's system prompt first.

    Args:
        system_prompt: the active profile's system prompt (UBQ-AI-02).
        on_change: called as `on_change(op, payload)` after each change, with
            op one of "append", "system", "clear", "compact" (the journal's
            record types).
    `result_cap_tokens` (tool results sent cut to it) and `note_cap_tokens`
    (size of the compaction note) are set by `agent.context`; None: no cap.
    """

    def __init__(self, system_prompt: str, on_change: OnChange | None = None) -> None:
        self.entries: list[Entry] = [_system_entry(system_prompt)]
        self.on_change = on_change
        self.cut = 1
        self.trimmed: frozenset[int] = frozenset()
        self.result_cap_tokens: int | None = None
        self.note_cap_tokens: int | None = None

    @property
    def system_prompt(self) -> str:
        """The current system prompt as the person wrote it (without our added note)."""
        return str(self.entries[0].meta["prompt"])

    def append(self, message: dict[str, Any], **meta: Any) -> None:
        """Add a message (and metadata such as `interrupted=True`) at the end."""
        self.entries.append(Entry(copy.deepcopy(message), dict(meta)))
        self._changed("append", {"message": message, "meta": meta})

    def replace_system(self, system_prompt: str) -> None:
        """Swap only the system message; every other message stays (ADR-0012a)."""
        self.entries[0] = _system_entry(system_prompt)
        self._changed("system", {"content": system_prompt})

    def clear(self) -> None:
        """Forget every message except the system message (`/clear`)."""
        del self.entries[1:]
        self.cut, self.trimmed = 1, frozenset()
        self._changed("clear", {})

    def compact(self, cut: int, trimmed: frozenset[int]) -> None:
        """Send entries from `cut` on only, with the tool results at `trimmed` shortened.

        `cut` must be 1 or the index of a turn's first message (`turn_starts`);
        raises ValueError otherwise. Nothing is deleted (GBR-CTX-01).
        """
        if cut != 1 and cut not in self.turn_starts():
            raise ValueError(f"compaction cut {cut} is not the start of a turn")
        self.cut, self.trimmed = cut, frozenset(trimmed)
        self._changed("compact", {"cut": cut, "trimmed": sorted(self.trimmed)})

    def turn_starts(self) -> list[int]:
        """Indices of the entries that begin a turn: the person's messages (not stale)."""
        return [
            i
            for i, entry in enumerate(self.entries)
            if i > 0 and entry.message.get("role") == "user" and not entry.meta.get("stale")
        ]

    def apply(self, op: str, payload: dict[str, Any]) -> None:
        """Replay one journal record without reporting it again (for `--resume`).

        Raises ValueError for an unknown op.
        """
        callback, self.on_change = self.on_change, None
        try:
            if op == "append":
                self.append(payload["message"], **payload.get("meta", {}))
            elif op == "system":
                self.replace_system(payload["content"])
            elif op == "clear":
                self.clear()
            elif op == "compact":
                self.compact(int(payload["cut"]), frozenset(payload.get("trimmed", ())))
            else:
                raise ValueError(f"unknown journal op {op!r}")
        finally:
            self.on_change = callback

    def request_messages(
        self, *, cut: int | None = None, trimmed: frozenset[int] | None = None
    ) -> list[dict[str, Any]]:
        """The messages to send, compacted and repaired into a valid conversation.

        `cut` and `trimmed` default to the session's own (others let
        `agent.context` try a compaction before making it). An assistant tool
        call with no answer (for example after a crash between the call and
        its result) gets a synthetic tool message saying it was not executed;
        a tool message answering nothing is left out, and so is every entry
        marked `stale`.
        """
        cut = self.cut if cut is None else cut
        trimmed = self.trimmed if trimmed is None else trimmed
        system = dict(self.entries[0].message)
        note = self._compaction_note(cut, trimmed)
        if note:
            system["content"] = f"{system['content']}\n\n{note}"
        out: list[dict[str, Any]] = [system]
        pending: list[str] = []
        for index in range(cut, len(self.entries)):
            entry = self.entries[index]
            if entry.meta.get("stale"):
                continue
            msg = entry.message
            role = msg.get("role")
            if role == "tool":
                if msg.get("tool_call_id") in pending:
                    pending.remove(msg["tool_call_id"])
                    out.append(self.sent_message(index, trimmed=index in trimmed))
                continue
            out.extend(_not_executed(call_id) for call_id in pending)
            pending = [c["id"] for c in msg.get("tool_calls") or []] if role == "assistant" else []
            out.append(msg)
        out.extend(_not_executed(call_id) for call_id in pending)
        return copy.deepcopy(out)

    def sent_message(self, index: int, *, trimmed: bool = False) -> dict[str, Any]:
        """Entry `index`'s message as sent: a tool result cut to `result_cap_tokens`, or
        (`trimmed`) replaced by a note saying it was left out (not a copy: do not change it)."""
        entry = self.entries[index]
        content = entry.message.get("content")
        if entry.message.get("role") != "tool" or not isinstance(content, str):
            return entry.message
        tool = entry.meta.get("tool") or "tool"
        if trimmed:
            content = (
                f"[old result of {tool} ({len(content)} characters) left out to fit the "
                "context window; call the tool again if you need it]"
            )
        elif self.result_cap_tokens is not None:
            content = cut_tool_result(content, self.result_cap_tokens, tool)
        return {**entry.message, "content": content}

    def _compaction_note(self, cut: int, trimmed: frozenset[int]) -> str:
        """What must not be forgotten once entries are left out (GBR-CTX-01); "" if none are."""
        if cut <= 1 and not trimmed:
            return ""
        left_out = [i for i in self.turn_starts() if i < cut]
        lines = [
            "[Context note: to fit the model's context window, "
            + (
                f"{len(left_out)} earlier turns of this session are left out of this request"
                if left_out
                else "some old tool results are shortened"
            )
            + "; the person still sees everything with /history.]"
        ]
        changed: dict[str, str] = {}
        pending: dict[int, str] = {}
        for entry in self.entries[1:]:
            meta = entry.meta
            if meta.get("changed"):
                changed.pop(meta["changed"], None)
                changed[meta["changed"]] = meta.get("tool", "")
            if meta.get("approval_id"):
                pending[meta["approval_id"]] = f"{meta.get('tool')} {meta.get('path')}"
            if meta.get("decided"):
                pending.pop(meta["decided"], None)
        if pending:
            items = ", ".join(f"#{n} {what}" for n, what in sorted(pending.items()))
            lines.append(f"Approvals still pending (not performed; do not retry them): {items}")
        if changed:
            lines.append("Files changed this session: " + ", ".join(list(changed)[-30:]))
        requests = [
            self.entries[i].meta.get("typed") or self.entries[i].message.get("content") or ""
            for i in left_out
        ]
        lines += self._quoted_requests(requests, sum(text_tokens(line) for line in lines))
        return "\n".join(lines)

    def _quoted_requests(self, requests: list[str], used_tokens: int) -> list[str]:
        """The person's left-out requests, the first and then the latest, within the cap."""
        if not requests:
            return []
        quoted = [_one_line(text) for text in requests]
        budget = (self.note_cap_tokens or 10**9) - used_tokens
        chosen: list[int] = []
        for index in [0, *range(len(quoted) - 1, 0, -1)]:
            cost = text_tokens(quoted[index]) + 2
            if cost > budget:
                break
            budget -= cost
            chosen.append(index)
        if not chosen:
            return []
        head = "The person's earlier requests (standing instructions among them), oldest first:"
        return [head, *(f"- {quoted[i]}" for i in sorted(chosen))]

    def _changed(self, op: str, payload: dict[str, Any]) -> None:
        if self.on_change is not None:
            self.on_change(op, payload)


def _system_entry(prompt: str) -> Entry:
    content = f"{prompt.rstrip()}\n\n{INTERRUPTED_NOTE}\n\n{LIBRARY_NOTE}"
    message = {"role": "system", "content": content}
    return Entry(message, {"prompt": prompt})


def _one_line(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= REQUEST_NOTE_CHARS else flat[: REQUEST_NOTE_CHARS - 1] + "…"


def _not_executed(call_id: str) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": "error: this tool call was not executed (the turn was interrupted)",
    }
