"""`search_text`: a Python regular expression over the text files under a path.

The start path goes through `Sandbox.resolve` (UBQ-DEV-01); the walk below it
never follows symlinks (linked files and folders are skipped), skips `.git`,
binary files and files over `tools.read_max_bytes`, and stops after
MAX_MATCHES matching lines, saying so (issue 2, "Local tools"). Patterns run
under the `regex` module (re-compatible, VERSION0) for its match time limit:
a search ends after SEARCH_TIME_LIMIT_S seconds with what it found, so a
pattern with catastrophic backtracking cannot hold a worker thread and a core.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import regex
from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from gbr_node.config.profile import ToolsConfig
from gbr_node.errors import SecurityViolation, ToolError
from gbr_node.sandbox import Sandbox
from gbr_node.tools.base import Params, Tool, ToolResult
from gbr_node.tools.files import load_text

MAX_MATCHES = 200
MAX_LINE_CHARS = 300
SEARCH_TIME_LIMIT_S = 10.0
SKIPPED_FOLDERS = frozenset({".git"})


class SearchTextParams(Params):
    """Arguments of search_text."""

    pattern: str = Field(
        min_length=1,
        description="Python regular expression, matched against each line; (?i) ignores case.",
    )
    path: str = Field(".", description="File or folder to search, relative to the project root.")
    glob: Annotated[str, Field(min_length=1)] | SkipJsonSchema[None] = Field(
        None,
        description='Only files whose name matches, e.g. "*.py"; a pattern with "/" is '
        "matched against the root-relative path.",
    )


def _files(
    sandbox: Sandbox, top: Path, top_rel: str, glob: str | None
) -> Iterator[tuple[Path, str]]:
    """Regular, non-symlink files under `top`, sorted, with root-relative names; private
    paths (GBR-PRIV-01) are left out as if absent."""
    if not top.is_dir():
        yield top, top_rel
        return
    for dirpath, dirnames, filenames in os.walk(top):
        here = os.path.relpath(dirpath, top)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in SKIPPED_FOLDERS and not sandbox.hidden(os.path.join(dirpath, d))
        )
        for name in sorted(filenames):
            rel = "/".join(p for p in (top_rel, here, name) if p != ".")
            full = Path(dirpath, name)
            if full.is_symlink() or sandbox.hidden(full):
                continue
            target = rel if glob is not None and "/" in glob else name
            if glob is None or fnmatch.fnmatchcase(target, glob):
                yield full, rel


class TextSearch:
    """The `search_text` handler, bound to one sandbox and read cap (bytes)."""

    def __init__(self, sandbox: Sandbox, read_max_bytes: int):
        self._sandbox = sandbox
        self._cap = read_max_bytes

    def search_text(self, params: SearchTextParams) -> ToolResult:
        """Matching lines as `path:line: text`, at most MAX_MATCHES, each cut
        at MAX_LINE_CHARS characters.

        Raises ToolError for an invalid regular expression or a missing path,
        SecurityViolation when the path is outside the root.
        """
        try:
            compiled = regex.compile(params.pattern)
        except regex.error as exc:
            raise ToolError(f"invalid regular expression {params.pattern!r}: {exc}") from exc
        deadline = time.monotonic() + SEARCH_TIME_LIMIT_S
        where = self._sandbox.resolve(params.path)
        if not where.path.exists():
            raise ToolError(f"no such file or folder: {where.relative}")
        hits: list[str] = []
        scanned = skipped = 0
        more = timed_out = False
        for full, rel in _files(self._sandbox, where.path, where.relative, params.glob):
            try:
                text = load_text(self._sandbox, full, rel, self._cap)
            except (ToolError, SecurityViolation):  # binary, over the cap, unreadable, hard-linked
                skipped += 1
                continue
            scanned += 1
            for number, line in enumerate(text.split("\n"), start=1):
                try:
                    found = compiled.search(line, timeout=max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    timed_out = True
                    break
                if found:
                    if len(hits) == MAX_MATCHES:
                        more = True
                        break
                    shown = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "..."
                    hits.append(f"{rel}:{number}: {shown.rstrip(chr(13))}")
            if more or timed_out:
                break
        summary = f"{len(hits)} matching lines in {scanned} files searched"
        if skipped:
            summary += f" ({skipped} binary, unreadable, hard-linked or over-size files skipped)"
        if timed_out:
            summary = (
                f"search stopped after {SEARCH_TIME_LIMIT_S:g} s in {rel} with "
                f"{len(hits)} matching lines so far; simplify the pattern (nested repeats "
                "like (a+)+ can take forever) or narrow the path or glob"
            )
        elif more:
            summary = (
                f"more than {MAX_MATCHES} matching lines; showing the first {MAX_MATCHES}. "
                "Narrow the pattern, path or glob"
            )
        return ToolResult.text("\n".join([*hits, f"[{summary}]"]))


def search_tool(config: ToolsConfig, sandbox: Sandbox) -> Tool:
    """The `search_text` tool, bound to `sandbox`."""
    handler = TextSearch(sandbox, config.read_max_bytes)
    return Tool(
        "search_text",
        "Search the project's text files for a Python regular expression, line by line; "
        f"answers path:line: text, at most {MAX_MATCHES} lines. Skips .git, binary files and "
        "symlinks.",
        SearchTextParams,
        handler.search_text,
    )
