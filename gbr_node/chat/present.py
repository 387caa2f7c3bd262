"""How chat messages read on the terminal, pure: a peer's words shown as data, never as ours.

Every line of a peer's text is drawn behind a `│ ` gutter under a header that
names the peer's alias, its short peer ID and the thread, with control
characters made visible (`textcells.visible`): a line such as `/approve 3`
in a message is shown, indented, as what it is, someone else's text; it is
never typed input, so the REPL never parses it (issue 19).
"""

from __future__ import annotations

import json
import time

from gbr_node.chat.messages import ChatMessage
from gbr_node.chat.records import Outgoing, ThreadItem, ThreadSummary
from gbr_node.textcells import visible

GUTTER = "  │ "
PREVIEW_CHARS = 60


def short_peer(peer_id: str) -> str:
    """`12D3Ko…abcdef`: the first 6 and last 6 characters of a peer ID."""
    return f"{peer_id[:6]}…{peer_id[-6:]}" if len(peer_id) > 14 else peer_id


def short_thread(context_id: str) -> str:
    """The first 8 characters of a thread id, as shown (and accepted by `/thread`)."""
    return context_id[:8]


def _who(alias: str, role: str) -> str:
    return f"{alias}'s agent" if role == "agent" else alias


def body_lines(message: ChatMessage) -> list[str]:
    """The message's text and data parts, each line behind the gutter, made visible."""
    text = visible(message.text)
    lines = [f"{GUTTER}{line}" for line in text.split("\n")]
    for data in message.data:
        lines.append(f"{GUTTER}[data] {visible(json.dumps(data, ensure_ascii=False))}")
    return lines


def incoming_text(alias: str, peer_id: str, message: ChatMessage, *, note: str = "") -> str:
    """The lines shown when a message arrives: who, short peer ID, thread, then the text."""
    head = (
        f"✉ message from {_who(visible(alias), message.role)} ({short_peer(peer_id)}) · "
        f"thread {short_thread(message.context_id)}{note}"
    )
    return "\n".join([head, *body_lines(message)])


def queued_text(entry: Outgoing, *, note: str = "") -> str:
    """The line shown when a message of ours is queued."""
    preview = visible(entry.message.text).replace("\n", " ")
    if len(preview) > PREVIEW_CHARS:
        preview = preview[: PREVIEW_CHARS - 1] + "…"
    return (
        f"→ {entry.alias} · thread {short_thread(entry.message.context_id)} · "
        f"message {short_thread(entry.message.message_id)} queued: {preview}{note}"
    )


def change_text(entry: Outgoing, state: str, detail: str) -> str:
    """The line shown when a message of ours is delivered, refused, expired or retried."""
    what = f"→ {entry.alias} · message {short_thread(entry.message.message_id)}"
    if state == "delivered":
        return f"{what} delivered" + (" (it had arrived before)" if detail == "duplicate" else "")
    if state == "expired":
        return (
            f"{what} expired: not delivered within {_duration(entry.expires_at - entry.queued_at)}"
        )
    if state == "retrying":
        return f"{what} still queued, retrying: {visible(detail)}"
    return f"{what} {state}: {visible(detail)}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:g} min"
    return f"{seconds / 3600:g} h"


def _ago(at: float, now: float) -> str:
    seconds = max(0, int(now - at))
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


def inbox_text(threads: list[ThreadSummary], *, now: float | None = None) -> str:
    """`/inbox`, `gbr-node inbox`: one line per thread, the most recent last."""
    if not threads:
        return "no messages yet"
    now = time.time() if now is None else now
    lines = []
    for t in threads:
        preview = visible(t.last.text).replace("\n", " ")
        if len(preview) > PREVIEW_CHARS:
            preview = preview[: PREVIEW_CHARS - 1] + "…"
        arrow = "←" if t.last_incoming else "→"
        lines.append(
            f"  {visible(t.alias):<12} thread {short_thread(t.context_id)}  "
            f"{t.received} in, {t.sent} out · {_ago(t.last_at, now)}  {arrow} {preview}"
        )
    return "\n".join(lines)


def thread_text(items: list[ThreadItem]) -> str:
    """`/thread ALIAS`: every message of the thread, both ways, with our messages' states."""
    if not items:
        return "no messages in this thread"
    first = items[0]
    lines = [
        f"thread {short_thread(first.message.context_id)} with {visible(first.alias)} "
        f"({short_peer(first.peer_id)})"
    ]
    for item in items:
        stamp = time.strftime("%H:%M:%S", time.localtime(item.at))
        if item.incoming:
            lines.append(f"{stamp} ← {_who(visible(item.alias), item.message.role)}:")
        else:
            who = "our agent" if item.message.role == "agent" else "you"
            lines.append(f"{stamp} → {who} [{item.state}]:")
        lines.extend(body_lines(item.message))
    return "\n".join(lines)
