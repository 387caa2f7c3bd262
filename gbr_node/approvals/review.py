"""What the operator sees and edits before deciding (EVD-DEV-01/02).

`unified_diff` and `colour_diff` are pure (difflib, ANSI colours);
`edit_in_editor` runs the operator's `$EDITOR` on a temporary file.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping

from gbr_node.errors import ToolError
from gbr_node.textcells import HIDDEN, visible

BOLD, RED, GREEN, CYAN, RESET = "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[0m"
MAX_DIFF_LINES = 200
"""A diff longer than this (lines) is summarised: its size, counts and first lines."""
SUMMARY_LINES = 40
MAX_LINE_CHARS = 400
"""A diff line longer than this (characters) is cut, saying how much more it holds."""
FLAG = "  \u26a0 hidden or control characters on this line"
_RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
FALLBACK_EDITORS = ("nano", "vi")


def unified_diff(old: str | None, new: str | None, path: str, *, context: int = 3) -> list[str]:
    """Unified diff lines (no trailing newlines) from `old` to `new` for `path`.

    `old` "" means the file does not exist yet, None that it is not text (a
    folder, a link, binary): then the diff is empty. `new` None (a delete)
    diffs against "". Lines are compared without their line endings.
    """
    if old is None:
        return []
    old_lines, new_lines = old.splitlines(), (new or "").splitlines()
    return list(
        difflib.unified_diff(old_lines, new_lines, f"a/{path}", f"b/{path}", n=context, lineterm="")
    )


def shown_diff(lines: list[str], *, full: bool, approval_id: int) -> list[str]:
    """`lines` as they are shown: whole when `full` or at most MAX_DIFF_LINES long;
    else the first SUMMARY_LINES and one line saying the diff's size and counts and
    the command that shows it whole (GBR-PRIV-01: one 1 MiB write is not a 1 MiB
    notice)."""
    if full or len(lines) <= MAX_DIFF_LINES:
        return lines
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    size = sum(len(line.encode("utf-8")) + 1 for line in lines)
    return [
        *lines[:SUMMARY_LINES],
        f"[diff cut: {len(lines)} lines, {size} bytes, +{added} -{removed}; all of it: "
        f"gbr-node approvals show {approval_id} --full]",
    ]


def colour_diff(lines: list[str], *, colour: bool = True) -> str:
    """`lines` joined for a terminal: headers bold, hunks cyan, additions green,
    removals red (ANSI), or plain text when `colour` is False. The proposed
    content comes from the model or a peer: its control characters are shown
    as visible stand-ins, bidi and zero-width characters as `<U+XXXX>`
    (`textcells.visible`), and such a line is flagged (FLAG); a line over
    MAX_LINE_CHARS is cut, saying how much it holds."""
    lines = [_shown_line(line) for line in lines]
    if not colour:
        return "\n".join(lines)
    painted = []
    for line in lines:
        if line.startswith(("+++", "---")):
            painted.append(f"{BOLD}{line}{RESET}")
        elif line.startswith("@@"):
            painted.append(f"{CYAN}{line}{RESET}")
        elif line.startswith("+"):
            painted.append(f"{GREEN}{line}{RESET}")
        elif line.startswith("-"):
            painted.append(f"{RED}{line}{RESET}")
        else:
            painted.append(line)
    return "\n".join(painted)


def _shown_line(line: str) -> str:
    flagged = bool(HIDDEN.search(line) or _RAW.search(line))
    if len(line) > MAX_LINE_CHARS:
        line = line[:MAX_LINE_CHARS] + f"\u2026 [{len(line) - MAX_LINE_CHARS} more characters]"
    return visible(line) + (FLAG if flagged else "")


def editor_command(environ: Mapping[str, str] | None = None) -> list[str]:
    """argv of the operator's editor: `$EDITOR` split like a shell would
    (it may hold arguments, e.g. "code --wait"), else the first of nano, vi
    found on PATH. Raises ToolError when there is none."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    configured = shlex.split(env.get("EDITOR", ""))
    if configured:
        return configured
    for name in FALLBACK_EDITORS:
        found = shutil.which(name, path=env.get("PATH"))
        if found:
            return [found]
    raise ToolError("no editor found: set $EDITOR (nano and vi are not installed)")


def edit_in_editor(text: str, *, suffix: str = ".txt") -> str | None:
    """Open the operator's editor on `text` and return the edited text
    (EVD-DEV-02), or None when the editor exited non-zero or left the text
    unchanged: then nothing is to change.

    The text goes to a private temporary file (`suffix` lets the editor pick
    a syntax), read back as UTF-8 with line endings as saved, then removed.
    The editor inherits this terminal; the call blocks until it exits.
    Raises ToolError when no editor can be started, or the result is not UTF-8.
    """
    argv = editor_command()
    fd, name = tempfile.mkstemp(prefix="gbr-approval-", suffix=suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as file:
            file.write(text)
        try:
            finished = subprocess.run([*argv, name], check=False)
        except OSError as exc:
            raise ToolError(f"cannot start editor {argv[0]!r}: {exc.strerror or exc}") from exc
        if finished.returncode != 0:
            return None
        try:
            with open(name, encoding="utf-8", newline="") as file:
                edited = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ToolError(f"cannot read the edited text back: {exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
    return None if edited == text else edited
