"""The session journal: one JSON object per line, appended as the history grows.

Files live in `<project>/.gbr/sessions/<UTC timestamp>.jsonl`. Each line is
`{"op": "append"|"system"|"clear", ...payload}` (see `Session.apply`). Each
record is written with a single `write()` on an unbuffered file, so a killed
process loses at most the record being written; a torn last line is skipped
on replay. `gbr-node run --resume` replays the newest journal.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

SESSIONS_DIR = Path(".gbr") / "sessions"


class Journal:
    """Append-only JSONL writer. Raises OSError when the file cannot be opened."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def record(self, op: str, payload: dict[str, Any]) -> None:
        """Append one record `{"op": op, **payload}` as one line."""
        line = json.dumps({"op": op, **payload}, ensure_ascii=False, separators=(",", ":"))
        os.write(self._fd, (line + "\n").encode("utf-8"))

    def close(self) -> None:
        """Close the file; later records raise OSError."""
        os.close(self._fd)


def read_journal(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Records of a journal as `(op, payload)` pairs; unreadable lines are skipped."""
    records = []
    for line in path.read_text("utf-8", errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("op"), str):
            op = obj.pop("op")
            records.append((op, obj))
    return records


def new_journal_path(project_dir: Path) -> Path:
    """A fresh journal path named by the current UTC time (sortable)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = project_dir / SESSIONS_DIR
    path = base / f"{stamp}.jsonl"
    n = 1
    while path.exists():
        n += 1
        path = base / f"{stamp}-{n}.jsonl"
    return path


def latest_journal(project_dir: Path) -> Path | None:
    """The newest journal of the project, or None when there is none."""
    folder = project_dir / SESSIONS_DIR
    if not folder.is_dir():
        return None
    journals = sorted(folder.glob("*.jsonl"), key=lambda p: (p.stat().st_mtime, p.name))
    return journals[-1] if journals else None
