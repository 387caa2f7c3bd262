"""The library as the node uses it: opened from a profile's `[library]`, and
looked up before the first inference (issue 18, "Library first in the agent").

`open_library` makes the `LibraryIndex` of a profile (`.gbr/library.db` in
the project folder). `prelookup` is the node's own lookup for a message that
names an installed distribution or one of its public names: it indexes those
distributions first if need be (the rest can wait), searches with the message
as the query, and returns a bounded context block for the request and the
one status line the person sees (`library: 5 hits in httpx==0.28.1`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from gbr_node.config.profile import LibraryConfig
from gbr_node.library.environments import site_dirs
from gbr_node.library.index import LibraryIndex
from gbr_node.library.present import context_block, status_line
from gbr_node.library.words import normalise

PRELOOKUP_HITS = 8
WINDOW_SHARE = 0.1
"""The largest share of the model's window the pre-lookup block may take."""
SMALL_WINDOW = 8192
"""Below this window (tokens) a block is added only for a package named outright."""
DB_NAME = "library.db"


@dataclass(frozen=True)
class Prelookup:
    """What the node adds to a message: `context` (the block put before it) and
    `status` (the line shown)."""

    context: str
    status: str


def db_path(project_dir: Path) -> Path:
    """Where a project's library index lives: `.gbr/library.db`."""
    return project_dir / ".gbr" / DB_NAME


def open_library(
    project_dir: Path, config: LibraryConfig, root: Path | None = None
) -> LibraryIndex:
    """The index of `config`'s environments (default: the project's `.venv`,
    else this interpreter) and source folders, relative to `project_dir`;
    an editable install of the project itself (sources under `root`, the
    sandbox's folder) is left out. Nothing is read yet: environments are
    found at the first refresh."""

    specs = config.environments if config.environments is not None else (None,)
    finders = [functools.partial(site_dirs, spec, project_dir, root) for spec in specs]
    sources = [project_dir / folder for folder in config.sources]
    return LibraryIndex(db_path(project_dir), finders, sources, project=root)


def block_tokens(window: int | None, cap: int, explicit: bool) -> int:
    """The most tokens the pre-lookup block may take (issue 33): `cap` (the
    profile's `[library] context_tokens`), at most WINDOW_SHARE of the model's
    `window`, and nothing below SMALL_WINDOW tokens unless the message named a
    package outright (`explicit`). `window` None: unknown, `cap` alone."""
    if window is None:
        return cap
    if window < SMALL_WINDOW and not explicit:
        return 0
    return min(cap, int(window * WINDOW_SHARE))


def prelookup(
    index: LibraryIndex,
    text: str,
    max_tokens: int,
    window: int | None = None,
    local: frozenset[str] = frozenset(),
) -> Prelookup | None:
    """The lookup for a person's message, or None when it names no installed
    package nor public name as code (`LibraryIndex.mentions`; the project's own
    names, `local`, are not the libraries'), when the window
    leaves it no room (`block_tokens`), or when nothing was found. The
    definitions it spells come first, then what a search of the message finds
    in the packages it names. Blocking (indexes the named distributions when
    they are new or changed); raises LibraryError."""
    mentions = index.mentions(text, local)
    if not mentions.packages:
        return None
    budget = block_tokens(window, max_tokens, mentions.explicit)
    if budget <= 0:
        return None
    report = index.refresh(only=mentions.packages)
    if report.indexed:
        mentions = index.mentions(text, local)  # names of a package indexed just now
    named = [h for name in mentions.names for h in index.exact(name)[:1]]
    hits = index.search(text, package=mentions.packages[0], limit=PRELOOKUP_HITS)
    hits = [h for h in hits if normalise(h.dist) in mentions.packages]
    seen = {h.entry_id for h in named}
    hits = named + [h for h in hits if h.entry_id not in seen]
    block, kept = context_block(hits[:PRELOOKUP_HITS], budget)
    return Prelookup(block, status_line(kept)) if kept else None
