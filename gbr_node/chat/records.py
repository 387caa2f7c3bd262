"""What the chat store gives back, pure: outbox rows, thread items, thread summaries.

Plain frozen values, apart from `store.py` (which reads and writes them in
SQLite) so that the terminal's presentation (`present.py`) needs no I/O module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gbr_node.chat.messages import ChatMessage

State = Literal["queued", "delivered", "refused", "expired"]
"""Where an outgoing message stands (protocols/gbr-chat-1.0.0.md, section 3)."""


@dataclass(frozen=True)
class Outgoing:
    """One outbox row: a message to `peer_id` (`alias` when queued) and where it stands."""

    message: ChatMessage
    peer_id: str
    alias: str
    state: State
    queued_at: float
    expires_at: float
    attempts: int
    next_attempt_at: float
    last_error: str | None


@dataclass(frozen=True)
class ThreadItem:
    """One message of a thread, either way: `incoming` from the peer, else ours (with `state`)."""

    message: ChatMessage
    peer_id: str
    alias: str
    incoming: bool
    at: float
    state: State | None = None


@dataclass(frozen=True)
class ThreadSummary:
    """A thread for `/inbox`: peer, thread id, message counts, the last message and its time."""

    peer_id: str
    alias: str
    context_id: str
    received: int
    sent: int
    last: ChatMessage
    last_incoming: bool
    last_at: float
