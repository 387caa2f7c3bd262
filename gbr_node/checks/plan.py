"""Which checks a change calls for, and what a check run gave [pure].

The agent's state machine (`agent.machine`) decides with these values alone;
`tools.checkrunner` runs the programs. A `CheckSpec` is a profile's check set as
the machine needs it (which files, per file or project-wide, how many
retries); `targets` turns the files a turn changed into `CheckTarget`s; a
`CheckRun` is what one run of a check gave (UNW-AI-01 / STD-DEV-01); a
`FormatOutcome` what format on save did to a file's new content (UBQ-DEV-02).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from gbr_node.checks.diagnostics import Diagnostic
from gbr_node.sandbox.protected import glob_to_regex


@dataclass(frozen=True)
class CheckTarget:
    """One run of check set `name`: on the root-relative file `path`, or on the whole
    project (`path` None)."""

    name: str
    path: str | None = None


@dataclass(frozen=True)
class CheckSpec:
    """A check set as the agent's machine sees it: its `name`, the root-relative globs
    of the files it covers, whether it checks per file, and its `max_retries`."""

    name: str
    patterns: tuple[str, ...]
    per_file: bool
    max_retries: int
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        source = "|".join(f"(?:{glob_to_regex(p)})" for p in self.patterns)
        object.__setattr__(self, "_regex", re.compile(source, re.DOTALL))

    def covers(self, relative: str) -> bool:
        """True when the root-relative POSIX path `relative` is one of this set's files."""
        return self._regex.fullmatch(relative.removeprefix("./")) is not None


def targets(specs: Sequence[CheckSpec], changed: Iterable[str]) -> tuple[CheckTarget, ...]:
    """The check runs that the root-relative files `changed` call for, in profile order:
    one per covered file for a per-file set, one for the project for the others."""
    files = list(dict.fromkeys(changed))
    found: list[CheckTarget] = []
    for spec in specs:
        covered = [path for path in files if spec.covers(path)]
        if spec.per_file:
            found += [CheckTarget(spec.name, path) for path in covered]
        elif covered:
            found.append(CheckTarget(spec.name))
    return tuple(found)


Status = Literal["ok", "failed", "timed_out", "not_run", "stopped"]


@dataclass(frozen=True)
class CheckRun:
    """What one run of a check gave.

    `status`: ok (exit status 0, or a per-file check of a file that does not
    exist), failed (non-zero exit; `diagnostics` are its errors), timed_out
    (killed at `timeout_s` seconds), not_run (`reason` says why: a program
    not found, the OS sandbox refused it) or stopped (`/s`, Ctrl-C). `command`
    is the command line as run and `output` its stdout and stderr (for
    `/check`); `elapsed_s` in seconds.
    """

    target: CheckTarget
    status: Status
    command: str = ""
    output: str = ""
    diagnostics: tuple[Diagnostic, ...] = ()
    elapsed_s: float = 0.0
    timeout_s: float = 0.0
    reason: str = ""


FormatStatus = Literal["formatted", "unchanged", "skipped", "failed", "none"]


@dataclass(frozen=True)
class FormatOutcome:
    """What format on save did (UBQ-DEV-02): `content` is the text to write.

    `status`: formatted (the formatter changed the text), unchanged (it was
    already formatted), skipped (an existing file the formatter would
    restyle: written as given; `reason` says so), failed (the formatter
    failed or timed out: written as given; `reason` is its first line) or
    none (no check set with a formatter covers the file). `name` is the
    check set's name.
    """

    status: FormatStatus
    content: str
    name: str = ""
    reason: str = ""
