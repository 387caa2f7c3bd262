"""The library index a node keeps: kept up to date, searched, read (issue 18, STD-AI-01).

`LibraryIndex` owns `.gbr/library.db` for one set of environments (site
folders) and extra source folders. `refresh` re-checks what is installed
(one `scandir` per site folder and a `stat` per distribution) and re-indexes
only distributions whose fingerprint changed, so a `pip install` is picked
up by the next lookup (the tools and `/lib` call it before searching). All
methods block
(SQLite, file reads): call them from a worker thread in async code. They are
thread-safe: writes are serialised by a lock, each thread reads through its
own connection.
"""

from __future__ import annotations

import builtins
import multiprocessing
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from gbr_node.errors import LibraryError
from gbr_node.library import store
from gbr_node.library.build import Built, build_distribution
from gbr_node.library.environments import (
    Distribution,
    Installed,
    read_distribution,
    scan_site,
    trusted_site,
)
from gbr_node.library.hit import Hit
from gbr_node.library.mention import candidates
from gbr_node.library.rank import Plan, plan_query, rerank
from gbr_node.library.sources import scan_sources
from gbr_node.library.words import named_identifiers, normalise

CANDIDATES = 200
DEFAULT_LIMIT = 10
MAX_LIMIT = 50
READ_DEFAULT_LINES = 80
READ_MAX_LINES = 400
PARALLEL_FROM = 8
MEMBER_VOTE = 0.8
MAX_MATCHED = 6000
_BUILTINS = frozenset(dir(builtins))
_MEMBERS = frozenset({"method", "property", "attribute"})  # kinds that live on a class


@dataclass
class RefreshReport:
    """What one `refresh` did: distributions indexed, removed and found
    unchanged, the files skipped while indexing, and the time it took (seconds)."""

    indexed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass(frozen=True)
class Mentions:
    """What a message names: installed packages (`packages`, normalised
    distribution names) and public names of them it spells as code (`names`);
    `explicit` when a package is named outright (an import, backticks, a
    dotted path, its name next to a word like library), not only through one
    of its names."""

    packages: tuple[str, ...]
    names: tuple[str, ...]
    explicit: bool = False


@dataclass(frozen=True)
class Miss:
    """An identifier a query named that nothing installed defines: `name` (its
    last part), `spelled` (as written) and `where` it was looked for."""

    name: str
    spelled: str
    where: str


class LibraryIndex:
    """The index of `sites` (site-packages folders) and `sources` (plain-text
    source folders), stored at `db_path`.

    Each of `sites` is a folder or a function giving folders, called once, at
    the first refresh (finding an interpreter's folders runs it): an error it
    raises (LibraryError) is kept in `problems` and that environment is left
    out, the others are indexed. An editable install of the `project` itself
    (its sources inside that folder) is left out: the project is the
    sandbox's to govern (read_file, search_text), not a library. `workers` processes
    (default: 2, or 1 on a single core) parse a large batch of distributions.
    Raises LibraryError from any method when the database cannot be opened.
    """

    def __init__(
        self,
        db_path: Path,
        sites: Iterable[Path | Callable[[], Iterable[Path]]],
        sources: Iterable[Path] = (),
        workers: int | None = None,
        project: Path | None = None,
    ) -> None:
        self.db_path = db_path
        self._site_specs = tuple(sites)
        self._sites: tuple[Path, ...] | None = None
        self.sources = tuple(sources)
        self.project = project
        self.problems: list[str] = []
        self._closing = threading.Event()
        self.workers = workers if workers is not None else min(2, os.cpu_count() or 1)
        self._write = threading.Lock()
        self._local = threading.local()
        self._names: dict[str, str] | None = None
        self._dists: list[store.DistRow] | None = None

    # -- keeping it current ---------------------------------------------------

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = store.connect(self.db_path)
        return db

    @property
    def sites(self) -> tuple[Path, ...]:
        """The site-packages folders indexed (found at first use)."""
        if self._sites is None:
            found: list[Path] = []
            for spec in self._site_specs:
                try:
                    paths = list(spec()) if callable(spec) else [spec]
                except LibraryError as exc:
                    self.problems.append(str(exc))
                    continue
                found += [p for p in paths if p not in found]
            self._sites = tuple(found)
        return self._sites

    def installed(self) -> list[Installed]:
        """Every distribution of the configured folders, cheaply (no file read)."""
        found = [
            i
            for site in self.sites
            for i in scan_site(site, trusted=trusted_site(site, self.project))
        ]
        if self.project is not None:
            project = str(self.project)
            found = [i for i in found if i.base is None or not _inside(str(i.base), project)]
        return found + scan_sources(self.sources)

    def refresh(self, only: Iterable[str] | None = None) -> RefreshReport:
        """Index what changed since the last call; remove what was uninstalled.

        `only` restricts indexing to those distributions (normalised names;
        nothing is removed then): the quick path of a lookup that names a
        package while the rest is still to be indexed.
        """
        started = time.perf_counter()
        report = RefreshReport()
        wanted = None if only is None else {normalise(n) for n in only}
        with self._write:
            db = self._db()
            known = {d.dist_info: d for d in store.dists(db)}
            installed = self.installed()
            todo: list[tuple[Installed, Distribution]] = []
            for item in installed:
                old = known.get(str(item.dist_info))
                if old is not None and old.fingerprint == item.fingerprint:
                    report.unchanged += 1
                    continue
                named = item.source.name if item.source else _dist_info_name(item)
                if wanted is not None and normalise(named) not in wanted:
                    continue
                todo.append((item, read_distribution(item) if not item.source else item.source))
            for (item, dist), built in self._build_all(todo):  # stops early on close()
                with db:
                    store.write_dist(
                        db,
                        dist_info=str(item.dist_info),
                        fingerprint=item.fingerprint,
                        name=dist.name,
                        key=dist.key,
                        version=dist.version,
                        base=str(dist.base),
                        built=built,
                    )
                report.indexed.append(f"{dist.name}=={dist.version}")
                report.skipped.extend(f"{dist.name}: {s}" for s in built.skipped)
            if wanted is None and not self._closing.is_set():
                present = {str(i.dist_info) for i in installed}
                with db:
                    for dist_info, old in known.items():
                        if dist_info not in present:
                            store.delete_dist(db, old.id)
                            report.removed.append(f"{old.name}=={old.version}")
            self._names = self._dists = None
        report.seconds = time.perf_counter() - started
        return report

    def _build_all(
        self, todo: list[tuple[Installed, Distribution]]
    ) -> Iterator[tuple[tuple[Installed, Distribution], Built]]:
        """`build_distribution` of each, in order; in `workers` processes (spawned,
        never forked: the node has threads) when there are PARALLEL_FROM or more."""
        if self.workers < 2 or len(todo) < PARALLEL_FROM:
            for pair in todo:
                if self._closing.is_set():
                    return
                yield pair, build_distribution(pair[1])
            return
        context = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(self.workers, mp_context=context)
        try:
            futures = [pool.submit(build_distribution, dist) for _, dist in todo]
            for pair, future in zip(todo, futures, strict=True):
                if self._closing.is_set():
                    return
                yield pair, future.result()
        finally:
            pool.shutdown(wait=not self._closing.is_set(), cancel_futures=True)

    def close(self) -> None:
        """Stop a refresh in progress after the distribution it is on (the node is
        leaving: a cold build must not hold its exit). What was written stays."""
        self._closing.set()

    def pending(self) -> list[str]:
        """Normalised names of installed distributions not indexed at their
        current fingerprint (what a full `refresh` would index)."""
        known = {d.dist_info: d.fingerprint for d in store.dists(self._db())}
        return [
            str(i.dist_info)
            for i in self.installed()
            if known.get(str(i.dist_info)) != i.fingerprint
        ]

    def _indexed(self) -> list[store.DistRow]:
        if self._dists is None:
            self._dists = store.dists(self._db())
        return self._dists

    def package_names(self, fresh: bool = False) -> dict[str, str]:
        """Every lower-case way of naming an installed package (normalised name,
        name with `_`, top-level modules once indexed) -> normalised name.
        Packages not indexed yet are named by their `*.dist-info` folder. Kept
        until the next `refresh`, or looked at again when `fresh`."""
        if self._names is None or fresh:
            installed = self.installed()
            names: dict[str, str] = {}
            for dist in self._indexed():
                for alias in (dist.key, dist.key.replace("-", "_"), *dist.top_level):
                    names.setdefault(alias.lower(), dist.key)
            for item in installed:
                key = normalise(item.source.name if item.source else _dist_info_name(item))
                names.setdefault(key, key)
                names.setdefault(key.replace("-", "_"), key)
            self._names = names
        return self._names

    # -- looking things up ----------------------------------------------------

    def search(
        self, query: str, package: str | None = None, limit: int = DEFAULT_LIMIT
    ) -> list[Hit]:
        """The best `limit` (1..MAX_LIMIT) definitions for `query`, best first.

        `package` (a distribution or import name) ranks that distribution's
        hits first; a package named in the query does the same. Does not
        refresh: call `refresh` first for a fresh view. LibraryError when
        `package` names nothing installed: hits of other libraries would answer
        a question about one that is not there (a model asked for `debug` in
        python-dotenv, not installed, and was given psutil's).
        """
        limit = max(1, min(limit, MAX_LIMIT))
        db = self._db()
        names = self.package_names()
        if package is not None and not {package.lower(), normalise(package)} & names.keys():
            raise LibraryError(
                f"no installed library is named {package!r}: nothing of it to search (leave "
                "out package to search every library; the project's own files are read with "
                "read_file and search_text)"
            )
        plan = _affordable(db, plan_query(query, names, package))
        if plan.expression is None:
            return []
        dists = self._indexed()
        keys = {d.name: d.key for d in dists}
        ids = {d.key: d.id for d in dists}
        scored: list[tuple[int, float]] = []
        wanted = [ids[k] for k in plan.packages if k in ids]
        if wanted:
            tokens = " OR ".join(store.dist_token(i) for i in wanted)
            scored += store.match(db, f"dist : ({tokens}) AND ({plan.expression})", CANDIDATES)
        if len(scored) < limit:  # the named packages rank first: others only fill up
            scored += store.match(db, plan.expression, CANDIDATES)
        top = max((s for _, s in scored), default=1.0)
        for ident in plan.identifiers:  # spelled out in full: as good as the best match
            scored += [(h.entry_id, top) for h in store.by_alias(db, ident)]
        found = store.hits(db, _best_scores(scored))
        if plan.wants:
            found += self._owners(db, found)
        return rerank(found, plan, keys, limit)

    def _owners(self, db: sqlite3.Connection, found: list[Hit]) -> list[Hit]:
        """For a question after a class: the classes of the members found, each
        scored MEMBER_VOTE x its best member's score (a class is also known by
        what it does: `Live.update` speaks for `Live`)."""
        owners: dict[str, float] = {}
        for hit in found:
            if hit.kind in ("method", "property", "attribute"):
                owner = hit.qualname.rpartition(".")[0]
                owners[owner] = max(owners.get(owner, 0.0), hit.score * MEMBER_VOTE)
        out = []
        for owner, score in owners.items():
            out += [
                replace(h, score=score) for h in store.by_alias(db, owner)[:1] if h.kind == "class"
            ]
        return out

    def mentions(self, text: str, local: frozenset[str] = frozenset()) -> Mentions:
        """The installed packages `text` names and the public names of them it
        spells as code (`mention.candidates`: an import, backticks, a call, a
        dotted name, a snake_case or CamelCase identifier, or a package's own name
        next to a word like library or package). A builtin's name (`print(`) is
        not a library's, nor is a class's member for a bare call (`is_even(n)`);
        a plain word, a file name and a module that shares its name with a file
        extension never count (issue 33); nor does a name of the project's own,
        `local` (`mention.project_names`), written as code or its head."""
        names = self.package_names(fresh=True)
        packages: list[str] = []
        spelled: list[str] = []
        explicit = False
        db = self._db()
        for candidate in candidates(text):
            word = candidate.text
            if candidate.how != "word" and word.partition(".")[0] in local:
                continue  # the project's own code (`fetch()` of its client.py)
            head = word.partition(".")[0].lower()
            if candidate.how == "word" or (head in names and candidate.how != "code"):
                key = names.get(head) if candidate.how != "word" else names.get(word.lower())
                if key is None:
                    continue
                explicit = explicit or candidate.explicit or "." in word
                packages += [key] if key not in packages else []
                if "." in word:
                    spelled.append(word)
                continue
            if candidate.how == "import" and head not in names:
                continue  # `import data`: only a module of an installed package counts
            if "." not in word and (word in _BUILTINS or len(word) < 3):
                continue
            found = [h for h in store.by_alias(db, word) if not _private(h)] or [
                h for h in self._defined(db, word) if not _private(h)
            ]
            if candidate.how == "call" and "." not in word:
                # `is_even(n)` spells a function or a class: a method of the same name
                # somewhere (pycryptodome's `Integer.is_even`) is not what it names.
                found = [h for h in found if h.kind not in _MEMBERS]
            if found:
                spelled.append(word)
                explicit = explicit or candidate.explicit
                key = normalise(found[0].dist)
                packages += [key] if key not in packages else []
        return Mentions(tuple(packages), tuple(spelled), explicit)

    def exact(self, name: str) -> list[Hit]:
        """The definitions `name` names exactly: an import path (`httpx.Timeout`),
        a path's tail (`Client.stream`) or a bare name (`open_nursery`, case
        counts), public ones first."""
        db = self._db()
        found = store.by_alias(db, name) or self._defined(db, name)
        return sorted(found, key=_private)

    def missing(self, query: str, package: str | None = None) -> list[Miss]:
        """The identifiers `query` spells as code (`words.named_identifiers`) that
        no indexed definition has (issue 33, "Honest misses"), each with where
        it was looked for: the distribution its head or `package` names
        (`httpx==0.28.1`), else "the installed libraries"."""
        names = self.package_names()
        dists = {d.key: d for d in self._indexed()}
        hinted = names.get(package.lower()) or normalise(package) if package else None
        out = []
        for ident in named_identifiers(query):
            head, dot, rest = ident.partition(".")
            key = names.get(head.lower()) if dot else None
            if key is not None and not rest:
                continue
            if self.exact(ident) or (key is not None and self.exact(rest)):
                continue
            where = dists.get(key or hinted or "") or next(
                (dists[k] for k in plan_query(query, names).packages if k in dists), None
            )
            place = f"{where.name}=={where.version}" if where else "the installed libraries"
            out.append(Miss(ident.rpartition(".")[2], ident, place))
        return out

    @staticmethod
    def _defined(db: sqlite3.Connection, word: str) -> list[Hit]:
        """Definitions named `word` exactly (case counts), or, for a dotted
        `Client.stream`, whose path ends with it."""
        last = word.rpartition(".")[2]
        return [
            h
            for h in store.by_name(db, last, 20)
            if h.qualname == word or h.qualname.endswith("." + word)
        ]

    def read(
        self, name_or_path: str, line: int | None = None, lines: int = READ_DEFAULT_LINES
    ) -> str:
        """The source of a definition, by import path (`httpx.Timeout`) or by
        file (`httpx/_config.py`, optionally `:LINE`), as numbered lines, at
        most `lines` (<= READ_MAX_LINES) from the definition's first line (or
        `line`). Only files this index holds can be read, and only while they
        still lie inside their folder (symlinks resolved).

        Raises LibraryError naming what was not found (with close names).
        """
        lines = max(1, min(lines, READ_MAX_LINES))
        db = self._db()
        target = name_or_path.strip()
        path, _, at = target.rpartition(":")
        if at.isdigit() and path:
            target, line = path, line or int(at)
        found = store.by_alias(db, target)
        if not found and ("/" in target or target.endswith((".py", ".pyi")) or os.sep in target):
            return self._read_file(db, target, line or 1, lines, None)
        found = found or store.by_name(db, target.rpartition(".")[2], 10)
        if not found:
            close = self.search(target, limit=5)
            hint = "; close: " + ", ".join(h.qualname for h in close) if close else ""
            raise LibraryError(f"no definition named {target!r} in the library index{hint}")
        if len(found) > 1 and found[0].qualname != target:
            names = ", ".join(f"{h.qualname} ({h.dist_version})" for h in found[:10])
            if len({h.qualname for h in found}) > 1:
                raise LibraryError(f"{target!r} is ambiguous: {names}; give the full path")
        hit = found[0]
        start = line or hit.line
        span = min(lines, max(hit.end_line - start + 1, 1)) if line is None else lines
        return self._read_file(db, hit.file, start, span, hit)

    def _read_file(
        self, db: sqlite3.Connection, target: str, start: int, count: int, hit: Hit | None
    ) -> str:
        rows = store.file_of(db, target if hit is None else hit.file)
        if hit is not None:
            rows = [r for r in rows if r[0] == hit.base] or rows
        if not rows and os.path.isabs(target):
            rows = [
                (d.base, os.path.relpath(target, d.base), d.name, d.version)
                for d in store.dists(db)
                if _inside(target, d.base)
            ]
            rows = [r for r in rows if store.file_of(db, r[1])]
        if not rows:
            raise LibraryError(f"{target!r} is not a file of the library index")
        base, rel, dist, version = rows[0]
        real = Path(base, rel).resolve()
        if not _inside(str(real), str(Path(base).resolve())):
            raise LibraryError(f"{rel} resolves outside its folder {base}; not read")
        try:
            text = real.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            raise LibraryError(f"cannot read {rel}: {exc.strerror or exc}") from exc
        start = max(1, min(start, len(text) or 1))
        end = min(len(text), start + count - 1)
        title = hit.qualname if hit is not None else rel
        header = f"# {title}  {rel}:{start}-{end} of {len(text)}  {dist}=={version}"
        body = [f"{n:>5}  {text[n - 1]}" for n in range(start, end + 1)]
        return "\n".join([header, *body])


def _affordable(db: sqlite3.Connection, plan: Plan) -> Plan:
    """The plan without its commonest words while its words match more than
    MAX_MATCHED rows together (every matched row is scored: that is the cost of a
    query); the two rarest words always stay. A dropped word still counts in
    `rerank` for the hits that contain it."""
    if len(plan.words) <= 2:
        return plan
    counts = {w: store.row_count(db, f'"{w}"') for w in plan.words}
    if sum(counts.values()) <= MAX_MATCHED:
        return plan
    kept: list[str] = []
    total = 0
    for word in sorted(plan.words, key=lambda w: counts[w]):
        if len(kept) >= 2 and total + counts[word] > MAX_MATCHED:
            break
        kept.append(word)
        total += counts[word]
    return plan.without(w for w in plan.words if w not in kept)


def _dist_info_name(item: Installed) -> str:
    """`foo_bar` of `foo_bar-1.0.dist-info` (PEP 427 escapes `-` in names as `_`)."""
    return item.dist_info.name.removesuffix(".dist-info").partition("-")[0]


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([os.path.abspath(path), os.path.abspath(folder)]) == (
            os.path.abspath(folder)
        )
    except ValueError:
        return False


def _private(hit: Hit) -> bool:
    return any(part.startswith("_") for part in hit.qualname.split("."))


def _best_scores(scored: Iterable[tuple[int, float]]) -> list[tuple[int, float]]:
    best: dict[int, float] = {}
    for entry_id, score in scored:
        best[entry_id] = max(score, best.get(entry_id, score))
    return list(best.items())
