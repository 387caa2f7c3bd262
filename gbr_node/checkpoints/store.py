"""The checkpoint store: content-addressed blobs plus a SQLite index (GBR-UNDO-01).

Layout, under the project folder's `.gbr/`:

    checkpoints.db                 groups (a turn, a peer's call, ...) and entries (path,
                                   state before, state after), WAL mode
    checkpoints/blobs/ab/cdef...   file contents by SHA-256 (hex), written once

Crash safety: `changing(owner, paths)` writes the prior content's blob (fsynced,
file and folder) and commits its row *before* the caller changes anything,
then records the state after. A kill -9 between the two leaves the prior state
kept and the entry unsettled (undo restores it without a conflict check).

`run_command` (`snapshot` before, `settle_command` after) compares the root's
(size, mtime_ns, mode) listing before and after; the prior content must exist
before the command runs, so `snapshot` stores a blob of every regular file of
at most `COMMAND_FILE_MAX_BYTES` whose (size, mtime_ns) changed since the
last snapshot (blobs are deduplicated, so a repeated run reads only what
changed). Limits, said once in the result: a root of more than
`COMMAND_MAX_FILES` files is not snapshotted; a changed file bigger than
`COMMAND_FILE_MAX_BYTES` is listed but its prior content is not kept. Those
blobs are not fsynced one by one (the rows are committed after the command):
a kill -9 of the node during a command loses that command's checkpoint.

Storage is bounded: when a group starts, groups older than `MAX_AGE_S` and
then the oldest until the blobs fit in `MAX_BYTES` are dropped, never the
newest. The check is cheap (the `sizes` table holds each kept blob's size:
one SUM and one MIN per change); only when a limit is passed are the groups
weighed one by one and the unreferenced blobs deleted. Nothing under `.gbr/`,
`.gbr_envs/`, any `.git/` or outside the root is ever recorded or restored
(`plan.excluded`). Blocking: run in a worker thread. The store is shared by
threads (one connection, a lock).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gbr_node.checkpoints.plan import ABSENT, Entry, Owner, State, excluded, to_evict, undo_plan
from gbr_node.errors import GbrError
from gbr_node.sandbox import Sandbox

MAX_BYTES = 512 * 1024 * 1024
"""Blob bytes kept at most; over it the oldest groups are dropped (never the newest)."""
MAX_AGE_S = 14 * 24 * 3600.0
"""Groups older than this (seconds) are dropped (never the newest)."""
COMMAND_MAX_FILES = 10_000
"""A root with more files than this is not snapshotted around run_command."""
COMMAND_FILE_MAX_BYTES = 8 * 1024 * 1024
"""Files bigger than this are not kept before a run_command (their change is listed)."""
WriteFile = Callable[[str, bytes], None]
"""Writes a root-relative file's bytes atomically (the sandbox's `write_atomic`)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS groups (
    id INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL, kind TEXT NOT NULL,
    label TEXT NOT NULL, created REAL NOT NULL, undone INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS entries (
    group_id INTEGER NOT NULL, path TEXT NOT NULL,
    prior_sha TEXT, prior_mode INTEGER, settled INTEGER NOT NULL DEFAULT 0,
    after_sha TEXT, after_mode INTEGER, PRIMARY KEY (group_id, path));
CREATE TABLE IF NOT EXISTS sizes (sha TEXT PRIMARY KEY, size INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS entries_by_sha ON entries (prior_sha);
"""
COLLECT_EVERY_S = 600.0
"""Unreferenced blobs (a run_command's snapshot of files it did not change) are deleted
at an eviction, and otherwise at most this often (seconds) per store."""


class UndoConflict(GbrError):
    """Paths changed again since their checkpoint; nothing was undone. `paths` names them."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = tuple(paths)
        super().__init__(
            "changed since the checkpoint, so nothing was undone (--force overwrites): "
            + ", ".join(self.paths)
        )


class NothingToUndo(GbrError):
    """No checkpoint group matches what was asked."""


@dataclass(frozen=True)
class Group:
    """One checkpoint group as listed: its `id`, `kind`, `label`, `created` (seconds
    since the epoch), whether it was `undone`, and the `paths` it changed."""

    id: int
    kind: str
    label: str
    created: float
    undone: bool
    paths: tuple[str, ...]

    def line(self) -> str:
        """`#12 turn 20261204-153000.3 15:30:02: app.py, b.txt (undone)` for the listing."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created))
        who = "peer " + self.label if self.kind == "peer" else f"{self.kind} {self.label}"
        paths = ", ".join(self.paths) or "no files"
        return f"#{self.id} {who} {when}: {paths}" + (" (undone)" if self.undone else "")


@dataclass(frozen=True)
class Snapshot:
    """The root before a run_command: path -> (size, mtime_ns, mode), the SHA-256 of
    each file kept, and `note` (a limit that applied, else "")."""

    files: dict[str, tuple[int, int, int]]
    kept: dict[str, str]
    note: str = ""


def default_path(project_dir: str | os.PathLike[str]) -> Path:
    """`<project_dir>/.gbr/checkpoints.db`; the blobs are in `.gbr/checkpoints/blobs/`."""
    return Path(project_dir) / ".gbr" / "checkpoints.db"


class CheckpointReader:
    """The queries of a checkpoint store that change nothing: what a group changed,
    the newest groups, which groups an undo takes back (`CheckpointStore` keeps)."""

    _lock: threading.RLock
    _db: sqlite3.Connection
    _db_path: Path
    _reader: sqlite3.Connection | None
    _reader_lock: threading.Lock

    def changed_by(self, key: str) -> list[str]:
        """The paths group `key` (an `Owner.key`, e.g. "turn ID") really changed, sorted:
        those whose state after differs from the state before, and those whose change
        never settled (it may have happened). [] for an unknown group. Reads through
        a connection of its own, so it never waits for a change being kept (WAL):
        quick enough for the event loop (GBR-TRUTH-01)."""
        with self._reader_lock:
            if self._reader is None:
                self._reader = sqlite3.connect(
                    self._db_path, timeout=1.0, isolation_level=None, check_same_thread=False
                )
            rows = self._reader.execute(
                "SELECT e.path FROM entries e JOIN groups g ON g.id = e.group_id "
                "WHERE g.key = ? AND (e.settled = 0 OR e.prior_sha IS NOT e.after_sha "
                "OR e.prior_mode IS NOT e.after_mode) ORDER BY e.path",
                (key,),
            ).fetchall()
        return [row[0] for row in rows]

    def groups(self, limit: int = 20) -> list[Group]:
        """The `limit` newest groups, newest first, with their paths."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, kind, label, created, undone FROM groups ORDER BY id DESC LIMIT ?",
                (limit,),
            ).fetchall()
            found = []
            for group, kind, label, created, undone in rows:
                paths = self._db.execute(
                    "SELECT path FROM entries WHERE group_id = ? ORDER BY path", (group,)
                ).fetchall()
                found.append(
                    Group(group, kind, label, created, bool(undone), tuple(p[0] for p in paths))
                )
            return found

    def select(
        self, *, turns: int = 1, group: int | None = None, peer: str | None = None
    ) -> list[int]:
        """The ids of the groups to undo, newest first: group `group`, or the newest not
        undone group of `peer` (its alias), or the `turns` newest not undone groups
        of this node's agent and of undos. Raises NothingToUndo."""
        with self._lock:
            if group is not None:
                rows = self._db.execute("SELECT id FROM groups WHERE id = ?", (group,)).fetchall()
            elif peer is not None:
                rows = self._db.execute(
                    "SELECT id FROM groups WHERE kind = 'peer' AND label = ? AND undone = 0 "
                    "ORDER BY id DESC LIMIT 1",
                    (peer,),
                ).fetchall()
            else:
                rows = self._db.execute(
                    "SELECT id FROM groups WHERE kind IN ('turn', 'undo') AND undone = 0 "
                    "ORDER BY id DESC LIMIT ?",
                    (turns,),
                ).fetchall()
        if not rows:
            what = f"group {group}" if group else f"call of peer {peer}" if peer else "turn"
            raise NothingToUndo(f"no {what} to undo")
        return [int(row[0]) for row in rows]


class CheckpointStore(CheckpointReader):
    """The checkpoints of the files under `root`, kept in `db_path` and the `blobs`
    folder beside it. Raises GbrError when the database cannot be opened."""

    def __init__(self, db_path: Path, root: Path, *, max_bytes: int = MAX_BYTES) -> None:
        self.root = Path(root)
        self.blobs = db_path.parent / "checkpoints" / "blobs"
        self.max_bytes = max_bytes
        self._lock = threading.RLock()
        self._db_path = db_path
        self._reader: sqlite3.Connection | None = None
        self._reader_lock = threading.Lock()
        self._collected = time.time()  # the last deletion of unreferenced blobs
        self._seen: dict[str, tuple[int, int, str]] = {}  # run_command: (size, mtime) -> sha
        try:
            self.blobs.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                db_path, timeout=10.0, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA busy_timeout = 10000")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise GbrError(f"cannot open the checkpoint store {db_path}: {exc}") from exc

    def close(self) -> None:
        """Close the database."""
        self._db.close()
        with self._reader_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None

    # -- states and blobs ---------------------------------------------------

    def _blob(self, sha: str) -> Path:
        return self.blobs / sha[:2] / sha[2:]

    def state_of(self, relative: str, *, keep: bool = False, sync: bool = True) -> State:
        """What `relative` holds now (a symlink or folder counts as absent: only regular
        files are kept); with `keep`, its content is stored as a blob first."""
        path = self.root / relative
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return ABSENT
        if not stat.S_ISREG(info.st_mode):
            return ABSENT
        with open(path, "rb") as source:
            data = source.read()
        sha = hashlib.sha256(data).hexdigest()
        if keep:
            self._put(sha, data, sync=sync)
        return State(sha, stat.S_IMODE(info.st_mode))

    def _put(self, sha: str, data: bytes, *, sync: bool) -> None:
        target = self._blob(sha)
        if target.exists():
            return
        target.parent.mkdir(exist_ok=True)
        temporary = target.with_name(f".{target.name}.{threading.get_ident()}")
        with open(temporary, "wb") as out:
            out.write(data)
            if sync:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temporary, target)
        if sync:
            folder = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)

    def content(self, sha: str) -> bytes:
        """The bytes of blob `sha`. Raises GbrError when it is missing."""
        try:
            return self._blob(sha).read_bytes()
        except OSError as exc:
            raise GbrError(f"the checkpoint's copy {sha[:12]} is missing: {exc}") from exc

    # -- recording ----------------------------------------------------------

    def files_under(self, relative: str) -> list[str]:
        """`relative` itself, or every file under it when it is a folder (not followed
        through symlinks), without the excluded ones."""
        path = self.root / relative
        if not path.is_dir() or path.is_symlink():
            return [] if excluded(relative) else [relative]
        found = []
        for folder, names, files in os.walk(path):
            base = Path(folder).relative_to(self.root).as_posix()
            names[:] = [n for n in names if not excluded(f"{base}/{n}")]
            found += [f"{base}/{f}" for f in files if not excluded(f"{base}/{f}")]
        return found

    def _group(self, owner: Owner) -> int:
        row = self._db.execute("SELECT id FROM groups WHERE key = ?", (owner.key,)).fetchone()
        if row is not None:
            return int(row[0])
        cursor = self._db.execute(
            "INSERT INTO groups (key, kind, label, created) VALUES (?, ?, ?, ?)",
            (owner.key, owner.kind, owner.label, time.time()),
        )
        return int(cursor.lastrowid or 0)

    def begin(self, owner: Owner, relatives: Sequence[str]) -> int:
        """Keep the state of each path of `relatives` (files; folders expanded) before
        `owner`'s change, unless its group already has it: blobs fsynced, rows
        committed before this returns. Returns the group's id."""
        paths = [p for r in relatives for p in self.files_under(r)]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                group = self._group(owner)
                for path in paths:
                    known = self._db.execute(
                        "SELECT 1 FROM entries WHERE group_id = ? AND path = ?", (group, path)
                    ).fetchone()
                    if known is None:
                        prior = self.state_of(path, keep=True)
                        self._db.execute(
                            "INSERT INTO entries (group_id, path, prior_sha, prior_mode) "
                            "VALUES (?, ?, ?, ?)",
                            (group, path, prior.sha256, prior.mode),
                        )
                        self._note_size(prior.sha256)
                self._evict()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return group

    def settle(self, group: int, relatives: Sequence[str]) -> None:
        """Record the state after the change of each path of `relatives` (folders
        expanded; a path now absent too) in `group`."""
        with self._lock:
            rows = self._db.execute(
                "SELECT path FROM entries WHERE group_id = ?", (group,)
            ).fetchall()
            mine = {row[0] for row in rows}
            wanted = {p for r in relatives for p in [r, *self.files_under(r)]} | {
                p for p in mine for r in relatives if p.startswith(r.rstrip("/") + "/")
            }
            for path in sorted(wanted & mine):
                after = self.state_of(path)
                self._db.execute(
                    "UPDATE entries SET settled = 1, after_sha = ?, after_mode = ? "
                    "WHERE group_id = ? AND path = ?",
                    (after.sha256, after.mode, group, path),
                )

    @contextlib.contextmanager
    def changing(self, owner: Owner, relatives: Sequence[str]) -> Iterator[None]:
        """`begin` before the block, `settle` after it (also when it raises: part of
        the change may have happened)."""
        kept = [r for r in relatives if not excluded(r)]
        if not kept:
            yield
            return
        group = self.begin(owner, kept)
        try:
            yield
        finally:
            self.settle(group, kept)

    # -- run_command ----------------------------------------------------------

    def _listing(self) -> dict[str, tuple[int, int, int]] | None:
        found: dict[str, tuple[int, int, int]] = {}
        for folder, names, files in os.walk(self.root):
            base = Path(folder).relative_to(self.root).as_posix()
            prefix = "" if base == "." else base + "/"
            names[:] = [n for n in names if not excluded(prefix + n)]
            for name in files:
                relative = prefix + name
                if excluded(relative):
                    continue
                try:
                    info = os.lstat(os.path.join(folder, name))
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    found[relative] = (info.st_size, info.st_mtime_ns, stat.S_IMODE(info.st_mode))
                    if len(found) > COMMAND_MAX_FILES:
                        return None
        return found

    def snapshot(self) -> Snapshot:
        """Before a run_command: the root's listing, and a blob of each file of at most
        `COMMAND_FILE_MAX_BYTES` (read only when its size or mtime changed since)."""
        files = self._listing()
        if files is None:
            note = (
                f"[checkpoint: the root has more than {COMMAND_MAX_FILES} files, so what "
                "this command changes is not kept and cannot be undone]"
            )
            return Snapshot({}, {}, note)
        kept: dict[str, str] = {}
        for relative, (size, mtime, _) in files.items():
            if size > COMMAND_FILE_MAX_BYTES:
                continue
            seen = self._seen.get(relative)
            if seen is not None and seen[:2] == (size, mtime):
                kept[relative] = seen[2]  # its blob is checked in settle_command, if it changed
                continue
            try:
                state = self.state_of(relative, keep=True, sync=False)
            except OSError:
                continue
            if state.sha256 is not None:
                kept[relative] = state.sha256
                self._seen[relative] = (size, mtime, state.sha256)
        return Snapshot(files, kept)

    def settle_command(self, owner: Owner, before: Snapshot) -> str:
        """After a run_command: record each file it created, changed or removed in
        `owner`'s group (prior state from `before`), blobs synced first. Returns a
        note for the result when a limit applied, else ""."""
        if before.note:
            return before.note
        after = self._listing()
        if after is None:
            return f"[checkpoint: the root now has more than {COMMAND_MAX_FILES} files; not kept]"
        changed = sorted(
            p for p in set(before.files) | set(after) if before.files.get(p) != after.get(p)
        )
        if not changed:
            return ""
        os.sync()  # the blobs snapshot wrote without fsync
        big = []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                group = self._group(owner)
                for path in changed:
                    old = before.files.get(path)
                    # a blob another process's collection deleted counts as not kept
                    missing = path in before.kept and not self._blob(before.kept[path]).exists()
                    if old is not None and (path not in before.kept or missing):
                        self._seen.pop(path, None)
                        big.append(path)
                        continue
                    prior = ABSENT if old is None else State(before.kept[path], old[2])
                    self._note_size(prior.sha256)
                    now = self.state_of(path)
                    self._db.execute(
                        "INSERT OR IGNORE INTO entries (group_id, path, prior_sha, prior_mode) "
                        "VALUES (?, ?, ?, ?)",
                        (group, path, prior.sha256, prior.mode),
                    )
                    self._db.execute(
                        "UPDATE entries SET settled = 1, after_sha = ?, after_mode = ? "
                        "WHERE group_id = ? AND path = ?",
                        (now.sha256, now.mode, group, path),
                    )
                self._evict()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        if big:
            return (
                f"[checkpoint: {', '.join(big)} changed but was over "
                f"{COMMAND_FILE_MAX_BYTES} bytes before; that change cannot be undone]"
            )
        return ""

    # -- eviction, undo ------------------------------------------------------

    def _note_size(self, sha: str | None) -> None:
        if sha is not None:
            self._db.execute(
                "INSERT OR IGNORE INTO sizes (sha, size) VALUES (?, ?)", (sha, self._size(sha))
            )

    def _evict(self) -> None:
        """Drop groups past the limits (`plan.to_evict`); cheap while within them."""
        total, oldest, count = self._db.execute(
            "SELECT (SELECT COALESCE(SUM(size), 0) FROM sizes), "
            "(SELECT MIN(created) FROM groups), (SELECT COUNT(*) FROM groups)"
        ).fetchone()
        now = time.time()
        within = total <= self.max_bytes and (oldest is None or now - oldest <= MAX_AGE_S)
        if within or count < 2:
            if now - self._collected > COLLECT_EVERY_S:
                self._collect()
            return
        rows = self._db.execute("SELECT id, created FROM groups ORDER BY id").fetchall()
        sizes = []
        for group, created in rows:
            shas = self._db.execute(
                "SELECT DISTINCT prior_sha FROM entries WHERE group_id = ? "
                "AND prior_sha IS NOT NULL",
                (group,),
            ).fetchall()
            size = sum(self._size(sha) for (sha,) in shas)
            sizes.append((int(group), float(created), size))
        for group in to_evict(sizes, now, self.max_bytes, MAX_AGE_S):
            self._db.execute("DELETE FROM entries WHERE group_id = ?", (group,))
            self._db.execute("DELETE FROM groups WHERE id = ?", (group,))
        self._collect()

    def _size(self, sha: str) -> int:
        try:
            return self._blob(sha).stat().st_size
        except OSError:
            return 0

    def _collect(self) -> None:
        """Delete the blobs no entry refers to (a run_command's unused ones too)."""
        used = {
            row[0]
            for row in self._db.execute("SELECT prior_sha FROM entries WHERE prior_sha IS NOT NULL")
        }
        self._db.execute(
            "DELETE FROM sizes WHERE sha NOT IN "
            "(SELECT prior_sha FROM entries WHERE prior_sha IS NOT NULL)"
        )
        self._collected = time.time()
        used |= {sha for _, _, sha in self._seen.values()}
        for folder in self.blobs.iterdir():
            for blob in folder.iterdir():
                if folder.name + blob.name not in used and not blob.name.startswith("."):
                    blob.unlink(missing_ok=True)

    def undo(self, groups: Sequence[int], write: WriteFile, *, force: bool = False) -> list[str]:
        """Take back `groups` (newest first): every path they changed goes back to its
        state before the oldest of them; one line per path. The undo is itself a
        group (kind "undo"), so undoing it redoes. `write(relative, data)` writes a
        file atomically (the sandbox's `write_atomic`).

        Raises:
            UndoConflict: a path changed since (unless `force`); nothing was touched.
            GbrError: a blob is missing (nothing was touched), or an OS failure.
        """
        with self._lock:
            entries: list[Entry] = []
            for group in groups:
                rows = self._db.execute(
                    "SELECT path, prior_sha, prior_mode, settled, after_sha, after_mode "
                    "FROM entries WHERE group_id = ?",
                    (group,),
                ).fetchall()
                for path, prior_sha, prior_mode, settled, after_sha, after_mode in rows:
                    after = State(after_sha, after_mode) if settled else None
                    entries.append(Entry(group, path, State(prior_sha, prior_mode), after))
            entries = [e for e in entries if not excluded(e.path)]
            current = {e.path: self.state_of(e.path) for e in entries}
            plan = undo_plan(entries, current)
            if plan.conflicts and not force:
                raise UndoConflict(plan.conflicts)
            contents = {
                s.path: self.content(s.target.sha256)
                for s in plan.steps
                if s.target.sha256 is not None
            }
            label = ", ".join(str(g) for g in groups)
            owner = Owner("undo", f"undo of {label}", f"undo {time.time_ns()}")
            paths = [s.path for s in plan.steps]
            undo_group = self.begin(owner, paths)
            try:
                for step in plan.steps:
                    target = self.root / step.path
                    if step.target.absent:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(target)
                    else:
                        write(step.path, contents[step.path])
                        os.chmod(target, step.target.mode or 0o644)
            finally:
                self.settle(undo_group, paths)
                marks = ",".join("?" for _ in groups)
                self._db.execute(f"UPDATE groups SET undone = 1 WHERE id IN ({marks})", groups)
            return [s.said for s in plan.steps]


def keeping(
    store: CheckpointStore | None, owner: Callable[[], Owner], relatives: Sequence[str]
) -> contextlib.AbstractContextManager[None]:
    """`store.changing(owner(), relatives)`, or nothing when there is no store (a
    registry built without one: tests, `gbr-node tool` outside a project)."""
    if store is None:
        return contextlib.nullcontext()
    return store.changing(owner(), relatives)


def take_back(
    store: CheckpointStore,
    sandbox: Sandbox,
    *,
    turns: int = 1,
    group: int | None = None,
    peer: str | None = None,
    force: bool = False,
) -> list[str]:
    """The person's undo (`/undo [N]`, `gbr-node undo [--turn ID | --peer ALIAS]`;
    GBR-UNDO-01): select the groups (`CheckpointStore.select`) and undo them, writing
    through `sandbox.write_atomic`. One line per path. Raises NothingToUndo,
    UndoConflict (nothing touched), GbrError. Never offered as a tool."""
    chosen = store.select(turns=turns, group=group, peer=peer)
    return store.undo(
        chosen,
        lambda relative, data: sandbox.write_atomic(sandbox.root / relative, data),
        force=force,
    )
