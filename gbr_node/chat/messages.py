"""Messages of `/gbr/chat/1.0.0`, pure: the chat message, its acknowledgement, refusals.

The contract is protocols/gbr-chat-1.0.0.md. A message travels as the params
of one JSON-RPC request, method `message/send` (A2A's method name), on its
own stream; the receiver answers with an `Ack` result (`accepted` or
`duplicate`) or a JSON-RPC error whose code (and, for CHAT_REFUSED,
`data.reason`) names what refused it. Field names are A2A's
(`message_id`, `context_id`, `role`, `parts` of `kind` "text" / "data", in
the snake case of A2A's protobuf definition), plus our `in_reply_to` and
`sent_at`, so a bridge to A2A is a renaming.

No I/O here; `new_message` takes the clock and the id source as arguments.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SEND_METHOD = "message/send"
CHAT_PROTOCOL = "/gbr/chat/1.0.0"
CHAT_STREAM_PROTOCOL = "/gbr/chat/stream/1.0.0"
"""The same requests, many on one stream, one at a time (protocols/gbr-chat-1.0.0.md §2.1)."""
ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
"""`message_id` and `context_id`: 1..128 characters of letters, digits, `.`, `_`, `:`, `-`
(a UUID fits)."""
MAX_PARTS = 16

Reason = Literal["untrusted", "policy", "too_big", "too_fast", "inbox_full", "busy", "invalid"]
"""Why a message was refused, as the sender is told (protocols/gbr-chat-1.0.0.md §6)."""

REASON_TEXT: dict[str, str] = {
    "untrusted": "the peer does not trust this node",
    "policy": "refused by the peer's policy (chat is off for us)",
    "too_big": "too big for the peer's limit",
    "too_fast": "too fast: the peer's per-minute limit",
    "inbox_full": "the peer's inbox for us is full",
    "busy": "the peer is busy with our other messages",
    "invalid": "the peer found the message invalid",
}
TRANSIENT: frozenset[str] = frozenset({"too_fast", "inbox_full", "busy"})
"""Refusals that may pass later: the outbox keeps trying until the message expires."""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextPart(_Wire):
    """A2A `TextPart`: `{"kind": "text", "text": "..."}`."""

    kind: Literal["text"] = "text"
    text: str


class DataPart(_Wire):
    """A2A `DataPart`: `{"kind": "data", "data": {...}}`, structured content (a JSON object)."""

    kind: Literal["data"] = "data"
    data: dict[str, Any]


Part = Annotated[TextPart | DataPart, Field(discriminator="kind")]


class ChatMessage(_Wire):
    """One agent-to-agent message (protocols/gbr-chat-1.0.0.md §4, `schemas/chat-message.json`).

    Attributes:
        message_id: unique per sender; the receiver drops a second copy (dedup).
        context_id: the thread; a reply carries the thread of what it answers.
        role: "user" when the sending node's person wrote it (`/msg`), "agent"
            when its agent did (`send_message`, a reply).
        parts: text parts (what is shown) and optional data parts, 1..16.
        in_reply_to: the `message_id` this one answers, or None.
        sent_at: when the sender queued it (RFC 3339, UTC).
    """

    kind: Literal["message"] = "message"
    message_id: Annotated[str, Field(pattern=ID_PATTERN)]
    context_id: Annotated[str, Field(pattern=ID_PATTERN)]
    role: Literal["user", "agent"]
    parts: Annotated[tuple[Part, ...], Field(min_length=1, max_length=MAX_PARTS)]
    in_reply_to: Annotated[str, Field(pattern=ID_PATTERN)] | None = None
    sent_at: datetime

    @field_validator("parts")
    @classmethod
    def _has_text(cls, value: tuple[TextPart | DataPart, ...]) -> tuple[TextPart | DataPart, ...]:
        if not any(isinstance(part, TextPart) for part in value):
            raise ValueError("a message needs at least one text part")
        return value

    @field_validator("sent_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("sent_at needs a time zone (RFC 3339, e.g. 2026-12-01T16:00:00Z)")
        return value

    @property
    def text(self) -> str:
        """The text parts, joined by newlines: what the person (or the agent) reads."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def data(self) -> tuple[dict[str, Any], ...]:
        """The data parts' objects, in order."""
        return tuple(p.data for p in self.parts if isinstance(p, DataPart))

    def wire(self) -> dict[str, Any]:
        """The JSON object sent as `params.message`."""
        out = self.model_dump(mode="json", exclude_none=True)
        out["sent_at"] = self.sent_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return out


class SendParams(_Wire):
    """`message/send` params: `{"message": ChatMessage}` (A2A's `MessageSendParams`, minus
    `configuration`)."""

    message: ChatMessage


class Ack(_Wire):
    """The answer to an accepted message (`schemas/chat-ack.json`).

    `status` "accepted": kept (and shown); "duplicate": a message with this
    `message_id` from this sender was accepted before, nothing new happened.
    """

    kind: Literal["ack"] = "ack"
    message_id: str
    status: Literal["accepted", "duplicate"]


def new_id() -> str:
    """A fresh random message or context id (a UUID4 string)."""
    return str(uuid.uuid4())


def new_message(
    text: str,
    *,
    role: Literal["user", "agent"],
    context_id: str | None = None,
    in_reply_to: str | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    make_id: Callable[[], str] = new_id,
) -> ChatMessage:
    """A message holding `text` in thread `context_id` (a new thread when None).

    Raises pydantic.ValidationError for an id of the wrong shape."""
    return ChatMessage(
        message_id=make_id(),
        context_id=context_id or make_id(),
        role=role,
        parts=(TextPart(text=text),),
        in_reply_to=in_reply_to,
        sent_at=now(),
    )
