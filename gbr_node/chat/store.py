"""The durable chat store in SQLite, `.gbr/chat.db`: inbox, outbox, reply counts (EVD-AI-02).

- `inbox`: every message accepted from a trusted peer, once: (peer ID,
  `message_id`) is unique, so a second copy (a sender's retry after a lost
  acknowledgement) is answered "duplicate" and kept nowhere.
- `outbox`: every message this node sends, with its state: `queued` until
  the peer acknowledges it (`delivered`), refuses it for good (`refused`), or
  its time to live runs out (`expired`). A queued message is retried with
  backoff by `chat.outbox.Outbox`, across restarts of either node.
- `replies`: how many answers this node's agent sent per thread (`chat =
  "reply"`), so the limit holds across restarts.

WAL mode, `synchronous=NORMAL`: a committed row survives a `kill -9` of the
node (not a power cut before the next checkpoint). Every method commits
before it returns, so before anyone is told (the sender's ack, the person's
"queued" line). Calls are quick and made from the event loop's thread; the
`gbr-node inbox` command opens the same file from another process.
"""

from __future__ import annotations

import json
import pathlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from pydantic import ValidationError

from gbr_node.chat.messages import ChatMessage
from gbr_node.chat.records import Outgoing, State, ThreadItem, ThreadSummary
from gbr_node.errors import GbrError

BUSY_TIMEOUT_MS = 10_000
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS inbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        peer_id TEXT NOT NULL,
        alias TEXT NOT NULL,
        message_id TEXT NOT NULL,
        context_id TEXT NOT NULL,
        body TEXT NOT NULL,
        received_at REAL NOT NULL,
        UNIQUE (peer_id, message_id))""",
    "CREATE INDEX IF NOT EXISTS inbox_by_thread ON inbox (peer_id, context_id, seq)",
    """CREATE TABLE IF NOT EXISTS outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id TEXT NOT NULL UNIQUE,
        peer_id TEXT NOT NULL,
        alias TEXT NOT NULL,
        context_id TEXT NOT NULL,
        body TEXT NOT NULL,
        queued_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'delivered', 'refused', 'expired')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        last_error TEXT,
        settled_at REAL)""",
    "CREATE INDEX IF NOT EXISTS outbox_due ON outbox (state, next_attempt_at)",
    """CREATE TABLE IF NOT EXISTS replies (
        peer_id TEXT NOT NULL,
        context_id TEXT NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (peer_id, context_id))""",
)


class ChatStoreError(GbrError):
    """The chat database could not be opened, read or written (a translated `sqlite3.Error`)."""


def default_path(project_dir: str | pathlib.Path) -> pathlib.Path:
    """`<project_dir>/.gbr/chat.db`, where a node keeps its inbox and outbox."""
    return pathlib.Path(project_dir) / ".gbr" / "chat.db"


def _message(body: str) -> ChatMessage:
    try:
        return ChatMessage.model_validate(json.loads(body))
    except (ValueError, ValidationError) as exc:
        raise ChatStoreError(f"chat store holds a message this version cannot read: {exc}") from exc


class ChatStore:
    """The inbox, outbox and reply counts of one node, in one SQLite file.

    Raises ChatStoreError (from the constructor and every method) when the
    file cannot be used.
    """

    def __init__(self, path: str | pathlib.Path) -> None:
        self.path = pathlib.Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, isolation_level=None)
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            for statement in _SCHEMA:
                self._conn.execute(statement)
        except (sqlite3.Error, OSError) as exc:
            raise ChatStoreError(f"chat store {self.path}: {exc}") from exc

    def close(self) -> None:
        """Close the database (idempotent)."""
        self._conn.close()

    def __enter__(self) -> ChatStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise ChatStoreError(f"chat store {self.path}: {exc}") from exc

    def _read(self, sql: str, args: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise ChatStoreError(f"chat store {self.path}: {exc}") from exc

    # -- inbox -------------------------------------------------------------

    def receive(
        self, peer_id: str, alias: str, message: ChatMessage, *, now: float, max_per_peer: int
    ) -> Literal["accepted", "duplicate", "inbox_full"]:
        """Keep `message` from `peer_id` unless it is a second copy or the peer's inbox is full.

        The dedup check comes first: a retry of a message already kept is
        "duplicate" even when the inbox has filled since. Committed before it returns.
        """
        with self._write() as conn:
            seen = conn.execute(
                "SELECT 1 FROM inbox WHERE peer_id = ? AND message_id = ?",
                (peer_id, message.message_id),
            ).fetchone()
            if seen:
                return "duplicate"
            (held,) = conn.execute(
                "SELECT COUNT(*) FROM inbox WHERE peer_id = ?", (peer_id,)
            ).fetchone()
            if held >= max_per_peer:
                return "inbox_full"
            conn.execute(
                "INSERT INTO inbox (peer_id, alias, message_id, context_id, body, received_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    peer_id,
                    alias,
                    message.message_id,
                    message.context_id,
                    json.dumps(message.wire()),
                    now,
                ),
            )
            return "accepted"

    def inbox_count(self, peer_id: str | None = None) -> int:
        """Messages kept in the inbox (from `peer_id` only, when given)."""
        if peer_id is None:
            rows = self._read("SELECT COUNT(*) FROM inbox")
        else:
            rows = self._read("SELECT COUNT(*) FROM inbox WHERE peer_id = ?", (peer_id,))
        return int(rows[0][0])

    def clear_inbox(self, peer_id: str | None = None) -> int:
        """Forget the kept messages (of `peer_id` only, when given); returns how many.

        Their `message_id`s are forgotten too: a sender still retrying one gets it
        accepted again."""
        with self._write() as conn:
            if peer_id is None:
                return conn.execute("DELETE FROM inbox").rowcount
            return conn.execute("DELETE FROM inbox WHERE peer_id = ?", (peer_id,)).rowcount

    # -- outbox ------------------------------------------------------------

    def enqueue(
        self, peer_id: str, alias: str, message: ChatMessage, *, now: float, ttl_s: float
    ) -> Outgoing:
        """Queue `message` for `peer_id`, due at once, expiring `ttl_s` seconds from `now`."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO outbox (message_id, peer_id, alias, context_id, body, queued_at, "
                "expires_at, state, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?)",
                (
                    message.message_id,
                    peer_id,
                    alias,
                    message.context_id,
                    json.dumps(message.wire()),
                    now,
                    now + ttl_s,
                    now,
                ),
            )
        return Outgoing(message, peer_id, alias, "queued", now, now + ttl_s, 0, now, None)

    _OUT = (
        "SELECT body, peer_id, alias, state, queued_at, expires_at, attempts, next_attempt_at, "
        "last_error FROM outbox"
    )

    def _outgoing(self, rows: list[tuple[Any, ...]]) -> list[Outgoing]:
        return [Outgoing(_message(str(row[0])), *row[1:]) for row in rows]

    def outgoing(self, message_id: str) -> Outgoing | None:
        """The outbox row of `message_id`, or None."""
        found = self._outgoing(self._read(f"{self._OUT} WHERE message_id = ?", (message_id,)))
        return found[0] if found else None

    def queued(self) -> list[Outgoing]:
        """Every queued message, oldest first."""
        return self._outgoing(self._read(f"{self._OUT} WHERE state = 'queued' ORDER BY seq"))

    def settle(
        self, message_id: str, state: State, *, now: float, error: str | None = None
    ) -> bool:
        """Move a queued message to `state` ("delivered", "refused", "expired").

        Returns False (nothing changed) when it was no longer queued: settled
        once, it stays so."""
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE outbox SET state = ?, settled_at = ?, last_error = COALESCE(?, last_error) "
                "WHERE message_id = ? AND state = 'queued'",
                (state, now, error, message_id),
            )
            return cursor.rowcount == 1

    def retry_later(self, message_id: str, *, at: float, error: str) -> None:
        """Count a failed attempt of a queued message and schedule the next one at `at`."""
        with self._write() as conn:
            conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?, last_error = ? "
                "WHERE message_id = ? AND state = 'queued'",
                (at, error, message_id),
            )

    def due_now(self, peer_id: str) -> None:
        """Make every queued message of `peer_id` due at once (it just connected)."""
        with self._write() as conn:
            conn.execute(
                "UPDATE outbox SET next_attempt_at = 0 WHERE peer_id = ? AND state = 'queued'",
                (peer_id,),
            )

    # -- threads -----------------------------------------------------------

    def latest_context(self, peer_id: str) -> str | None:
        """The thread of the last message exchanged with `peer_id` either way, or None."""
        rows = self._read(
            "SELECT context_id, at FROM ("
            "SELECT context_id, received_at AS at FROM inbox WHERE peer_id = ? UNION ALL "
            "SELECT context_id, queued_at AS at FROM outbox WHERE peer_id = ?) "
            "ORDER BY at DESC LIMIT 1",
            (peer_id, peer_id),
        )
        return str(rows[0][0]) if rows else None

    def thread(self, peer_id: str, context_id: str) -> list[ThreadItem]:
        """Every message of thread `context_id` with `peer_id`, both ways, oldest first."""
        rows = self._read(
            "SELECT body, peer_id, alias, 1, received_at, NULL FROM inbox "
            "WHERE peer_id = ? AND context_id = ? UNION ALL "
            "SELECT body, peer_id, alias, 0, queued_at, state FROM outbox "
            "WHERE peer_id = ? AND context_id = ? ORDER BY 5",
            (peer_id, context_id, peer_id, context_id),
        )
        return [
            ThreadItem(_message(str(r[0])), str(r[1]), str(r[2]), bool(r[3]), float(r[4]), r[5])
            for r in rows
        ]

    def threads(self) -> list[ThreadSummary]:
        """Every thread, the most recent last."""
        rows = self._read(
            "SELECT peer_id, context_id, SUM(incoming), SUM(1 - incoming), MAX(at) FROM ("
            "SELECT peer_id, context_id, 1 AS incoming, received_at AS at FROM inbox UNION ALL "
            "SELECT peer_id, context_id, 0, queued_at FROM outbox) "
            "GROUP BY peer_id, context_id ORDER BY 5"
        )
        out = []
        for peer_id, context_id, received, sent, _ in rows:
            last = self.thread(str(peer_id), str(context_id))[-1]
            out.append(
                ThreadSummary(
                    str(peer_id),
                    last.alias,
                    str(context_id),
                    int(received),
                    int(sent),
                    last.message,
                    last.incoming,
                    last.at,
                )
            )
        return out

    # -- reply counts (chat = "reply") --------------------------------------

    def replies(self, peer_id: str, context_id: str) -> int:
        """Answers our agent sent in this thread since the person last stepped in."""
        rows = self._read(
            "SELECT count FROM replies WHERE peer_id = ? AND context_id = ?", (peer_id, context_id)
        )
        return int(rows[0][0]) if rows else 0

    def count_reply(self, peer_id: str, context_id: str) -> int:
        """Count one more answer of our agent in this thread; returns the new count."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO replies (peer_id, context_id, count) VALUES (?, ?, 1) "
                "ON CONFLICT (peer_id, context_id) DO UPDATE SET count = count + 1",
                (peer_id, context_id),
            )
        return self.replies(peer_id, context_id)

    def reset_replies(self, peer_id: str, context_id: str) -> None:
        """The person stepped in (a `/msg` in this thread): the count starts again."""
        with self._write() as conn:
            conn.execute(
                "DELETE FROM replies WHERE peer_id = ? AND context_id = ?", (peer_id, context_id)
            )
