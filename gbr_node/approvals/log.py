"""The durable, append-only approval log in SQLite (EVD-AI-01, issue 6 "The log").

One table of events (see `state.py` for the kinds and the transition table).
Rows are only ever inserted: triggers refuse UPDATE and DELETE, and partial
unique indexes allow one `PendingApproval` and one `Applied`/`Failed` per
approval id. The database is in WAL mode with a busy timeout, so a running
node, `gbr-node approvals` in another terminal and the REPL share it; every
change runs in a `BEGIN IMMEDIATE` transaction (the database's single write
lock), is checked against the state derived under that lock, and is committed
(synchronous=FULL) before the method returns, so before anyone is told.

A `kill -9` loses nothing committed; an uncommitted transaction is rolled
back by SQLite on the next open and its write lock dies with the process.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import os
import pathlib
import sqlite3
import threading
import time
from collections.abc import Iterator

from gbr_node.approvals.state import (
    Approval,
    Approved,
    Edited,
    Event,
    PendingApproval,
    Rejected,
    Status,
    UnknownApproval,
    decode,
    derive,
    encode,
    transition,
)
from gbr_node.errors import ApprovalRequired, GbrError

SCHEMA_VERSION = 2
"""1: issue 6's events; 2: adds `Checked` (issue 17). A version-1 log is rebuilt
as version 2 on open (SQLite cannot change a CHECK constraint in place)."""
DEFAULT_BUSY_TIMEOUT_S = 10.0
_TABLE = """CREATE TABLE IF NOT EXISTS {name} (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        approval_id INTEGER NOT NULL CHECK (approval_id > 0),
        kind TEXT NOT NULL CHECK (kind IN
            ('PendingApproval', 'Approved', 'Edited', 'Rejected', 'Applied', 'Checked', 'Failed')),
        at REAL NOT NULL,
        body TEXT NOT NULL)"""
_SCHEMA = (
    _TABLE.format(name="events"),
    "CREATE INDEX IF NOT EXISTS events_by_approval ON events (approval_id, seq)",
    """CREATE UNIQUE INDEX IF NOT EXISTS one_request
        ON events (approval_id) WHERE kind = 'PendingApproval'""",
    """CREATE UNIQUE INDEX IF NOT EXISTS one_settlement
        ON events (approval_id) WHERE kind IN ('Applied', 'Failed')""",
    """CREATE UNIQUE INDEX IF NOT EXISTS one_check
        ON events (approval_id) WHERE kind = 'Checked'""",
    """CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'the approval log is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'the approval log is append-only'); END""",
)


_ALL_EVENTS = "SELECT seq, approval_id, kind, at, body FROM events ORDER BY seq"


class ApprovalLogError(GbrError):
    """The approval database could not be opened, read or written (a
    translated `sqlite3.Error` or `OSError`), or holds rows this version does
    not understand. `path` is the database file."""

    def __init__(self, message: str, path: str) -> None:
        self.path = path
        super().__init__(f"approval log {path}: {message}")


def default_path(project_dir: str | os.PathLike[str]) -> pathlib.Path:
    """`<project_dir>/.gbr/approvals.db`, where a node keeps its approval log."""
    return pathlib.Path(project_dir) / ".gbr" / "approvals.db"


class Transaction:
    """The write lock of the log, held by `ApprovalLog.transaction()`.

    Reads inside see every committed event; `append` checks the new event
    against the approval's current state and inserts it, to be committed
    when the block ends without an exception.
    """

    def __init__(self, conn: sqlite3.Connection, path: pathlib.Path) -> None:
        self._conn = conn
        self._path = path

    def approval(self, approval_id: int) -> Approval:
        """State of approval `approval_id`. Raises UnknownApproval, or
        ApprovalLogError for a stored row this version cannot read."""
        rows = self._conn.execute(
            "SELECT seq, approval_id, kind, at, body FROM events WHERE approval_id = ? "
            "ORDER BY seq",
            (approval_id,),
        ).fetchall()
        try:
            found = derive(decode(*row) for row in rows)
        except ValueError as exc:
            raise ApprovalLogError(str(exc), str(self._path)) from exc
        if approval_id not in found:
            raise UnknownApproval(approval_id)
        return found[approval_id]

    def next_id(self) -> int:
        """The id a new request gets: one more than the highest so far (ids start at 1)."""
        (highest,) = self._conn.execute("SELECT MAX(approval_id) FROM events").fetchone()
        return (highest or 0) + 1

    def append(self, event: Event, current: Approval | None) -> Approval:
        """Insert `event` (its seq is assigned here) on top of `current`, the
        approval's state read in this transaction (None for a new request).
        Returns the new state; raises InvalidDecision (nothing inserted)."""
        after = transition(current, event)
        kind, body = encode(event)
        cursor = self._conn.execute(
            "INSERT INTO events (approval_id, kind, at, body) VALUES (?, ?, ?, ?)",
            (event.approval_id, kind, event.at, body),
        )
        seq = cursor.lastrowid
        assert seq is not None  # set by every INSERT (sqlite3 docs)
        return dataclasses.replace(after, last_seq=seq)

    def decide(
        self,
        current: Approval,
        *,
        by: str,
        force: bool = False,
        current_hash: str | None = None,
        content: str | None = None,
    ) -> Approval:
        """Append `Approved` (or `Edited` with `content`) by `by` on top of
        `current`; see `ApprovalLog.approve` for `force` and `current_hash`.
        A plain approval of an approval already approved appends nothing."""
        at = time.time()
        if content is not None:
            event: Approved = Edited(
                approval_id=current.id,
                at=at,
                by=by,
                content=content,
                forced=force,
                base_hash=current_hash,
            )
        elif current.status == "approved" and not force:
            return current
        else:
            event = Approved(
                approval_id=current.id, at=at, by=by, forced=force, base_hash=current_hash
            )
        return self.append(event, current)


class ApprovalLog:
    """The approval log at `path` (created with its folder if missing).

    Safe to share between threads of one process (calls are serialised) and
    between processes (SQLite locking; a writer waits up to `busy_timeout_s`
    seconds for another's write lock). Every method raises ApprovalLogError
    when SQLite or the filesystem fails; decisions raise UnknownApproval for
    an id not in the log and InvalidDecision when the approval's state does
    not allow them (see `state.TRANSITIONS`).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S
    ) -> None:
        self.path = pathlib.Path(path)
        self._lock = threading.Lock()
        with self._translated():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        try:
            with self._translated():
                self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = FULL")
            self._create_schema()
        except BaseException:
            self._conn.close()
            raise

    def close(self) -> None:
        """Close the database connection; further calls raise ApprovalLogError."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> ApprovalLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Hold the write lock (`BEGIN IMMEDIATE`) for the block; commit at its
        end, roll back if it raises. Waits up to the busy timeout for another
        process's lock, then raises ApprovalLogError."""
        with self._lock, self._translated():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield Transaction(self._conn, self.path)
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def request(
        self,
        exc: ApprovalRequired,
        requester: str,
        requester_alias: str | None,
        current_hash: str | None,
        *,
        turn: str | None = None,
    ) -> int:
        """Record a `PendingApproval` for the change `exc` describes and return
        its new approval id (1, 2, ...), committed (EVD-AI-01). `requester` is
        "local" or a peer ID; `current_hash` is `apply.fingerprint` of the path
        now (None if it does not exist); `turn`, the local agent's turn that asked,
        goes into `detail["turn"]` (its checkpoint group once applied, GBR-UNDO-01)."""
        with self.transaction() as tx:
            event = PendingApproval(
                approval_id=tx.next_id(),
                at=time.time(),
                requester=requester,
                requester_alias=requester_alias,
                tool=exc.tool,
                path=exc.path,
                absolute=exc.absolute,
                content=exc.content,
                detail={**exc.detail, **({"turn": turn} if turn else {})},
                base_hash=current_hash,
            )
            return tx.append(event, None).id

    def get(self, approval_id: int) -> Approval:
        """The current state of approval `approval_id`. Raises UnknownApproval."""
        with self._lock, self._translated():
            return Transaction(self._conn, self.path).approval(approval_id)

    def list(self, status: Status | None = None) -> list[Approval]:
        """Every approval (or those with `status`), by id."""
        approvals = derive(self.events_since(0)).values()
        return sorted((a for a in approvals if status in (None, a.status)), key=lambda a: a.id)

    def events_since(self, seq: int) -> builtins.list[Event]:
        """Events with a seq above `seq`, in log order; a node polls this (about
        once a second) to learn of decisions made by other processes."""
        with self._lock, self._translated():
            rows = self._conn.execute(
                "SELECT seq, approval_id, kind, at, body FROM events WHERE seq > ? ORDER BY seq",
                (seq,),
            ).fetchall()
        try:
            return [decode(*row) for row in rows]
        except ValueError as exc:
            raise ApprovalLogError(str(exc), str(self.path)) from exc

    def approve(
        self, approval_id: int, *, by: str, force: bool = False, current_hash: str | None = None
    ) -> Approval:
        """Record that `by` approved. Without `force`, approving an approval that
        is already approved records nothing. With `force`, `current_hash` (the
        path's fingerprint now, None if absent) becomes the hash applying checks
        against: the change is re-approved against the new content (issue 6,
        "Conflicts"). Returns the new state; raises InvalidDecision if settled."""
        with self.transaction() as tx:
            return tx.decide(
                tx.approval(approval_id), by=by, force=force, current_hash=current_hash
            )

    def edit(
        self,
        approval_id: int,
        content: str,
        *,
        by: str,
        force: bool = False,
        current_hash: str | None = None,
    ) -> Approval:
        """Record that `by` approved `content` instead of the proposed text
        (EVD-DEV-02); `force`/`current_hash` as for `approve`. Raises
        InvalidDecision if settled, or for a delete or move (nothing to edit)."""
        with self.transaction() as tx:
            current = tx.approval(approval_id)
            return tx.decide(
                current, by=by, force=force, current_hash=current_hash, content=content
            )

    def reject(self, approval_id: int, reason: str | None, *, by: str) -> Approval:
        """Record that `by` refused, with `reason` (None for none). Raises
        InvalidDecision if already settled (applied, failed or rejected)."""
        with self.transaction() as tx:
            current = tx.approval(approval_id)
            event = Rejected(approval_id=approval_id, at=time.time(), by=by, reason=reason)
            return tx.append(event, current)

    def compact(self, older_than_s: float, *, now: float | None = None) -> int:
        """Remove every event of the approvals settled (applied, failed, rejected)
        more than `older_than_s` seconds before `now` (default: the time now),
        except the one with the highest id, so ids are never given twice.
        Returns how many approvals were removed. The append-only triggers are
        lifted for this one transaction only (GBR-PRIV-01: a bounded log)."""
        cutoff = (time.time() if now is None else now) - older_than_s
        with self.transaction():
            events = [decode(*row) for row in self._conn.execute(_ALL_EVENTS).fetchall()]
            last_at: dict[int, float] = {}
            for event in events:
                last_at[event.approval_id] = event.at
            settled = [a.id for a in derive(events).values() if a.settled]
            highest = max(last_at, default=0)
            old = [n for n in settled if last_at[n] < cutoff and n != highest]
            if not old:
                return 0
            self._conn.execute("DROP TRIGGER events_no_delete")
            marks = ",".join("?" * len(old))
            self._conn.execute(f"DELETE FROM events WHERE approval_id IN ({marks})", old)
            self._conn.execute(_SCHEMA[-1])
        return len(old)

    def _create_schema(self) -> None:
        """Create the table, indexes and triggers unless this version's schema
        is there (then no write lock is taken, so the log opens while another
        process holds it). Raises ApprovalLogError for a newer schema."""
        with self._translated():
            (version,) = self._conn.execute("PRAGMA user_version").fetchone()
        if version == SCHEMA_VERSION:
            return
        with self.transaction():
            (version,) = self._conn.execute("PRAGMA user_version").fetchone()
            if version > SCHEMA_VERSION:
                newer = f"schema version {version} is newer than this node knows"
                raise ApprovalLogError(newer, str(self.path))
            if version == 1:  # the same rows in a table that also takes `Checked`
                self._conn.execute(_TABLE.format(name="events_v2"))
                self._conn.execute("INSERT INTO events_v2 SELECT * FROM events")
                self._conn.execute("DROP TABLE events")
                self._conn.execute("ALTER TABLE events_v2 RENAME TO events")
            for statement in _SCHEMA:
                self._conn.execute(statement)
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise ApprovalLogError(str(exc), str(self.path)) from exc
        except OSError as exc:
            raise ApprovalLogError(exc.strerror or str(exc), str(self.path)) from exc
