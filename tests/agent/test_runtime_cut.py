"""`/s` cuts the model's stream before anything else runs (ADR-0010, issue 35).

`AgentRuntime` against an in-memory model whose stream never ends on its own: the
stream a suggestion cuts is closed before the turn's end is drawn and before the
next request is made.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from gbr_node.agent.dispatch import Dispatcher
from gbr_node.agent.machine import AgentMachine, Show
from gbr_node.agent.messages import InterruptAndSuggest, UserPrompt
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.agent.session import Session
from gbr_node.llm.events import TextDelta


class EndlessModel:
    """Streams one word, then waits forever; logs each request and each closed stream."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.requests = 0

    @asynccontextmanager
    async def stream_chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> AsyncIterator[AsyncIterator[TextDelta]]:
        self.requests += 1
        number = self.requests
        self.log.append(f"request {number}")

        async def events() -> AsyncIterator[TextDelta]:
            yield TextDelta("word ")
            await trio.sleep_forever()

        try:
            yield events()
        finally:
            self.log.append(f"closed {number}")


async def test_the_cut_stream_is_closed_before_the_turn_end_and_the_next_request() -> None:
    log: list[str] = []
    model = EndlessModel(log)

    def render(action: Show) -> None:
        if action.kind in ("text", "turn_end"):
            log.append(f"show {action.kind}")

    machine = AgentMachine(Session("be brief"), lambda: [])
    no_tools = Dispatcher(lambda: None)  # type: ignore[arg-type,return-value]  # no tool runs here
    runtime = AgentRuntime(machine, lambda: model, no_tools, render)
    async with trio.open_nursery() as nursery:
        await nursery.start(runtime.run)
        await runtime.inbox.send(UserPrompt("write a long answer"))
        with trio.fail_after(5):
            while "show text" not in log:
                await trio.sleep(0.001)
            await runtime.inbox.send(InterruptAndSuggest("shorter"))
            while "request 2" not in log:
                await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    cut = log.index("closed 1")
    assert cut < log.index("show turn_end") and cut < log.index("request 2"), log
