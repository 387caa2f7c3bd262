"""One search hit of the library index, pure (issue 18): what `store` reads back,
`rank` orders and `present` prints.

Kept apart from `store.py` so that the pure modules that handle hits do not
import SQLite (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hit:
    """One search result: a definition and where it lives.

    `file` is relative to `base` (a site-packages folder or a source folder);
    `score` is higher for better hits (comparable within one search only).
    """

    entry_id: int
    qualname: str
    kind: str
    signature: str
    bases: str
    doc: str
    file: str
    base: str
    line: int
    end_line: int
    dist: str
    version: str
    score: float = 0.0

    @property
    def name(self) -> str:
        return self.qualname.rpartition(".")[2]

    @property
    def dist_version(self) -> str:
        """`httpx==0.28.1` (just the name when the version is unknown)."""
        return f"{self.dist}=={self.version}" if self.version else self.dist
