"""Profile change messages (ADR-0012a), pure: what the watcher tells the node.

`UpdateEnv` goes to the node and on to the agent's inbox; `ProfileRejected`
is reported to the person while the previous profile stays in force.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class UpdateEnv:
    """A new validated profile snapshot is in force (ADR-0012a); `changed` names the keys.

    `loosened` says, in plain words, every way the new rules allow more than
    the previous ones (`config.loosen`); empty when nothing got looser.
    """

    system_prompt: str
    changed: tuple[str, ...] = ()
    snapshot: Any = field(default=None, compare=False)
    loosened: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProfileRejected:
    """A profile that could not be loaded; the previous one stays in force (ADR-0012a).

    `file` is the file at fault (None when no file is, e.g. an invalid
    profile name given to `/env use`), `line` the 1-based line and `key` the
    dotted key when known, `message` what is wrong in plain words.
    """

    file: str | None
    line: int | None
    key: str | None
    message: str

    def __str__(self) -> str:
        where = self.file or "<profile>"
        if self.line is not None:
            where += f":{self.line}"
        key = f" [{self.key}]" if self.key else ""
        return f"{where}{key}: {self.message}"
