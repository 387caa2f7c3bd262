"""The conversation history, pure: system message first, then the turns.

Each entry is a chat-completions message plus local-only metadata (`meta`:
interrupted, stale, ...). `request_messages()` gives what is sent to the
model, and it is always a valid conversation (DESIGN.md "Model side"): every
assistant tool call is answered by exactly one tool message before anything
else. Entries marked `stale=True` (late tool results of an interrupted turn,
ADR-0010) are kept for `/history` and the journal but never sent. Changes
are reported to an optional `on_change(op, payload)` callback so the journal
can persist them as they happen.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

INTERRUPTED_MARK = "[interrupted by the user]"
INTERRUPTED_NOTE = (
    f"An answer of yours that ends with {INTERRUPTED_MARK} was stopped by the person on "
    "purpose while you were writing it, and any tool call you had not finished was dropped. "
    "Do not repeat it or carry on from where it stopped; follow their next message, which "
    "usually corrects or redirects what you were doing."
)


@dataclass
class Entry:
    """One message of the history and its local metadata (never sent to the model)."""

    message: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)


OnChange = Callable[[str, dict[str, Any]], None]


class Session:
    """Conversation history with the profile's system prompt first.

    Args:
        system_prompt: the active profile's system prompt (UBQ-AI-02).
        on_change: called as `on_change(op, payload)` after each change, with
            op one of "append", "system", "clear" (the journal's record types).
    """

    def __init__(self, system_prompt: str, on_change: OnChange | None = None) -> None:
        self.entries: list[Entry] = [_system_entry(system_prompt)]
        self.on_change = on_change

    @property
    def system_prompt(self) -> str:
        """The current system prompt as the person wrote it (without our added note)."""
        return self.entries[0].meta["prompt"]

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
        self._changed("clear", {})

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
            else:
                raise ValueError(f"unknown journal op {op!r}")
        finally:
            self.on_change = callback

    def request_messages(self) -> list[dict[str, Any]]:
        """The messages to send, repaired into a valid conversation.

        An assistant tool call with no answer (for example after a crash
        between the call and its result) gets a synthetic tool message saying
        it was not executed; a tool message answering nothing is left out,
        and so is every entry marked `stale`.
        """
        out: list[dict[str, Any]] = []
        pending: list[str] = []
        for entry in self.entries:
            if entry.meta.get("stale"):
                continue
            msg = entry.message
            role = msg.get("role")
            if role == "tool":
                if msg.get("tool_call_id") in pending:
                    pending.remove(msg["tool_call_id"])
                    out.append(msg)
                continue
            out.extend(_not_executed(call_id) for call_id in pending)
            pending = [c["id"] for c in msg.get("tool_calls") or []] if role == "assistant" else []
            out.append(msg)
        out.extend(_not_executed(call_id) for call_id in pending)
        return copy.deepcopy(out)

    def _changed(self, op: str, payload: dict[str, Any]) -> None:
        if self.on_change is not None:
            self.on_change(op, payload)


def _system_entry(prompt: str) -> Entry:
    message = {"role": "system", "content": f"{prompt.rstrip()}\n\n{INTERRUPTED_NOTE}"}
    return Entry(message, {"prompt": prompt})


def _not_executed(call_id: str) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": "error: this tool call was not executed (the turn was interrupted)",
    }
