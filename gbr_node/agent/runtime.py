"""The agent task: one inbox, the state machine's decisions carried out.

`AgentRuntime.run` owns a nursery in which every inference (each in its own
cancel scope, so `/s` and Ctrl-C cut it at once) and every tool call runs.
The loop itself only receives a message, asks `AgentMachine.handle` what to
do, and starts or cancels tasks: it never awaits the network (ADR-0012b). The
one thing it waits for is a cancelled inference's end (a closed stream, at
most `CUT_WAIT_S`), so the stream `/s` cuts closes before anything else runs.

Write checks (UNW-AI-01 / STD-DEV-01): a `TakeBaseline` runs the checks in a
worker thread and keeps the runs as the turn's baseline; the answer's tool
calls wait for it. A `RunCheck` runs them again and sends the verdicts
(`checks.verdict.judge`) as `CheckDone`. Each inference's check processes
share one `Stop`: `CancelCheck` (`/s`, Ctrl-C) kills them at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Protocol

import trio

from gbr_node.agent.dispatch import Dispatcher
from gbr_node.agent.machine import (
    Action,
    AgentMachine,
    CancelCheck,
    CancelInference,
    RunCheck,
    RunTool,
    Show,
    StartInference,
    TakeBaseline,
)
from gbr_node.agent.messages import CheckDone, DirectPrompt
from gbr_node.agent.oracle import ChatModel, run_inference
from gbr_node.checks.plan import CheckRun, CheckTarget
from gbr_node.checks.verdict import judge
from gbr_node.tools.base import SEEN, TURN
from gbr_node.tools.process import Stop

CUT_WAIT_S = 1.0
"""How long a new inference waits for a cancelled one to end (its stream closed), seconds."""


class Checks(Protocol):
    """What the runtime needs of the profile's checks (`tools.checkrunner.CheckRunner`)."""

    def run(
        self, wanted: tuple[CheckTarget, ...], stop: Stop | None = None
    ) -> tuple[CheckRun, ...]: ...


def _no_checks() -> Checks | None:
    return None


class AgentRuntime:
    """Drives an `AgentMachine`.

    Args:
        machine: the decisions.
        model: returns the current model client.
        dispatcher: runs tool calls.
        render: called with every `Show` action, in order, from the trio thread.
        checks: returns the checks in force (None: none).
        changed: the files a turn changed, by its checkpoint id (`TURN`), as the
            checkpoint store knows them (None: it cannot tell); each turn's end shows
            them (GBR-TRUTH-01). Without it, nothing is said.
    `last_check` holds the runs of the last check (for `/check`).
    Use `inbox` (a trio MemorySendChannel) to send it `UserPrompt`,
    `Interrupt`, `InterruptAndSuggest`, `UpdateEnv` and feedback messages.
    """

    def __init__(
        self,
        machine: AgentMachine,
        model: Callable[[], ChatModel],
        dispatcher: Dispatcher,
        render: Callable[[Show], None],
        checks: Callable[[], Checks | None] = _no_checks,
        changed: Callable[[str], list[str] | None] | None = None,
    ) -> None:
        self.machine = machine
        self._model = model
        self._dispatcher = dispatcher
        self._render = render
        self.inbox, self._receive = trio.open_memory_channel(math.inf)
        self._scopes: dict[int, trio.CancelScope] = {}
        self._ended: dict[int, trio.Event] = {}
        """Prompt id -> set once its inference task has ended (its stream closed)."""
        self._idle = trio.Event()
        self._idle.set()
        self._checks = checks
        self._changed = changed
        self._baseline: dict[CheckTarget, CheckRun] = {}
        self._baseline_turn = 0
        self._started = time.strftime("%Y%m%d-%H%M%S")
        """This runtime's start, in the ids of its turns' checkpoints (`TURN`)."""
        self._baseline_ready: dict[int, trio.Event] = {}
        self._stops: dict[int, Stop] = {}
        self.last_check: tuple[CheckRun, ...] = ()
        self.checked: dict[CheckTarget, None] = {}
        """Every target checked in this session, in order (`/check run` runs them again)."""

    async def run(
        self,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,  # type: ignore[name-defined]  # stale trio-typing stubs (see pyproject)
    ) -> None:
        """Serve the inbox until cancelled; tasks it started are cancelled with it."""
        async with trio.open_nursery() as nursery:
            task_status.started()
            async for msg in self._receive:
                for action in self.machine.handle(msg):
                    self._carry_out(action, nursery)
                    if isinstance(action, CancelInference):
                        await self._wait_ended(action.prompt_id)
                if self.machine.prompt_id is None:
                    self._idle.set()
                elif self._idle.is_set():
                    self._idle = trio.Event()

    async def wait_idle(self) -> None:
        """Return once no turn is in progress."""
        await self._idle.wait()

    def _carry_out(self, action: Action, nursery: trio.Nursery) -> None:
        if isinstance(action, StartInference):
            self._render(Show("waiting"))
            scope = trio.CancelScope()
            self._scopes[action.prompt.prompt_id] = scope
            self._ended[action.prompt.prompt_id] = trio.Event()
            nursery.start_soon(self._infer, scope, action.prompt)
        elif isinstance(action, CancelInference):
            running = self._scopes.get(action.prompt_id)
            if running is not None:
                del self._scopes[action.prompt_id]
                running.cancel()
        elif isinstance(action, RunTool):
            nursery.start_soon(self._run_tool, action)
        elif isinstance(action, TakeBaseline):
            self._baseline_ready[action.prompt_id] = trio.Event()
            nursery.start_soon(self._take_baseline, action)
        elif isinstance(action, RunCheck):
            nursery.start_soon(self._run_check, action)
        elif isinstance(action, CancelCheck):
            stop = self._stops.pop(action.prompt_id, None)
            if stop is not None:
                stop.stop()
            ready = self._baseline_ready.pop(action.prompt_id, None)
            if ready is not None:
                ready.set()
        elif isinstance(action, Show):
            if action.kind == "turn_end" and self._changed and action.turn is not None:
                changed = self._changed(self.turn_id(action.turn))
                data = {**action.data, "changed": changed}
                action = Show(action.kind, action.text, data, turn=action.turn)
            self._render(action)

    def turn_id(self, turn: int) -> str:
        """The checkpoint id of this runtime's turn number `turn` (what `TURN` holds)."""
        return f"{self._started}.{turn}"

    async def _infer(self, scope: trio.CancelScope, prompt: DirectPrompt) -> None:
        try:
            with scope:
                await run_inference(self._model, prompt, self.inbox)
        finally:
            self._scopes.pop(prompt.prompt_id, None)
            self._ended.pop(prompt.prompt_id).set()

    async def _wait_ended(self, prompt_id: int) -> None:
        """Let the cancelled inference `prompt_id` end (its stream closed) before the
        next action: what `/s` cuts is closed before the answer's end is drawn and the
        next request is built (issue 35); at most CUT_WAIT_S seconds."""
        ended = self._ended.get(prompt_id)
        if ended is not None:
            with trio.move_on_after(CUT_WAIT_S):
                await ended.wait()

    async def _run_tool(self, action: RunTool) -> None:
        ready = self._baseline_ready.get(action.prompt_id)
        if ready is not None:
            await ready.wait()
        TURN.set(self.turn_id(action.turn))  # this task's context only (GBR-UNDO-01)
        SEEN.set(action.seen)  # read before replaced whole (issue 32)
        await self._dispatcher.run(action.prompt_id, action.call, self.inbox)

    async def run_checks(self, wanted: tuple[CheckTarget, ...], stop: Stop) -> tuple[CheckRun, ...]:
        """Run the checks `wanted` in a worker thread (killed by `stop`); () without checks.
        Kept as `last_check`."""
        checks = self._checks()
        if checks is None or not wanted:
            return ()
        runs = await trio.to_thread.run_sync(checks.run, wanted, stop, abandon_on_cancel=True)  # type: ignore[call-arg]  # stale trio-typing stubs (see pyproject)
        self.last_check = runs
        self.checked.update(dict.fromkeys(wanted))
        return runs

    async def _take_baseline(self, action: TakeBaseline) -> None:
        if action.turn != self._baseline_turn:
            self._baseline, self._baseline_turn = {}, action.turn
        stop = self._stops.setdefault(action.prompt_id, Stop())
        try:
            for run in await self.run_checks(action.targets, stop):
                self._baseline[run.target] = run
        finally:
            self._stops.pop(action.prompt_id, None)
            self._baseline_ready.pop(action.prompt_id, trio.Event()).set()

    async def _run_check(self, action: RunCheck) -> None:
        stop = self._stops.setdefault(action.prompt_id, Stop())
        runs = await self.run_checks(action.targets, stop)
        self._stops.pop(action.prompt_id, None)
        if stop.stopped:
            return
        baseline = self._baseline if action.turn == self._baseline_turn else {}
        await self.inbox.send(CheckDone(action.prompt_id, tuple(judge(runs, baseline))))
