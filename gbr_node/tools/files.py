"""File content tools: `read_file`, `write_file`, `edit_file` (issue 2, "Local tools").

Every path goes through `Sandbox.resolve` (UBQ-DEV-01, UNW-DEV-01); files are
opened with O_NOFOLLOW where the OS has it, and written only through
`Sandbox.write_atomic`. A write or edit of a protected path raises
`ApprovalRequired` carrying the proposed full content, before anything on disk
changes (EVD-AI-01). Text means UTF-8 without NUL bytes; anything else is
refused as binary.

Format on save (UBQ-DEV-02): with `SaveChecks` (the profile's `[checks]`),
the new content of a covered file goes through its formatter before the
atomic write, and the result says what happened and, when the text changed,
gives the changed lines so the caller's next `edit_file` is not stale. A
protected file's content is never formatted while it waits for approval.
A peer's write (`CALLER` is not local) also gets the check's verdict in its
result (UNW-AI-01): the baseline is taken before the write, the check after.

Verified edits (GBR-TRUTH-01, `checks.builtin`): unless the profile says
`[checks] builtin = false`, a write or edit that leaves a .py, .json, .toml or
.ini file unparsable (when it parsed before, or is new) is written as asked
but its result is an error (`app.py no longer parses: line 3: ...`) carrying
`structured["parse"]`, which the agent's machine retries like a check.
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field

from gbr_node.checkpoints.store import CheckpointStore, keeping
from gbr_node.checks.builtin import breakage, kind_of
from gbr_node.checks.plan import FormatOutcome
from gbr_node.checks.verdict import Verdict, format_note
from gbr_node.config.profile import ToolsConfig
from gbr_node.errors import ApprovalRequired, GbrError, SecurityViolation, ToolError
from gbr_node.sandbox import Resolved, Sandbox
from gbr_node.sandbox.caller import caller_is_remote
from gbr_node.tools.base import SEEN, Params, Tool, ToolResult, change_owner
from gbr_node.tools.rootlock import root_lock

QUICK_READ_MAX_BYTES = 4 * 1024 * 1024
"""`read_file` runs on the event loop (`Tool.quick`) while `tools.read_max_bytes`,
which bounds its read, is at most this; above it, in a worker thread."""
DEFAULT_LINE_LIMIT = 2000


class NotText(ToolError):
    """The file holds NUL bytes or is not valid UTF-8."""


def read_head(sandbox: Sandbox, path: Path, relative: str, max_bytes: int) -> tuple[bytes, int]:
    """The first `max_bytes` bytes of the regular file at `path` and its size in bytes.

    Opened by `Sandbox.open_read` (no symlink followed after `resolve`, and no
    waiting for a FIFO's writer: a FIFO is refused as not a regular file).
    Raises SecurityViolation from it, and ToolError (from the OSError) when the
    file is missing, a folder, or unreadable.
    """
    try:
        fd = sandbox.open_read(path)
    except FileNotFoundError as exc:
        raise ToolError(f"no such file: {relative}") from exc
    except OSError as exc:
        raise ToolError(f"cannot open {relative}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{relative} is a folder; use list_dir")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{relative} is not a regular file")
        chunks, wanted = [], min(info.st_size, max_bytes)
        while wanted > 0:
            chunk = os.read(fd, wanted)
            if not chunk:
                break
            chunks.append(chunk)
            wanted -= len(chunk)
        return b"".join(chunks), info.st_size
    except OSError as exc:
        raise ToolError(f"cannot read {relative}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def decode_text(data: bytes, relative: str, *, complete: bool) -> str:
    """`data` as UTF-8 text; a cut multi-byte character at the end is dropped
    unless `complete`. Raises NotText for NUL bytes or invalid UTF-8."""
    if b"\x00" in data:
        raise NotText(f"{relative} looks binary (it contains NUL bytes); not shown")
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
    except UnicodeDecodeError as exc:
        raise NotText(f"{relative} is not UTF-8 text (binary?); not shown") from exc


def load_text(sandbox: Sandbox, path: Path, relative: str, max_bytes: int) -> str:
    """The whole text of a file no bigger than `max_bytes` (tools.read_max_bytes).

    Raises ToolError when it is bigger, NotText when it is not text.
    """
    data, size = read_head(sandbox, path, relative, max_bytes)
    if size > max_bytes:
        raise ToolError(
            f"{relative} is {size} bytes, over the {max_bytes}-byte limit (tools.read_max_bytes)"
        )
    return decode_text(data, relative, complete=True)


class ReadFileParams(Params):
    """Arguments of read_file."""

    path: str = Field(description="File to read, relative to the project root.")
    offset: int = Field(1, ge=1, description="First line to show, 1-based.")
    limit: int = Field(DEFAULT_LINE_LIMIT, ge=1, description="How many lines to show at most.")


class WriteFileParams(Params):
    """Arguments of write_file."""

    path: str = Field(description="File to create or replace, relative to the project root.")
    content: str = Field(description="The complete new content of the file.")


class EditFileParams(Params):
    """Arguments of edit_file."""

    path: str = Field(description="File to edit, relative to the project root.")
    old_string: str = Field(min_length=1, description="Exact text to replace, as in the file.")
    new_string: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one.")


class SaveChecks(Protocol):
    """What the file tools need of the profile's checks (`tools.checkrunner.CheckRunner`)."""

    def format(self, relative: str, before: str | None, content: str) -> FormatOutcome: ...

    def peer_check(self, relative: str) -> Callable[[], Sequence[Verdict]] | None: ...


class FileTools:
    """Handlers of the file content tools, bound to one sandbox, read cap (bytes),
    the profile's checks (None: no format on save) and whether the built-in parse
    check runs (`verify`, GBR-TRUTH-01)."""

    def __init__(
        self,
        sandbox: Sandbox,
        read_max_bytes: int,
        checks: SaveChecks | None = None,
        *,
        verify: bool = True,
        checkpoints: CheckpointStore | None = None,
    ):
        self._sandbox = sandbox
        self._checkpoints = checkpoints
        self._cap = read_max_bytes
        self._changes = root_lock(sandbox.root)
        self._checks = checks
        self._verify = verify

    def read_file(self, params: ReadFileParams) -> ToolResult:
        """Numbered lines `offset`..`offset+limit-1`; says the total and what was cut.

        A file over the read cap is read up to the cap (its last, cut line
        dropped) and the answer says so. Raises ToolError (missing, folder,
        binary, offset past the end), SecurityViolation (outside the root).
        """
        where = self._sandbox.resolve(params.path)
        data, size = read_head(self._sandbox, where.path, where.relative, self._cap)
        head_only = size > len(data)
        if head_only:
            data = data[: data.rfind(b"\n") + 1]
        lines = decode_text(data, where.relative, complete=not head_only).split("\n")
        if lines[-1] == "":
            lines.pop()
        total = len(lines)
        if total == 0:
            return ToolResult.text(f"{where.relative}: empty file")
        if params.offset > total:
            raise ToolError(f"offset {params.offset} is past the end of {where.relative}")
        first = params.offset
        last = min(total, first + params.limit - 1)
        counted = f"at least {total}" if head_only else str(total)
        out = [f"{where.relative}: lines {first}-{last} of {counted}"]
        out += [f"{n:>6}\t{lines[n - 1].rstrip(chr(13))}" for n in range(first, last + 1)]
        if last < total:
            out.append(f"[{total - last} more lines; call again with offset={last + 1}]")
        if head_only:
            out.append(
                f"[the file is {size} bytes; only the first {self._cap} bytes were read "
                "(tools.read_max_bytes); use search_text to find later lines]"
            )
        return ToolResult.text("\n".join(out))

    def write_file(self, params: WriteFileParams) -> ToolResult:
        """Create or replace a file atomically, creating parent folders.

        Raises ApprovalRequired (protected path, nothing written),
        SecurityViolation (outside the root), ToolError (a folder, OS failure, or for
        the local agent an existing file it did not read in the turn: `base.SEEN`; a
        protected file goes to the person's approval first, who sees the whole diff;
        or content the file already holds, perhaps less its trailing newlines).
        """
        where = self._sandbox.resolve(params.path)
        self._refuse_protected("write_file", where, params.content)  # the person reviews it
        existed = where.path.exists()
        if existed and not self._seen(where):
            raise ToolError(
                f"{where.relative} already exists and was not read in this turn; nothing "
                "written: read_file it first, then change it with edit_file (or write_file "
                "with its whole new content)"
            )
        current = self._current_text(where) if existed else None
        if current is not None and params.content in (current, current.rstrip("\r\n")):
            # a change of nothing, as edit_file refuses one (a small model read notes.txt
            # and wrote it back, less its last newline, when asked for a new script)
            raise ToolError(
                f"{where.relative} already holds this text: that changes nothing; nothing written"
            )
        before = self._old_text(where, current) if existed else None
        verb = "replaced" if existed else "created"
        said = f"{verb} {where.relative}"
        return self._save(where, before, params.content, said, existed=existed, sized=True)

    def _current_text(self, where: Resolved) -> str | None:
        """The text `where` holds, or None when it is not text or cannot be read."""
        try:
            return load_text(self._sandbox, where.path, where.relative, self._cap)
        except (ToolError, SecurityViolation):
            return None

    def _seen(self, where: Resolved) -> bool:
        """Whether the running call may replace `where` whole: always, but for the local
        agent's calls (`base.SEEN`), which must have read or written it in the turn."""
        seen = SEEN.get()
        if seen is None:
            return True
        for path in seen:
            try:
                if self._sandbox.resolve(path).path == where.path:
                    return True
            except GbrError:
                continue
        return False

    def edit_file(self, params: EditFileParams) -> ToolResult:
        """Replace `old_string` by `new_string`: exactly one match, or all with `replace_all`.

        Raises ToolError when `old_string` is `new_string` (Claude Code's Edit refuses it
        too), when there are zero matches, or several without `replace_all` (the
        message says how many); ApprovalRequired with the
        proposed full content for a protected path (nothing written).
        """
        where = self._sandbox.resolve(params.path)
        if params.old_string == params.new_string:
            raise ToolError(
                f"old_string and new_string are the same: that changes nothing in "
                f"{where.relative}; nothing changed"
            )
        text = load_text(self._sandbox, where.path, where.relative, self._cap)
        count = text.count(params.old_string)
        if count == 0:
            raise ToolError(
                f"old_string not found in {where.relative} (0 matches); nothing changed"
            )
        if count > 1 and not params.replace_all:
            raise ToolError(
                f"old_string matches {count} times in {where.relative}; include more "
                "surrounding text to make it unique, or set replace_all=true. Nothing changed"
            )
        new_text = text.replace(
            params.old_string, params.new_string, -1 if params.replace_all else 1
        )
        self._refuse_protected("edit_file", where, new_text)
        noun = "occurrence" if count == 1 else "occurrences"
        said = f"edited {where.relative}: replaced {count} {noun}"
        return self._save(where, text, new_text, said, existed=True, sized=False)

    def _old_text(self, where: Resolved, current: str | None) -> str | None:
        """The text a file holds before the change (None without checks and without a
        built-in parse of its kind), or a NUL (never a formatter's output, never
        parses) when it cannot be read as text: then it is not formatted, nor blamed.
        `current`: that text when it was read already."""
        if self._checks is None and not (self._verify and kind_of(where.relative)):
            return None
        if current is not None:
            return current
        try:
            return load_text(self._sandbox, where.path, where.relative, self._cap)
        except ToolError:
            return "\x00"

    def _save(
        self,
        where: Resolved,
        before: str | None,
        content: str,
        said: str,
        *,
        existed: bool,
        sized: bool,
    ) -> ToolResult:
        """Format (UBQ-DEV-02), write atomically, verify that it parses (GBR-TRUTH-01)
        and, for a peer, check (UNW-AI-01). `before` is the old text (None: new, or
        not read); `sized` adds the byte count to `said`."""
        outcome = (
            FormatOutcome("none", content)
            if self._checks is None
            else self._checks.format(where.relative, before, content)
        )
        after = None
        if self._checks is not None and caller_is_remote():
            after = self._checks.peer_check(where.relative)
        data = outcome.content.encode("utf-8")
        with self._changes.shared(), keeping(self._checkpoints, change_owner, [where.relative]):
            self._sandbox.write_atomic(where.path, data)
        lines = [f"{said} ({len(data)} bytes)" if sized or self._checks is not None else said]
        note = format_note(outcome, content)
        if note:
            lines.append(note)
        structured: dict[str, Any] | None = None
        if self._checks is not None:
            structured = {"format": outcome.status}
        if after is not None and structured is not None:
            verdicts = after()
            lines += [v.note() for v in verdicts]
            structured["check"] = [v.summary() for v in verdicts]
        broken = (
            breakage(where.relative, before if existed else None, outcome.content)
            if self._verify
            else None
        )
        if broken is None:
            return ToolResult.text("\n".join(lines), structured=structured)
        lines.insert(0, broken.text)
        lines.append("[the file was written as given; fix it so that it parses]")
        structured = {**(structured or {}), "parse": broken.summary()}
        return ToolResult.text("\n".join(lines), is_error=True, structured=structured)

    @staticmethod
    def _refuse_protected(tool: str, where: Resolved, content: str) -> None:
        if where.protected:
            raise ApprovalRequired(tool, where.relative, str(where.path), content=content)


def file_tools(
    config: ToolsConfig,
    sandbox: Sandbox,
    checks: SaveChecks | None = None,
    *,
    verify: bool = True,
    checkpoints: CheckpointStore | None = None,
) -> list[Tool]:
    """`read_file`, `write_file` and `edit_file`, bound to `sandbox` (and, for format on
    save, to `checks`; `verify`: the built-in parse check, GBR-TRUTH-01; every write
    is checkpointed in `checkpoints` first, GBR-UNDO-01)."""
    handlers = FileTools(
        sandbox, config.read_max_bytes, checks, verify=verify, checkpoints=checkpoints
    )
    cap = config.read_max_bytes
    return [
        Tool(
            "read_file",
            "Read a UTF-8 text file from the project, as numbered lines. Use offset and "
            f"limit to page through long files. Files over {cap} bytes are cut; binary "
            "files are refused.",
            ReadFileParams,
            handlers.read_file,
            quick=cap <= QUICK_READ_MAX_BYTES,
        ),
        Tool(
            "write_file",
            "Create a file or replace its whole content (parent folders are created). "
            "Prefer edit_file for small changes. Protected files need the operator's approval.",
            WriteFileParams,
            handlers.write_file,
        ),
        Tool(
            "edit_file",
            "Replace an exact piece of text in a file. old_string must match exactly once "
            "(copy it from read_file without the line numbers) unless replace_all is true.",
            EditFileParams,
            handlers.edit_file,
        ),
    ]
