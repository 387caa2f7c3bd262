"""What a turn's write checks have spent, pure: the retries each check set has
used this turn, the baselines taken, and the status lines and notes its verdicts give (UNW-AI-01,
GBR-TRUTH-01). Moved out of `agent.machine` (issue 36), which asks it and turns
the lines into `Show("check")` actions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gbr_node.checks.builtin import BUILTIN_MAX_RETRIES
from gbr_node.checks.diagnostics import plural
from gbr_node.checks.plan import CheckSpec, CheckTarget, targets
from gbr_node.checks.verdict import Verdict, closing_line


class CheckRetries:
    """The retries each check set has spent this turn (`spent`, by name; the
    built-in parse checks as "builtin KIND") and the targets it has a baseline
    of (`baselined`); `clear` at a turn's start."""

    def __init__(self) -> None:
        self.spent: Counter[str] = Counter()
        self.baselined: set[CheckTarget] = set()

    def clear(self) -> None:
        self.spent.clear()
        self.baselined.clear()

    def needs_baseline(self, specs: Sequence[CheckSpec], paths: list[str]) -> list[CheckTarget]:
        """The check targets of `specs` that a call changing `paths` may change and that
        this turn has no baseline of yet (now counted as taken)."""
        found = [t for t in targets(specs, paths) if t not in self.baselined]
        self.baselined.update(found)
        return found

    def judge_parses(self, broken: Iterable[Mapping[str, Any]]) -> tuple[list[str], bool]:
        """The built-in parse check (GBR-TRUTH-01): the local writes of this answer that
        left a file unparsable (`broken`: their results' `structured["parse"]`) count
        as retries of check KIND, like a `[checks.NAME]` failure. Returns one status
        line per kind, and True when a kind has spent its `BUILTIN_MAX_RETRIES` (then
        the lines are the turn's closing lines)."""
        by_kind: dict[str, list[Mapping[str, Any]]] = {}
        for parse in broken:
            by_kind.setdefault(str(parse.get("kind")), []).append(parse)
        lines: list[str] = []
        exhausted = False
        for kind, found in by_kind.items():
            paths = ", ".join(dict.fromkeys(str(p.get("path")) for p in found))
            key = f"builtin {kind}"  # apart from a `[checks.python]` set's retries
            if self.spent[key] < BUILTIN_MAX_RETRIES:
                self.spent[key] += 1
                count = f"{self.spent[key]}/{BUILTIN_MAX_RETRIES}"
                lines.append(f"check {kind}: {paths} does not parse -> retry {count}")
            else:
                exhausted = True
                errors = plural(len(found), "error")
                lines.append(closing_line(kind, errors, paths))
        return lines, exhausted

    def judge_verdicts(
        self, verdicts: Sequence[Verdict], specs: Iterable[CheckSpec]
    ) -> tuple[list[str], list[str], bool]:
        """The check sets' verdicts on a change: one status line each, the notes for the
        model, and True when a set still fails with no retry left anywhere (the turn
        ends)."""
        by_name = {spec.name: spec for spec in specs}
        lines: list[str] = []
        notes: list[str] = []
        retry = False
        failing = [v for v in verdicts if v.failing]
        for verdict in verdicts:
            limit = by_name[verdict.name].max_retries if verdict.name in by_name else 0
            if verdict.failing and self.spent[verdict.name] < limit:
                self.spent[verdict.name] += 1
                retry = True
                count = self.spent[verdict.name]
                lines.append(verdict.status_line(count, limit, exhausted=False))
                notes.append(verdict.note())
            elif verdict.failing:
                lines.append(verdict.status_line(0, limit, exhausted=True))
                notes.append(verdict.note(exhausted=True, max_retries=limit))
            else:
                spent = self.spent[verdict.name]
                lines.append(verdict.status_line(spent, limit, exhausted=False))
                if spent or verdict.timed_out is not None or verdict.not_run is not None:
                    notes.append(verdict.note())
        return lines, notes, bool(failing) and not retry
