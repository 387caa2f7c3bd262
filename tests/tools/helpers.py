"""Helpers for the tool tests: test programs, result text, disk snapshots."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def make_program(folder: Path, name: str, body: str) -> Path:
    """Write an executable `/bin/sh` script `folder/name` running `body`."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / name
    program.write_text("#!/bin/sh\n" + body + "\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return program


def text_of(result) -> str:
    """The text of a one-item ToolResult."""
    (item,) = result.content
    return item["text"]


def tree_snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder`: file bytes, `-> target` for links, `dir` for folders."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            rel = full.relative_to(folder).as_posix()
            if full.is_symlink():
                found[rel] = "-> " + os.readlink(full)
            elif full.is_dir():
                found[rel] = "dir"
            else:
                found[rel] = full.read_bytes()
    return found
