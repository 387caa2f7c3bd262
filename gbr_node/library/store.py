"""The library index on disk: SQLite with an FTS5 table, in `.gbr/library.db` (issue 18).

Tables: `dists` (one row per indexed distribution, with the fingerprint it
was indexed at), `files`, `entries` (one per definition), `aliases` (every
import path of an entry, for exact look-ups) and three full-text tables searched
with `bm25()` and column weights, name above path above signature above
docstring (`WEIGHTS`): `fts_names` (name and path, short) and `fts_docs`
(signature and docstring, long). One distribution is written in one transaction,
so a reader (another thread or node process, WAL mode) sees it whole or not
at all. A database of another schema version is rebuilt from scratch.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gbr_node.errors import LibraryError
from gbr_node.library.build import Built
from gbr_node.library.hit import Hit
from gbr_node.library.words import name_words, split_identifier

SCHEMA_VERSION = "2"
WEIGHTS = (4.0, 2.0, 1.5, 1.0, 0.25)
"""Weights of the bm25 score of the name, path, signature, docstring and `more`
columns (`more`: the rest of the docstring and a class's method names, issue 33).

FTS5's `bm25(t, w...)` adds weighted term counts before saturating them (k1 =
1.2), so even a 10:1 weight makes a name match barely twice a docstring match;
and it normalises by the length of the whole row, so a long docstring would
bury a name match. The score is therefore the weighted sum of one bm25 per
column (`bm25(fts_names, 1, 0, 0)` is the name column's), and the long
columns live in a table of their own: the weights keep their ratios (issue
18, "Ranking")."""
BUSY_TIMEOUT_S = 30.0
POOL = 300
"""Rows taken from each full-text table before their scores are added up."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS dists(
    id INTEGER PRIMARY KEY, dist_info TEXT UNIQUE, fingerprint TEXT, name TEXT, key TEXT,
    version TEXT, base TEXT, top_level TEXT, skipped TEXT);
CREATE TABLE IF NOT EXISTS files(id INTEGER PRIMARY KEY, dist_id INTEGER, path TEXT);
CREATE INDEX IF NOT EXISTS files_path ON files(path);
CREATE TABLE IF NOT EXISTS entries(
    id INTEGER PRIMARY KEY, dist_id INTEGER, file_id INTEGER, qualname TEXT, name TEXT,
    kind TEXT, signature TEXT, bases TEXT, doc TEXT, line INTEGER, end_line INTEGER,
    factor REAL);
CREATE INDEX IF NOT EXISTS entries_name ON entries(name COLLATE NOCASE);
CREATE INDEX IF NOT EXISTS entries_dist ON entries(dist_id);
CREATE TABLE IF NOT EXISTS aliases(path TEXT, entry_id INTEGER);
CREATE INDEX IF NOT EXISTS aliases_path ON aliases(path);
CREATE VIRTUAL TABLE IF NOT EXISTS fts_names USING fts5(
    name, path, dist, factor UNINDEXED, tokenize = 'porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS fts_docs USING fts5(
    signature, doc, dist, factor UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS fts_more USING fts5(
    more, dist, factor UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2');
"""


@dataclass(frozen=True)
class DistRow:
    """An indexed distribution as stored."""

    id: int
    dist_info: str
    fingerprint: str
    name: str
    key: str
    version: str
    base: str
    top_level: tuple[str, ...]
    skipped: tuple[str, ...]


def dist_token(dist_id: int) -> str:
    """The token in the full-text tables' `dist` column that a package filter matches."""
    return f"d{dist_id}x"


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the index at `path`. Raises LibraryError when the
    file cannot be opened or SQLite lacks FTS5."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        version = None
        try:
            row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            version = row[0] if row else None
        except sqlite3.OperationalError:
            pass
        if version != SCHEMA_VERSION:
            for table in ("meta", "dists", "files", "entries", "aliases", *_FTS):
                db.execute(f"DROP TABLE IF EXISTS {table}")
        db.executescript(_SCHEMA)
        db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        db.commit()
        return db
    except sqlite3.Error as exc:
        raise LibraryError(f"cannot open the library index {path}: {exc}") from exc


def _dist_row(row: Sequence[Any]) -> DistRow:
    return DistRow(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        row[5],
        row[6],
        tuple(row[7].split()),
        tuple(s for s in row[8].split("\n") if s),
    )


def dists(db: sqlite3.Connection) -> list[DistRow]:
    """Every indexed distribution, by name."""
    rows = db.execute(
        "SELECT id, dist_info, fingerprint, name, key, version, base, top_level, skipped "
        "FROM dists ORDER BY key"
    )
    return [_dist_row(r) for r in rows]


def delete_dist(db: sqlite3.Connection, dist_id: int) -> None:
    """Remove a distribution and everything indexed from it (inside the caller's transaction)."""
    for table in _FTS:
        db.execute(
            f"DELETE FROM {table} WHERE rowid IN (SELECT id FROM entries WHERE dist_id=?)",
            (dist_id,),
        )
    db.execute(
        "DELETE FROM aliases WHERE entry_id IN (SELECT id FROM entries WHERE dist_id=?)",
        (dist_id,),
    )
    db.execute("DELETE FROM entries WHERE dist_id=?", (dist_id,))
    db.execute("DELETE FROM files WHERE dist_id=?", (dist_id,))
    db.execute("DELETE FROM dists WHERE id=?", (dist_id,))


def write_dist(
    db: sqlite3.Connection,
    *,
    dist_info: str,
    fingerprint: str,
    name: str,
    key: str,
    version: str,
    base: str,
    built: Built,
) -> int:
    """Replace what is indexed for `dist_info` with `built` (inside the caller's
    transaction); returns the distribution's id."""
    old = db.execute("SELECT id FROM dists WHERE dist_info=?", (dist_info,)).fetchone()
    if old:
        delete_dist(db, old[0])
    cursor = db.execute(
        "INSERT INTO dists(dist_info, fingerprint, name, key, version, base, top_level, skipped)"
        " VALUES (?,?,?,?,?,?,?,?)",
        (
            dist_info,
            fingerprint,
            name,
            key,
            version,
            base,
            " ".join(built.top_level),
            "\n".join(built.skipped),
        ),
    )
    dist_id = cursor.lastrowid
    assert dist_id is not None  # set by every INSERT (sqlite3 docs)
    token = dist_token(dist_id)
    file_ids: dict[str, int] = {}
    for row in built.rows:
        if row.file not in file_ids:
            file_id = db.execute(
                "INSERT INTO files(dist_id, path) VALUES (?, ?)", (dist_id, row.file)
            ).lastrowid
            assert file_id is not None
            file_ids[row.file] = file_id
    start = (db.execute("SELECT COALESCE(MAX(id), 0) FROM entries").fetchone()[0]) + 1
    entries: list[tuple[Any, ...]] = []
    aliases: list[tuple[Any, ...]] = []
    names: list[tuple[Any, ...]] = []
    docs: list[tuple[Any, ...]] = []
    more: list[tuple[Any, ...]] = []
    for offset, row in enumerate(built.rows):
        entry_id = start + offset
        entries.append(
            (
                entry_id,
                dist_id,
                file_ids[row.file],
                row.qualname,
                row.name,
                row.kind,
                row.signature,
                row.bases,
                row.doc,
                row.line,
                row.end_line,
                row.factor,
            )
        )
        aliases.extend((alias, entry_id) for alias in row.aliases)
        paths = " ".join([*(" ".join(split_identifier(a)) for a in row.aliases), row.apart])
        signature = " ".join(split_identifier(f"{row.params} {row.bases}"))
        names.append((entry_id, name_words(row.name), paths, token, row.factor))
        docs.append((entry_id, signature, row.doc, token, row.factor))
        if row.more:
            more.append((entry_id, " ".join(split_identifier(row.more)), token, row.factor))
    db.executemany("INSERT INTO entries VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", entries)
    db.executemany("INSERT INTO aliases VALUES (?, ?)", aliases)
    db.executemany(
        "INSERT INTO fts_names(rowid, name, path, dist, factor) VALUES (?,?,?,?,?)", names
    )
    db.executemany(
        "INSERT INTO fts_docs(rowid, signature, doc, dist, factor) VALUES (?,?,?,?,?)", docs
    )
    db.executemany("INSERT INTO fts_more(rowid, more, dist, factor) VALUES (?,?,?,?)", more)
    return dist_id


_FTS = ("fts_names", "fts_docs", "fts_more")
_NAMES_SCORE = f"{WEIGHTS[0]} * bm25(fts_names, 1, 0, 0) + {WEIGHTS[1]} * bm25(fts_names, 0, 1, 0)"
_DOCS_SCORE = f"{WEIGHTS[2]} * bm25(fts_docs, 1, 0, 0) + {WEIGHTS[3]} * bm25(fts_docs, 0, 1, 0)"
_MORE_SCORE = f"{WEIGHTS[4]} * bm25(fts_more, 1, 0)"
_HIT_COLUMNS = (
    "e.id, e.qualname, e.kind, e.signature, e.bases, e.doc, f.path, d.base, e.line, "
    "e.end_line, d.name, d.version"
)
_HIT_FROM = "entries e JOIN files f ON f.id = e.file_id JOIN dists d ON d.id = e.dist_id"


def _hit(row: Sequence[Any], score: float = 0.0) -> Hit:
    return Hit(*row, score=score)  # type: ignore[misc]  # row holds the fields before score


def _scores(
    db: sqlite3.Connection, table: str, score: str, expression: str, limit: int
) -> dict[int, float]:
    rows = db.execute(
        f"SELECT rowid, ({score}) * factor AS s FROM {table} WHERE {table} MATCH ? "
        "ORDER BY s LIMIT ?",
        (expression, limit),
    )
    return {rowid: -value for rowid, value in rows}


def row_count(db: sqlite3.Connection, expression: str) -> int:
    """How many rows of the short table match `expression` (a cost estimate)."""
    count: int = db.execute(
        "SELECT count(*) FROM fts_names WHERE fts_names MATCH ?", (expression,)
    ).fetchone()[0]
    return count


def match(db: sqlite3.Connection, expression: str, limit: int) -> list[tuple[int, float]]:
    """(entry id, score) of the best `limit` rows for an FTS5 MATCH expression,
    best first. The score (higher is better) is the weighted sum of the
    columns' bm25 (`WEIGHTS`) times the row's rank factor, added up over the
    best POOL rows of each table (a row outside one table's pool counts 0 there)."""
    names = _scores(db, "fts_names", _NAMES_SCORE, expression, POOL)
    docs = _scores(db, "fts_docs", _DOCS_SCORE, expression, POOL)
    more = _scores(db, "fts_more", _MORE_SCORE, expression, POOL)
    total = {
        i: names.get(i, 0.0) + docs.get(i, 0.0) + more.get(i, 0.0) for i in {*names, *docs, *more}
    }
    return sorted(total.items(), key=lambda item: -item[1])[:limit]


def hits(db: sqlite3.Connection, scored: Iterable[tuple[int, float]]) -> list[Hit]:
    """The `Hit`s of (entry id, score) pairs, in the order given."""
    scored = list(scored)
    if not scored:
        return []
    marks = ",".join("?" * len(scored))
    rows = db.execute(
        f"SELECT {_HIT_COLUMNS} FROM {_HIT_FROM} WHERE e.id IN ({marks})",
        [entry_id for entry_id, _ in scored],
    )
    by_id = {row[0]: row for row in rows}
    return [_hit(by_id[i], s) for i, s in scored if i in by_id]


def by_alias(db: sqlite3.Connection, path: str) -> list[Hit]:
    """Entries one of whose import paths is exactly `path`, best-ranked first."""
    rows = db.execute(
        f"SELECT {_HIT_COLUMNS} FROM aliases a, {_HIT_FROM} "
        "WHERE e.id = a.entry_id AND a.path = ? ORDER BY e.factor DESC, e.qualname = a.path DESC",
        (path,),
    )
    return [_hit(r) for r in rows]


def by_name(db: sqlite3.Connection, name: str, limit: int = 50) -> list[Hit]:
    """Entries whose last name component is `name` (any case), public ones first."""
    rows = db.execute(
        f"SELECT {_HIT_COLUMNS} FROM {_HIT_FROM} WHERE e.name = ? COLLATE NOCASE "
        "ORDER BY e.factor DESC LIMIT ?",
        (name, limit),
    )
    return [_hit(r) for r in rows]


def file_of(db: sqlite3.Connection, path: str) -> list[tuple[str, str, str, str]]:
    """(base, relative path, dist name, version) of indexed files whose relative
    path is `path`."""
    return list(
        db.execute(
            "SELECT d.base, f.path, d.name, d.version FROM files f "
            "JOIN dists d ON d.id = f.dist_id WHERE f.path = ?",
            (path,),
        )
    )
