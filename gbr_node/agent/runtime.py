"""The agent task: one inbox, the state machine's decisions carried out.

`AgentRuntime.run` owns a nursery in which every inference (each in its own
cancel scope, so `/s` and Ctrl-C cut it at once) and every tool call runs.
The loop itself only receives a message, asks `AgentMachine.handle` what to
do, and starts or cancels tasks: it never awaits the network (ADR-0012b).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import trio

from gbr_node.agent.dispatch import Dispatcher
from gbr_node.agent.machine import (
    Action,
    AgentMachine,
    CancelInference,
    RunTool,
    Show,
    StartInference,
)
from gbr_node.agent.messages import DirectPrompt
from gbr_node.agent.oracle import ChatModel, run_inference


class AgentRuntime:
    """Drives an `AgentMachine`.

    Args:
        machine: the decisions.
        model: returns the current model client.
        dispatcher: runs tool calls.
        render: called with every `Show` action, in order, from the trio thread.
    Use `inbox` (a trio MemorySendChannel) to send it `UserPrompt`,
    `Interrupt`, `InterruptAndSuggest`, `UpdateEnv` and feedback messages.
    """

    def __init__(
        self,
        machine: AgentMachine,
        model: Callable[[], ChatModel],
        dispatcher: Dispatcher,
        render: Callable[[Show], None],
    ) -> None:
        self.machine = machine
        self._model = model
        self._dispatcher = dispatcher
        self._render = render
        self.inbox, self._receive = trio.open_memory_channel(math.inf)
        self._scopes: dict[int, trio.CancelScope] = {}
        self._idle = trio.Event()
        self._idle.set()

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the inbox until cancelled; tasks it started are cancelled with it."""
        async with trio.open_nursery() as nursery:
            task_status.started()
            async for msg in self._receive:
                for action in self.machine.handle(msg):
                    self._carry_out(action, nursery)
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
            nursery.start_soon(self._infer, scope, action.prompt)
        elif isinstance(action, CancelInference):
            scope = self._scopes.pop(action.prompt_id, None)
            if scope is not None:
                scope.cancel()
        elif isinstance(action, RunTool):
            nursery.start_soon(self._dispatcher.run, action.prompt_id, action.call, self.inbox)
        elif isinstance(action, Show):
            self._render(action)

    async def _infer(self, scope: trio.CancelScope, prompt: DirectPrompt) -> None:
        with scope:
            await run_inference(self._model, prompt, self.inbox)
        self._scopes.pop(prompt.prompt_id, None)
