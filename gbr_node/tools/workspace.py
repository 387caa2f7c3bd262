"""What a project holds, for the embedded model's tool-call grammar (issue 15).

`workspace_view(sandbox)` walks the root the way `list_dir` sees it (sorted,
`.git` and other dot-folders skipped, symlinks not followed and not listed)
and returns the files, each with its text when it is small UTF-8 text, and
the folders. It gives up (None) past `max_entries`: a large project's paths
are then left free rather than cut to a part of them. It reads only what
`read_file` could read (each file through `Sandbox.open_read`).
"""

from __future__ import annotations

import os
from pathlib import Path

from gbr_node.errors import SecurityViolation, ToolError
from gbr_node.sandbox import Sandbox
from gbr_node.tools.files import decode_text, read_head

MAX_ENTRIES = 200  # files and folders; more and the paths stay free
MAX_TEXT_BYTES = 4096  # a file's text is given only up to this size


def workspace_view(
    sandbox: Sandbox, max_entries: int = MAX_ENTRIES, max_text_bytes: int = MAX_TEXT_BYTES
) -> tuple[dict[str, str | None], tuple[str, ...]] | None:
    """`(files, folders)` of the project under `sandbox.root`, or None past `max_entries`.

    `files` maps root-relative paths ("/"-separated, sorted walk order) to the
    file's text, or None when it is bigger than `max_text_bytes`, not UTF-8
    text, or unreadable; `folders` are root-relative, "." first. Never raises
    for a file or folder it cannot read (it is skipped, or its text None).
    """
    files: dict[str, str | None] = {}
    folders = ["."]
    pending = [(sandbox.root, ".")]
    while pending:
        folder, rel = pending.pop(0)
        try:
            with os.scandir(folder) as found:
                entries = sorted(found, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            name = entry.name if rel == "." else f"{rel}/{entry.name}"
            if entry.is_symlink() or sandbox.hidden(entry.path):
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name.startswith("."):
                    continue
                folders.append(name)
                pending.append((Path(entry.path), name))
            elif entry.is_file(follow_symlinks=False):
                files[name] = _small_text(sandbox, Path(entry.path), name, max_text_bytes)
            if len(files) + len(folders) > max_entries:
                return None
    return files, tuple(folders)


def _small_text(sandbox: Sandbox, path: Path, relative: str, max_bytes: int) -> str | None:
    try:
        data, size = read_head(sandbox, path, relative, max_bytes)
        return None if size > max_bytes else decode_text(data, relative, complete=True)
    except (ToolError, SecurityViolation):
        return None
