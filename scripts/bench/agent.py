"""Benchmark: the agent's own overhead per tool turn (issue 4), in milliseconds.

Run: `.venv/bin/python scripts/bench/agent.py [--turns 200] [--quick]` (`--quick`:
5 turns, a smoke run of the same code). In one trio
process: the real test model server, a real `ModelClient`, the agent as the
node builds it (`Session` journaled to a JSONL file, `AgentMachine`,
`AgentRuntime`, `Dispatcher`) and the real tool registry over a sandboxed
temporary project. Each turn: a prompt; the model calls `read_file` on a
42-byte file; the agent runs it and prompts again; the model answers text.

How it is timed: two thin wrappers at the agent's own boundaries (the
`ChatModel` and `LocalTools` protocols) stamp `time.monotonic()`, and the
server stamps each request's arrival with the same clock. No product code is
changed for the measurement.

- last byte → dispatched: from the model client handing over the final
  `Completion` of the tool-call answer (its last byte read, the response
  released) to the dispatcher awaiting `Registry.run`. Covers the oracle, the
  inbox, the state machine, the journal write and the runtime.
- result → request: from `Registry.run` returning (the handler done in its
  worker thread and handed back) to the agent asking the model client for the
  next inference (`stream_chat` called). Covers the inbox, the machine, the
  journal and the history copy.
- result → at server: the same end point moved to the request's arrival at
  the server (adds httpx building and sending the request over loopback and
  the server reading it).

Two histories: "fresh" clears the conversation before every turn (a short
request), "long" keeps it, so the last turns carry 4 × turns messages.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gbr_node.agent.dispatch import Dispatcher  # noqa: E402 (needs the path above)
from gbr_node.agent.journal import Journal, new_journal_path  # noqa: E402
from gbr_node.agent.machine import AgentMachine, Show  # noqa: E402
from gbr_node.agent.messages import UserPrompt  # noqa: E402
from gbr_node.agent.runtime import AgentRuntime  # noqa: E402
from gbr_node.agent.session import Session  # noqa: E402
from gbr_node.config.profile import ToolsConfig  # noqa: E402
from gbr_node.llm.client import ModelClient  # noqa: E402
from gbr_node.llm.events import Completion  # noqa: E402
from gbr_node.llm.settings import ClientSettings  # noqa: E402
from gbr_node.sandbox import Sandbox  # noqa: E402
from gbr_node.tools.base import ToolResult  # noqa: E402
from gbr_node.tools.registry import Registry, build_registry  # noqa: E402
from tests.support.model_server import ModelServer  # noqa: E402
from tests.support.replies import text_reply, tool_call_reply  # noqa: E402

TURN_TIMEOUT_S = 10.0


class Stamps:
    """Monotonic times (seconds) of the events of the current turn, by name."""

    def __init__(self) -> None:
        self.at: dict[str, list[float]] = {}

    def mark(self, name: str) -> None:
        self.at.setdefault(name, []).append(time.monotonic())

    def clear(self) -> None:
        self.at.clear()


class TimedModel:
    """A `ChatModel` that stamps "asked" when an inference starts and "done" at its Completion."""

    def __init__(self, client: ModelClient, stamps: Stamps) -> None:
        self._client = client
        self._stamps = stamps

    @asynccontextmanager
    async def stream_chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> AsyncIterator[AsyncIterable[Any]]:
        self._stamps.mark("asked")
        async with self._client.stream_chat(messages, tools) as stream:
            yield self._stamped(stream)

    async def _stamped(self, stream: AsyncIterable[Any]) -> AsyncIterator[Any]:
        async for event in stream:
            if isinstance(event, Completion):
                self._stamps.mark("done")
            yield event


class TimedTools:
    """`LocalTools` over the real registry, stamping "tool_start" and "tool_end"
    around `Registry.run` (which hands the handler to a worker thread)."""

    def __init__(self, registry: Registry, stamps: Stamps) -> None:
        self._registry = registry
        self._stamps = stamps

    def specs(self) -> list[dict[str, Any]]:
        return self._registry.specs()

    def has(self, name: str) -> bool:
        return self._registry.has(name)

    async def run(self, name: str, arguments: dict[str, Any] | None) -> ToolResult:
        self._stamps.mark("tool_start")
        try:
            return await self._registry.run(name, arguments)
        finally:
            self._stamps.mark("tool_end")


async def run_turns(turns: int, fresh: bool) -> dict[str, list[float]]:
    """Run `turns` tool turns; returns the three overheads in milliseconds, per turn."""
    out: dict[str, list[float]] = {"dispatch": [], "request": [], "arrival": []}
    stamps = Stamps()
    with ModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "small.txt").write_text("a small file for the agent benchmark.\n\n\n\n")
        registry = build_registry(ToolsConfig(), Sandbox(root))
        journal = Journal(new_journal_path(root))
        session = Session("You are a benchmark agent.", on_change=journal.record)
        settings = ClientSettings(base_url=server.base_url, model="test-model")
        async with ModelClient(settings) as client:
            model = TimedModel(client, stamps)
            dispatcher = Dispatcher(lambda: TimedTools(registry, stamps))
            machine = AgentMachine(session, dispatcher.chat_tools)
            ended = trio.Event()

            def render(show: Show) -> None:
                if show.kind == "error":
                    raise RuntimeError(show.text)
                if show.kind == "turn_end":
                    ended.set()

            runtime = AgentRuntime(machine, lambda: model, dispatcher, render)
            async with trio.open_nursery() as nursery:
                await nursery.start(runtime.run)
                for _ in range(turns):
                    if fresh:
                        session.clear()
                    server.enqueue(tool_call_reply("read_file", {"path": "small.txt"}))
                    server.enqueue(text_reply("Read it."))
                    asked = len(server.chat_bodies)
                    stamps.clear()
                    ended = trio.Event()
                    with trio.fail_after(TURN_TIMEOUT_S):
                        await runtime.inbox.send(UserPrompt("read small.txt"))
                        await ended.wait()
                    at = stamps.at
                    arrived = server.requests[asked + 1].at
                    out["dispatch"].append((at["tool_start"][0] - at["done"][0]) * 1000)
                    out["request"].append((at["asked"][1] - at["tool_end"][0]) * 1000)
                    out["arrival"].append((arrived - at["tool_end"][0]) * 1000)
                nursery.cancel_scope.cancel()
        journal.close()
        problems = [r.problem for r in server.requests if r.problem]
        if problems:
            raise RuntimeError(f"the server refused requests: {problems[:3]}")
    return out


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile `q` (0..100) of `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="smoke run: 5 turns")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns = 5
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"agent overhead per tool turn, {args.turns} turns per history (ms); load {load}")
    print(f"{'history':<9}{'measure':<30}{'median':>8}{'p95':>8}{'max':>8}")
    labels = {
        "dispatch": "last byte → tool dispatched",
        "request": "tool result → request sent",
        "arrival": "tool result → at the server",
    }
    for fresh in (True, False):
        results = trio.run(run_turns, args.turns, fresh)
        history = "fresh" if fresh else "long"
        for key, label in labels.items():
            values = results[key]
            print(
                f"{history:<9}{label:<30}{statistics.median(values):>8.2f}"
                f"{percentile(values, 95):>8.2f}{max(values):>8.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
