"""The durable outbox: at-least-once delivery of chat messages, with backoff and a TTL (EVD-AI-02).

`Outbox.send` commits a message to the store as `queued` and wakes the
delivery task; `Outbox.run` delivers due messages, one peer's in the order
they were queued (several peers at once), until each is acknowledged
(`delivered`: "accepted" or "duplicate", the receiver's dedup makes a retry
after a lost ack harmless), refused for good (`refused`: untrusted, policy,
too big, invalid), or past its time to live (`expired`). A failed attempt
(peer unreachable, stream broken, timed out, busy, "too_fast",
"inbox_full") is retried after `chat.limits.backoff_s`; a peer that
connects makes its queued messages due at once (`peer_connected`). Queued
rows survive a restart (or a `kill -9`) of the node and are retried by the
next `run`. Every change of state is reported to `on_change`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import trio

from gbr_node.chat.limits import backoff_s
from gbr_node.chat.messages import REASON_TEXT, TRANSIENT, Ack, ChatMessage
from gbr_node.chat.records import Outgoing, State
from gbr_node.chat.store import ChatStore
from gbr_node.errors import GbrError, RpcError
from gbr_node.rpc import codes

log = logging.getLogger("gbr_node.chat")
MAX_SLEEP_S = 5.0
"""The longest the delivery task sleeps between looks at the store (seconds)."""


@dataclass(frozen=True)
class Change:
    """A message's new state: "delivered", "refused", "expired", or "retrying" (still
    queued; `detail` says why the attempt failed). `reason` names a refusal
    ("policy", "too_big", ...) as the receiver did."""

    entry: Outgoing
    state: State | str
    detail: str = ""
    reason: str | None = None


def refusal_reason(exc: RpcError) -> str:
    """The reason word of an error answer to `message/send` (protocols/gbr-chat-1.0.0.md §6)."""
    if exc.code == codes.CHAT_REFUSED and isinstance(exc.data, dict):
        return str(exc.data.get("reason", "policy"))
    return {
        codes.UNAUTHORIZED_PEER: "untrusted",
        codes.TOO_LARGE: "too_big",
        codes.BUSY: "busy",
        codes.INVALID_PARAMS: "invalid",
        codes.INVALID_REQUEST: "invalid",
        codes.PARSE_ERROR: "invalid",
        codes.METHOD_NOT_FOUND: "invalid",
    }.get(exc.code, "busy")


class Outbox:
    """Delivers the store's queued messages.

    Args:
        store: the durable chat store.
        deliver: sends one message to a peer ID on a new stream and returns its
            `Ack`; raises `RpcError` for the receiver's error answer, any other
            `GbrError` when the peer cannot be reached.
        on_change: called on the event loop with every `Change` (must not block).
        clock: wall-clock seconds (queue and expiry times are stored as such).
        connected: returns the peer IDs connected now; their queued messages
            are due at once, whatever their backoff (the peer is back).
    """

    def __init__(
        self,
        store: ChatStore,
        deliver: Callable[[str, ChatMessage], Awaitable[Ack]],
        on_change: Callable[[Change], None],
        clock: Callable[[], float] = time.time,
        connected: Callable[[], Iterable[str]] = tuple,
    ) -> None:
        self.store = store
        self._connected = connected
        self._deliver = deliver
        self._on_change = on_change
        self._clock = clock
        self._wake = trio.Event()
        self._busy: set[str] = set()
        self._rushed: set[str] = set()
        self._settled: dict[str, trio.Event] = {}

    def send(self, peer_id: str, alias: str, message: ChatMessage, *, ttl_s: float) -> Outgoing:
        """Queue `message` for `peer_id` (committed before this returns) and wake delivery."""
        entry = self.store.enqueue(peer_id, alias, message, now=self._clock(), ttl_s=ttl_s)
        self._wake.set()
        return entry

    def peer_connected(self, peer_id: str) -> None:
        """`peer_id` is reachable again: its queued messages are due at once."""
        self.store.due_now(peer_id)
        self._wake.set()

    async def wait_settled(self, message_id: str, timeout_s: float) -> Outgoing | None:
        """The message's outbox row once it is no longer queued, or as it stands after
        `timeout_s` seconds; None for an unknown id."""
        entry = self.store.outgoing(message_id)
        if entry is None or entry.state != "queued":
            return entry
        event = self._settled.setdefault(message_id, trio.Event())
        with trio.move_on_after(timeout_s):
            await event.wait()
        return self.store.outgoing(message_id)

    async def run(
        self,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,  # type: ignore[name-defined]  # stale trio-typing stubs (see pyproject)
    ) -> None:
        """Deliver until cancelled: expire what is past its TTL, send what is due."""
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                self._wake = trio.Event()
                now = self._clock()
                queued = self.store.queued()
                connected = set(self._connected()) if queued else set()
                self._rushed &= connected
                upcoming = [MAX_SLEEP_S]
                first_seen: set[str] = set()  # a peer is due when its oldest message is
                for entry in queued:
                    if entry.expires_at <= now:
                        self._settle(entry, "expired", "its time to live ran out undelivered")
                        continue
                    upcoming.append(entry.expires_at - now)
                    if entry.peer_id in self._busy or entry.peer_id in first_seen:
                        continue
                    first_seen.add(entry.peer_id)
                    if (
                        entry.peer_id in connected
                        and entry.next_attempt_at > now
                        and (entry.peer_id not in self._rushed)
                    ):
                        self._rushed.add(entry.peer_id)  # once per connection
                        self.store.due_now(entry.peer_id)
                        entry = dataclasses.replace(entry, next_attempt_at=now)
                    if entry.next_attempt_at <= now:
                        self._busy.add(entry.peer_id)
                        nursery.start_soon(self._drain, entry.peer_id)
                    else:
                        upcoming.append(entry.next_attempt_at - now)
                with trio.move_on_after(max(0.0, min(upcoming))):
                    await self._wake.wait()

    async def _drain(self, peer_id: str) -> None:
        """Deliver `peer_id`'s due messages in order; stop at the first that fails."""
        try:
            for entry in self.store.queued():
                now = self._clock()
                if entry.peer_id != peer_id or entry.expires_at <= now:
                    continue
                if entry.next_attempt_at > now or not await self._attempt(entry):
                    return
        finally:
            self._busy.discard(peer_id)
            self._wake.set()

    async def _attempt(self, entry: Outgoing) -> bool:
        """One delivery attempt; True when the message is settled (next one may go)."""
        try:
            ack = await self._deliver(entry.peer_id, entry.message)
        except RpcError as exc:
            reason = refusal_reason(exc)
            if reason in TRANSIENT:
                hint = exc.data.get("retry_after_s") if isinstance(exc.data, dict) else None
                self._retry(entry, f"{REASON_TEXT[reason]}: {exc.message}", hint, reason)
                return False
            self._settle(
                entry, "refused", f"{REASON_TEXT.get(reason, reason)}: {exc.message}", reason
            )
            return True
        except GbrError as exc:
            self._retry(entry, str(exc), None, None)
            return False
        self._settle(entry, "delivered", ack.status)
        return True

    def _retry(self, entry: Outgoing, detail: str, hint: object, reason: str | None) -> None:
        hint_s = float(hint) if isinstance(hint, int | float) else None
        at = self._clock() + backoff_s(entry.attempts, hint_s=hint_s)
        self.store.retry_later(entry.message.message_id, at=at, error=detail)
        log.info(
            "message %s to %s not delivered yet: %s", entry.message.message_id, entry.alias, detail
        )
        if entry.attempts == 0:  # said once, not at every retry
            self._on_change(Change(entry, "retrying", detail, reason))

    def _settle(
        self, entry: Outgoing, state: State, detail: str, reason: str | None = None
    ) -> None:
        if not self.store.settle(entry.message.message_id, state, now=self._clock(), error=detail):
            return
        event = self._settled.pop(entry.message.message_id, None)
        if event is not None:
            event.set()
        settled = self.store.outgoing(entry.message.message_id) or entry
        try:
            self._on_change(Change(settled, state, detail, reason))
        except Exception:
            log.exception("reporting message %s failed", entry.message.message_id)
