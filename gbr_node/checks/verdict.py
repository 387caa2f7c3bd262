"""A check set's verdict on a change, and how it is said [pure] (UNW-AI-01 / STD-DEV-01).

`judge` compares the runs after a change with the baseline taken before it
(`checks.diagnostics.new_diagnostics`): only errors the change added count.
A `Verdict` says it twice: a one-line status for the person
(`check ruff: 2 new errors -> retry 1/3`, `check ruff ok (after 2 retries)`,
`check ruff still failing: 2 errors in app.py — /check shows them, /undo takes
the turn back`, the turn's closing line) and a note for
the model, appended to the result of the tool call that made the change,
with the new errors as short lines (no traceback, at most ~2,000 characters).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gbr_node.checks.diagnostics import Diagnostic, diagnostics_text, new_diagnostics, plural
from gbr_node.checks.plan import CheckRun, CheckTarget, FormatOutcome

FORMAT_NOTE_MAX_CHARS = 4000
"""The changed lines (or formatted text) a format-on-save result carries at most."""


@dataclass(frozen=True)
class Verdict:
    """What check set `name` says of a change.

    `new`: the errors the change added; `before`: errors still reported that
    the baseline had already; `timed_out`: the time limit (seconds) a run hit,
    else None; `not_run`: why a run did not happen (program missing, OS
    sandbox refused, stopped), else None.
    """

    name: str
    new: tuple[Diagnostic, ...] = ()
    before: int = 0
    timed_out: float | None = None
    not_run: str | None = None

    @property
    def failing(self) -> bool:
        """True when the change added errors."""
        return bool(self.new)

    def status_line(self, retry: int, max_retries: int, *, exhausted: bool) -> str:
        """The line for the person. `retry`: the retry this verdict starts (failing and
        not `exhausted`) or the retries the turn spent (passing)."""
        name = f"check {self.name}"
        if self.new:
            if exhausted:
                paths = ", ".join(dict.fromkeys(d.path for d in self.new if d.path))
                errors = plural(len(self.new), "error")
                return closing_line(self.name, errors, paths, shown_by="/check")
            return f"{name}: {plural(len(self.new), 'new error')} -> retry {retry}/{max_retries}"
        if self.timed_out is not None:
            return f"{name} timed out after {self.timed_out:g} s (killed)"
        if self.not_run is not None:
            return f"{name} not run: {self.not_run}"
        notes = []
        if retry:
            notes.append(f"after {plural(retry, 'retry', 'retries')}")
        if self.before:
            was = "was" if self.before == 1 else "were"
            notes.append(f"{plural(self.before, 'error')} {was} there before this turn")
        return f"{name} ok" + (f" ({'; '.join(notes)})" if notes else "")

    def summary(self) -> dict[str, Any]:
        """The machine-readable verdict for a peer's tool result: `{"check", "status"
        ("ok", "failed", "timed_out", "not_run"), "new_errors", "errors"}`."""
        if self.new:
            status = "failed"
        elif self.timed_out is not None:
            status = "timed_out"
        elif self.not_run is not None:
            status = "not_run"
        else:
            status = "ok"
        return {
            "check": self.name,
            "status": status,
            "new_errors": len(self.new),
            "errors": [d.text for d in self.new],
        }

    def note(self, *, exhausted: bool = False, max_retries: int = 0) -> str:
        """The note for the model, to append to the changing call's result."""
        name = f"check {self.name}"
        if self.new:
            text = (
                f"[{name}: {plural(len(self.new), 'new error')} after this change; fix "
                f"{'it' if len(self.new) == 1 else 'them'}:]\n{diagnostics_text(self.new)}"
            )
            if self.before:
                text += f"\n[{plural(self.before, 'older error')} not shown: not yours to fix]"
            if exhausted:
                spent = plural(max_retries, "retry", "retries")
                text += (
                    f"\n[{name} still fails after {spent}: the turn was stopped. "
                    "Do not try again unasked; tell the person what is wrong.]"
                )
            return text
        if self.timed_out is not None:
            return f"[{name} timed out after {self.timed_out:g} s; its result is unknown]"
        if self.not_run is not None:
            return f"[{name} was not run: {self.not_run}]"
        older = f"; {plural(self.before, 'older error')} remain, not yours" if self.before else ""
        return f"[{name}: ok, no new errors{older}]"


def closing_line(name: str, errors: str, paths: str, shown_by: str | None = None) -> str:
    """The line a turn ends with while check `name` still fails after its retries
    (GBR-TRUTH-01): `check python still failing: 3 errors in calc.py — /check shows
    them, /undo takes the turn back`. `errors` is the counted noun (`3 errors`),
    `paths` the files (may be ""), `shown_by` the command that shows the errors."""
    where = f" in {paths}" if paths else ""
    them = "it" if errors.startswith("1 ") else "them"
    shows = f"{shown_by} shows {them}, " if shown_by else ""
    return f"check {name} still failing: {errors}{where} — {shows}/undo takes the turn back"


def judge(runs: Sequence[CheckRun], baseline: Mapping[CheckTarget, CheckRun]) -> list[Verdict]:
    """One verdict per check set of `runs` (in their order), against `baseline`: the
    runs taken before the change, by target (a target absent from it had no errors)."""
    names = list(dict.fromkeys(run.target.name for run in runs))
    verdicts = []
    for name in names:
        new: list[Diagnostic] = []
        before = 0
        timed_out = not_run = None
        for run in (r for r in runs if r.target.name == name):
            if run.status == "failed":
                old = baseline.get(run.target)
                added = new_diagnostics(old.diagnostics if old else (), run.diagnostics)
                new += added
                before += len(run.diagnostics) - len(added)
            elif run.status == "timed_out":
                timed_out = run.timeout_s
            elif run.status in ("not_run", "stopped"):
                not_run = run.reason or run.status.replace("_", " ")
        verdicts.append(Verdict(name, tuple(new), before, timed_out, not_run))
    return verdicts


def format_note(outcome: FormatOutcome, given: str) -> str:
    """The line(s) a write's result adds about format on save (UBQ-DEV-02), "" when no
    formatter covers the file or it left the text as given. When it changed the text,
    the changed lines as a unified diff (from `given` to what was written) so the next
    `edit_file` is not stale; the whole text instead when that is shorter. Cut at
    `FORMAT_NOTE_MAX_CHARS` characters, saying so."""
    name = f"formatter {outcome.name}"
    if outcome.status == "skipped":
        return f"[not formatted by {name}: {outcome.reason}; written as given]"
    if outcome.status == "failed":
        return f"[not formatted: {outcome.reason}; written as given]"
    if outcome.status != "formatted":
        return ""
    diff = "".join(
        difflib.unified_diff(
            given.splitlines(keepends=True),
            outcome.content.splitlines(keepends=True),
            "as sent",
            "as written",
            n=0,
        )
    )
    if len(outcome.content) <= len(diff):
        head, body = "the text now in the file", outcome.content
    else:
        head, body = "its changed lines (unified diff, from what you sent)", diff
    if len(body) > FORMAT_NOTE_MAX_CHARS:
        body = body[:FORMAT_NOTE_MAX_CHARS] + "\n[... cut; read_file shows the rest]"
    return f"[reformatted by {name}; edit the file as it is now. {head}:]\n{body}"


def full_report(runs: Sequence[CheckRun]) -> str:
    """`/check`: every run's command, outcome and full output, for the person."""
    parts = []
    for run in runs:
        where = f" ({run.target.path})" if run.target.path else ""
        outcome = {
            "ok": "ok",
            "failed": plural(len(run.diagnostics), "error"),
            "timed_out": f"timed out after {run.timeout_s:g} s (killed)",
            "stopped": "stopped",
            "not_run": f"not run: {run.reason}",
        }[run.status]
        head = f"check {run.target.name}{where}: {outcome}"
        body = f"$ {run.command}\n{run.output.rstrip()}" if run.command else ""
        parts.append(f"{head}\n{body}".rstrip())
    return "\n\n".join(parts)
