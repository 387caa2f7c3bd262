"""Helpers for the tool tests: test programs, result text, disk snapshots."""

from __future__ import annotations

import itertools
import os
import stat
import time
from pathlib import Path

_naps = itertools.count(1)


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


def unique_nap() -> str:
    """A `sleep` duration no other process has (about 300 s): its argv finds it in /proc,
    whatever pid namespace it runs in."""
    return f"3{os.getpid() % 100:02d}.{next(_naps):04d}"


def processes_with(word: str) -> list[int]:
    """Pids of the live (not zombie) processes whose argv holds `word` exactly."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as status:
                zombie = status.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if word.encode() in argv and not zombie:
            found.append(int(entry))
    return found


def wait_no_process_with(word: str, timeout_s: float = 10.0) -> bool:
    """True once no live process has `word` in its argv (waits up to `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while processes_with(word):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
