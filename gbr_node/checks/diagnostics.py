"""What a check's output says, and which of its errors a turn introduced [pure].

UNW-AI-01 / STD-DEV-01: the model is told only the errors its turn added, as
short lines with file and line, never a Python traceback, in at most
`REPORT_MAX_CHARS` characters; errors that were there before the turn's
first write (its baseline) never block it.

- `parse_diagnostics(output)` splits a check's output into `Diagnostic`s, one
  per error: lines that start with a location (`path:line:col: msg`, as ruff,
  flake8, mypy, gcc, `cargo --message-format short` and go print;
  `path(line,col): msg`, as tsc prints; `--> path:line:col` / `┌─
  path:line:col` under an `error: ...` heading, as rustc and gleam print), and
  Python's `File "path", line N` blocks (a SyntaxError, or a traceback, which
  becomes one line: the last frame's place and the exception). A failing
  check whose output holds none of these counts as one error.
- `new_diagnostics(before, after)` compares errors by `key` (their file and
  message, positions and numbers left out), so errors that only moved (lines
  added above them) are not new; of alike errors, those nearest to where the
  baseline had one are the old ones. Comparing messages alone or places alone
  both fail (OpenHands#3412: generic messages, shifted lines).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

REPORT_MAX_CHARS = 2000
"""At most this much check output goes to the model per check (UNW-AI-01)."""
UNPARSED_MAX_CHARS = 600
"""A failing check whose output names no place is sent as its first characters."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_PATH = r"(?P<path>[^\s:()\"'<>|]*[./][^\s:()\"'<>|]*[A-Za-z0-9_])"
_LOCATION = re.compile(
    r"^\s*(?:-->|[┌╭]─+|at)?\s*" + _PATH + r"(?::(?P<line>\d+)(?::(?P<col>\d+))?"
    r"|\((?P<pline>\d+)(?:,(?P<pcol>\d+))?\))(?P<rest>(?::|\s|$).*)$"
)
_PY_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)')
_PY_TRACEBACK = "Traceback (most recent call last):"
_PY_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt)\b")
_HEADING = re.compile(r"^\s*(?:error|warning|fatal)\b.*", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class Diagnostic:
    """One error of a check's output.

    `text` is the line the model is shown (file, line, message); `path` and
    `line` are its place when it names one (as the check printed the path);
    `key` identifies the error across runs: its file and message without
    positions or numbers.
    """

    text: str
    key: str
    path: str | None = None
    line: int | None = None


def strip_ansi(text: str) -> str:
    """`text` without terminal escape sequences (colours, cursor moves)."""
    return _ANSI.sub("", text)


def _key(path: str | None, message: str) -> str:
    where = (path or "").removeprefix("./")
    return f"{where}\0{_NUMBER.sub('#', ' '.join(message.split()))}"


def _python_block(lines: list[str], start: int) -> tuple[Diagnostic | None, int]:
    """A traceback or a `File "...", line N` block from `lines[start]`: one diagnostic
    (the last frame's place and the exception line) and the index after the block."""
    index = start + (lines[start].strip() == _PY_TRACEBACK)
    frame = None
    while index < len(lines) and (
        not lines[index].strip() or lines[index][:1] in (" ", "\t") or _PY_FRAME.match(lines[index])
    ):
        frame = _PY_FRAME.match(lines[index]) or frame
        index += 1
    exception = lines[index].strip() if index < len(lines) else ""
    if not _PY_EXCEPTION.match(exception):
        if frame is None:
            return None, start + 1
        exception = ""
    else:
        index += 1
    if frame is None:
        return Diagnostic(exception, _key(None, exception)), index
    path, line = frame["path"], int(frame["line"])
    text = f"{path}:{line}: {exception}".rstrip(": ")
    return Diagnostic(text, _key(path, exception), path, line), index


def parse_diagnostics(output: str) -> list[Diagnostic]:
    """The errors `output` (a check's stdout and stderr) names, in order; see the module
    docstring for the formats. Tracebacks come out as one line each. Never raises."""
    lines = strip_ansi(output).replace("\r\n", "\n").split("\n")
    found: list[Diagnostic] = []
    heading = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.strip() == _PY_TRACEBACK or _PY_FRAME.match(line):
            diagnostic, index = _python_block(lines, index)
            if diagnostic is not None:
                found.append(diagnostic)
            continue
        index += 1
        match = _LOCATION.match(line)
        if match is None:
            if _HEADING.match(line):
                heading = line.strip()
            continue
        path = match["path"]
        number = int(match["line"] or match["pline"])
        message = match["rest"].lstrip(": \t").strip()
        if not message:  # rustc/gleam long form: the message is the heading above
            message = heading
        text = line.strip() if match["rest"].strip() else f"{line.strip()}: {heading}".rstrip(": ")
        found.append(Diagnostic(text, _key(path, message), path, number))
    return found


def failure_diagnostics(output: str) -> list[Diagnostic]:
    """The errors of a check that failed (non-zero exit): `parse_diagnostics`, or, when
    its output names none, one error holding the output's start (or saying it was silent)."""
    found = parse_diagnostics(output)
    if found:
        return found
    text = " ".join(strip_ansi(output).split()) or "(the check failed without any output)"
    if len(text) > UNPARSED_MAX_CHARS:
        text = text[: UNPARSED_MAX_CHARS - 1] + "…"
    return [Diagnostic(text, _key(None, text))]


def new_diagnostics(before: Iterable[Diagnostic], after: Sequence[Diagnostic]) -> list[Diagnostic]:
    """The errors of `after` that `before` (the baseline) did not have, in `after`'s order.

    Counted per `key`: each error of the baseline is matched with the nearest
    (by line) unmatched error of `after` with the same key, nearest pairs
    first; the errors of `after` left unmatched are the new ones. So errors
    that only moved are not new, and of two alike errors the one far from
    where the baseline had it is the new one.
    """
    old_lines: dict[str, list[int]] = defaultdict(list)
    for diagnostic in before:
        old_lines[diagnostic.key].append(diagnostic.line or 0)
    by_key: dict[str, list[int]] = defaultdict(list)
    for position, diagnostic in enumerate(after):
        by_key[diagnostic.key].append(position)
    new: list[int] = []
    for key, positions in by_key.items():
        olds = old_lines.get(key, [])
        pairs = sorted(
            (abs((after[p].line or 0) - line), p, o)
            for p in positions
            for o, line in enumerate(olds)
        )
        matched_new: set[int] = set()
        matched_old: set[int] = set()
        for _, p, o in pairs:
            if p not in matched_new and o not in matched_old:
                matched_new.add(p)
                matched_old.add(o)
        new += [p for p in positions if p not in matched_new]
    return [after[p] for p in sorted(new)]


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 error`, `2 errors` (`nouns` for irregular plurals: `3 retries`)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def diagnostics_text(diagnostics: Sequence[Diagnostic], max_chars: int = REPORT_MAX_CHARS) -> str:
    """The errors one per line, cut at a line boundary to `max_chars` characters, with a
    last line saying how many more were left out."""
    lines: list[str] = []
    used = 0
    for position, diagnostic in enumerate(diagnostics):
        text = diagnostic.text
        if used + len(text) + 1 > max_chars - 40:
            lines.append(f"[... {plural(len(diagnostics) - position, 'more error')}]")
            break
        lines.append(text)
        used += len(text) + 1
    return "\n".join(lines)
