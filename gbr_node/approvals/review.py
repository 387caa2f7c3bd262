"""What the operator sees and edits before deciding (EVD-DEV-01/02).

`unified_diff` and `colour_diff` are pure (difflib, ANSI colours);
`edit_in_editor` runs the operator's `$EDITOR` on a temporary file.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping

from gbr_node.errors import ToolError
from gbr_node.textcells import visible

BOLD, RED, GREEN, CYAN, RESET = "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[0m"
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


def colour_diff(lines: list[str], *, colour: bool = True) -> str:
    """`lines` joined for a terminal: headers bold, hunks cyan, additions green,
    removals red (ANSI), or plain text when `colour` is False. The proposed
    content comes from the model or a peer: its control characters are shown
    as visible stand-ins (`textcells.visible`), never sent to the terminal."""
    lines = [visible(line) for line in lines]
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
