"""`search_library` and `read_library`: the installed libraries' own source, for the
model and for peers granted them (issue 18, STD-AI-01).

Both are read-only. They read only files the library index holds (the
distributions of the profile's `[library]` environments and sources), each
checked to lie inside its folder once symlinks are resolved; they never touch
the project through this route, so no sandbox rule of the project is passed
by. Each call first re-checks the environments (`LibraryIndex.refresh`), so a
`pip install` made since the last call is searched too. A query that is the
path of something the project holds is answered with an error saying to read
it with `read_file` (a small model searched the libraries for
`requirements.txt` and answered from dnspython's TXT record).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from gbr_node.errors import GbrError, LibraryError, ToolError
from gbr_node.library.index import MAX_LIMIT, READ_DEFAULT_LINES, READ_MAX_LINES, LibraryIndex
from gbr_node.library.present import answer_text
from gbr_node.library.words import named_identifiers
from gbr_node.sandbox import Sandbox
from gbr_node.sandbox.caller import caller_is_remote
from gbr_node.tools.base import Params, Tool, ToolResult


class SearchLibraryParams(Params):
    """Arguments of search_library."""

    query: str = Field(
        min_length=1,
        max_length=500,
        description="What to look for: a name (open_nursery, httpx.Timeout, a partial name) "
        "or a question in words (how do I set a timeout).",
    )
    package: Annotated[str, Field(min_length=1, max_length=200)] | SkipJsonSchema[None] = Field(
        None, description="A distribution or import name whose definitions rank first."
    )
    limit: int = Field(10, ge=1, le=MAX_LIMIT, description="How many hits at most.")


class ReadLibraryParams(Params):
    """Arguments of read_library."""

    name_or_path: str = Field(
        min_length=1,
        max_length=1000,
        description="A qualified name as search_library shows it (httpx.Timeout, "
        "trio.Nursery.start_soon), or a file as it shows it (httpx/_config.py, optionally "
        "with :LINE).",
    )
    line: Annotated[int, Field(ge=1)] | SkipJsonSchema[None] = Field(
        None, description="First line to show (default: where the definition starts)."
    )
    lines: int = Field(
        READ_DEFAULT_LINES, ge=1, le=READ_MAX_LINES, description="How many lines at most."
    )


class LibraryTools:
    """The handlers, bound to one `LibraryIndex`; with a `project` sandbox, this node's
    own query that names one of its files or folders is refused (`_not_the_project`)."""

    def __init__(self, index: LibraryIndex, project: Sandbox | None = None) -> None:
        self._index = index
        self._project = project

    def _not_the_project(self, query: str) -> None:
        """Raise ToolError when `query` (stripped of spaces, quotes and a `:LINE`) is a
        path that exists in the project: a file, or a folder written with a `/` (a bare
        word such as `client` or `tests` may well mean a library's name): those are
        read with read_file or list_dir, not here. Only for this node's own agent and
        commands: a peer granted only the library tools learns nothing of what the
        project holds."""
        if self._project is None or caller_is_remote():
            return
        text = query.strip().strip("`'\"")
        path, _, at = text.rpartition(":")
        if not (at.isdigit() and path):
            path = text
        if not path or path.startswith("/") or path in (".", ".."):
            return
        try:
            where = self._project.resolve(path)
        except GbrError:
            return
        folder = where.path.is_dir()
        if folder and "/" not in path:
            return
        if where.path.exists() and not self._project.hidden(str(where.path)):
            kind = "folder" if folder else "file"
            tool = "list_dir" if kind == "folder" else "read_file"
            raise ToolError(
                f"{where.relative} is a {kind} of the project, not an installed library: "
                f"use {tool} for it"
            )

    def search_library(self, params: SearchLibraryParams) -> ToolResult:
        """Ranked hits, one line each (`hit_line`) with the docstring's first
        paragraph below; structured: `{"exact", "missing", "hits": [...]}`. When
        the query names an identifier nothing installed defines, the text
        starts with `no definition named NAME in DIST==VERSION` and the hits
        are marked as not matching; `exact` is then false (true when every
        identifier named is defined, null when none is named; issue 33).
        ToolError when the index cannot be read."""
        self._not_the_project(params.query)
        try:
            self._index.refresh()
            hits = self._index.search(params.query, params.package, params.limit)
            misses = self._index.missing(params.query, params.package)
        except LibraryError as exc:
            raise ToolError(str(exc)) from exc
        named = bool(named_identifiers(params.query))
        structured: dict[str, Any] = {
            "exact": (not misses) if named else None,
            "missing": [{"name": m.name, "spelled": m.spelled, "where": m.where} for m in misses],
            "hits": [
                {
                    "name": h.qualname,
                    "kind": h.kind,
                    "signature": h.signature,
                    "file": h.file,
                    "line": h.line,
                    "distribution": h.dist,
                    "version": h.version,
                    "doc": h.doc,
                }
                for h in hits
            ],
        }
        text = answer_text(hits, [(m.name, m.where) for m in misses])
        return ToolResult.text(text, structured=structured)

    def read_library(self, params: ReadLibraryParams) -> ToolResult:
        """Numbered source lines of a definition or file. ToolError when the
        name or file is not in the index, or is ambiguous, or a path of the project."""
        self._not_the_project(params.name_or_path)
        try:
            self._index.refresh()
            text = self._index.read(params.name_or_path, params.line, params.lines)
        except LibraryError as exc:
            raise ToolError(str(exc)) from exc
        return ToolResult.text(text)


def library_tools(index: LibraryIndex, project: Sandbox | None = None) -> list[Tool]:
    """The `search_library` and `read_library` tools over `index`; `project`, the
    sandbox of the project they are offered in (`LibraryTools`)."""
    handlers = LibraryTools(index, project)
    return [
        Tool(
            "search_library",
            "Search the source of the third-party libraries installed in this project's "
            "environment, not the project's own files (read_file and search_text read "
            "those). It reads from disk, never from memory: classes, functions, methods, "
            "constants with signature, file:line and dist==version. Use it before writing "
            "code that uses a library's API, and trust it over what you remember.",
            SearchLibraryParams,
            handlers.search_library,
        ),
        Tool(
            "read_library",
            "Show the installed source code of a library definition (by the qualified name "
            "search_library gave) or of a library file:line, as numbered lines.",
            ReadLibraryParams,
            handlers.read_library,
        ),
    ]
