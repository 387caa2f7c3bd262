"""The checks service: the check sets in force for the agent's machine
(UNW-AI-01), the checks writes go through (issue 17) and `/check`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gbr_node.checks.plan import CheckRun, CheckSpec, CheckTarget
from gbr_node.checks.verdict import full_report
from gbr_node.errors import GbrError
from gbr_node.slash import Command
from gbr_node.tools.checkrunner import CheckRunner
from gbr_node.tools.process import Stop


class CheckingAgent(Protocol):
    """What `/check` needs of the agent's runtime (`agent.runtime.AgentRuntime`)."""

    @property
    def checked(self) -> dict[CheckTarget, None]: ...

    @property
    def last_check(self) -> tuple[CheckRun, ...]: ...

    async def run_checks(
        self, wanted: tuple[CheckTarget, ...], stop: Stop
    ) -> tuple[CheckRun, ...]: ...


class ChecksService:
    """The checks of the profile in force (`runner` gives the `CheckRunner` the
    toolbox built for it) and `/check`; `agent` gives the agent's runtime, None
    where no agent runs."""

    commands = (
        Command(
            "check",
            "[run]",
            "show the last write check's full output; /check run runs the checks now",
        ),
    )

    def __init__(
        self,
        runner: Callable[[], CheckRunner],
        agent: Callable[[], CheckingAgent | None] = lambda: None,
    ) -> None:
        self._runner = runner
        self._agent = agent

    def check_specs(self) -> tuple[CheckSpec, ...]:
        """The check sets in force, for the agent's machine (UNW-AI-01)."""
        return self._runner().specs()

    async def command(self, name: str, args: str) -> str:
        """`/check`: the last write check's full output; `/check run`: run the checks now
        (on every file checked in this session, and the project-wide ones)."""
        word = args.strip()
        if word not in ("", "run"):
            raise GbrError("usage: /check, /check run")
        runtime = self._agent()
        if runtime is None:
            raise GbrError("no agent runs here")
        if word == "run":
            specs = self._runner().specs()
            if not specs:
                return "no check in force (the profile's [checks] has none found on PATH)"
            known = {spec.name for spec in specs}
            wanted = [t for t in runtime.checked if t.name in known]
            wanted += [CheckTarget(s.name) for s in specs if not s.per_file]
            wanted = list(dict.fromkeys(wanted))
            if not wanted:
                return "nothing to check yet: no file a per-file check covers was changed"
            await runtime.run_checks(tuple(wanted), Stop())
        if not runtime.last_check:
            return "no check has run in this session"
        return full_report(runtime.last_check)
