"""The library service: the index of the profile in force, the node's own lookup
before a message goes to the model, `/lib`, and the background refresh
(issue 18, STD-AI-01).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from gbr_node.config.loader import LoadedProfile
from gbr_node.errors import GbrError, LibraryError
from gbr_node.library.index import LibraryIndex
from gbr_node.library.lookup import Prelookup, db_path, open_library, prelookup
from gbr_node.library.present import answer_text
from gbr_node.slash import Command
from gbr_node.textcells import DIM, RESET, YELLOW

log = logging.getLogger("gbr_node")
PRELOOKUP_TIMEOUT_S = 10.0
"""The longest the node's own library lookup may hold a message back (seconds)."""


class LibraryService:
    """The library index for the profile in force (`index`) and what uses it.

    `loaded` gives the profile in force, `notice` shows one line to the person.
    """

    commands = (
        Command(
            "lib",
            "QUERY",
            "search the installed libraries' source (what search_library sees)",
            needs_argument=True,
        ),
    )

    def __init__(self, loaded: Callable[[], LoadedProfile], notice: Callable[[str], None]) -> None:
        self._loaded = loaded
        self.notice = notice
        self.wanted = trio.Event()
        """Set when the library is first needed: the background refresh starts then."""
        self._for: tuple[object, ...] | None = None
        self._index: LibraryIndex | None = None

    @property
    def index(self) -> LibraryIndex:
        """The index of the profile in force; RuntimeError before the first profile."""
        if self._index is None:
            raise RuntimeError("the library has no profile yet")
        return self._index

    def apply_profile(self, loaded: LoadedProfile) -> None:
        """Open the index `loaded` asks for, unless it is the one open already (then a
        reload keeps it and its refresh); the old one's refresh stops."""
        wanted = (loaded.project_dir, loaded.profile.library, loaded.root)
        if self._for != wanted:
            if self._index is not None:
                self._index.close()  # a new [library]: the old index's refresh stops
            self._for = wanted
            self._index = open_library(loaded.project_dir, loaded.profile.library, loaded.root)

    def close(self) -> None:
        """Stop the index's refresh, so a cold build never holds the exit."""
        if self._index is not None:
            self._index.close()

    async def lookup(
        self, text: str, window: int | None, local: frozenset[str] = frozenset()
    ) -> Prelookup | None:
        """The node's own library lookup for a message, when it names an installed
        package or public name that is not one of the project's own, `local`
        (`[library] prelookup`); one status line says what
        was added. The block is sized to the model's window `window` (tokens;
        `lookup.block_tokens`: a tenth at most, none under 8k tokens unless a
        package is named outright). A lookup that fails or takes longer than
        PRELOOKUP_TIMEOUT_S gives None, and says so."""
        profile = self._loaded().profile
        config = profile.library
        if not config.prelookup or not profile.tools.is_enabled("search_library"):
            return None
        index = self.index
        found = None
        with trio.move_on_after(PRELOOKUP_TIMEOUT_S) as scope:
            try:
                found = await trio.to_thread.run_sync(  # type: ignore[call-arg]  # stale trio-typing stubs (see pyproject)
                    prelookup,
                    index,
                    text,
                    config.context_tokens,
                    window,
                    local,
                    abandon_on_cancel=True,
                )
            except LibraryError as exc:
                self.notice(f"{YELLOW}library: lookup failed: {exc}{RESET}")
                return None
        if scope.cancelled_caught:
            self.notice(f"{DIM}library: lookup skipped (indexing takes longer){RESET}")
            self.wanted.set()
        if found is None:
            return None
        self.wanted.set()  # index the rest in the background from now on
        self.notice(f"{DIM}{found.status}{RESET}")
        return found

    async def command(self, name: str, args: str) -> str:
        """`/lib QUERY`: the library search by hand (what `search_library` gives)."""
        query = args
        index = self.index
        self.wanted.set()

        def search() -> str:
            pending = len(index.pending())
            if pending > 1:
                trio.from_thread.run_sync(
                    self.notice, f"{DIM}library: indexing {pending} distributions first…{RESET}"
                )
            report = index.refresh()
            misses = [(m.name, m.where) for m in index.missing(query)]
            text = answer_text(index.search(query, limit=10), misses)
            problems = "".join(f"\n{YELLOW}{p}{RESET}" for p in index.problems)
            if report.indexed:
                took = f"indexed {len(report.indexed)} distributions in {report.seconds:.1f} s"
                return f"{DIM}library: {took}{RESET}\n{text}{problems}"
            return text + problems

        try:
            return await trio.to_thread.run_sync(search, abandon_on_cancel=True)  # type: ignore[call-arg]  # stale trio-typing stubs (see pyproject)
        except LibraryError as exc:
            raise GbrError(f"library: {exc}") from exc

    async def keep_current(self) -> None:
        """Index every distribution in the background once the library is first
        needed (a lookup, `/lib`), or at start when this project has an index
        already (then it is a quick re-check)."""
        if db_path(self._loaded().project_dir).exists():
            self.wanted.set()
        await self.wanted.wait()
        try:
            report = await trio.to_thread.run_sync(self.index.refresh, abandon_on_cancel=True)  # type: ignore[call-arg]  # stale trio-typing stubs (see pyproject)
        except LibraryError as exc:
            log.warning("library index not refreshed: %s", exc)
            return
        log.info(
            "library: %d indexed, %d removed, %d unchanged in %.1f s; skipped: %s",
            len(report.indexed),
            len(report.removed),
            report.unchanged,
            report.seconds,
            "; ".join(report.skipped[:20]) or "none",
        )
