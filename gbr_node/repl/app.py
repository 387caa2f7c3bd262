"""The interactive REPL: keyboard in a thread, everything else in trio.

The input stays usable while the model streams and tools run (see
`repl.screen` for how the terminal is drawn). A worker thread runs the input
and hands each line to the trio loop (the pattern of trio's own `_repl.py`);
every agent action and notice goes to the `Screen`. A plain line typed while
the agent works is queued and drawn as `› line` when it runs; `/s TEXT` cuts
in (ADR-0010); Ctrl-C stops the current answer; Ctrl-D or `/quit` leaves.
Without a terminal (a pipe, `TERM=dumb`) lines are read from stdin and the
answer is written as plain text as it streams.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

import trio

from gbr_node.agent.machine import Show
from gbr_node.agent.messages import CompactContext, Interrupt, InterruptAndSuggest, UserPrompt
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.errors import GbrError
from gbr_node.repl.commands import (
    OWN_TABLE,
    CommandError,
    SlashCommand,
    complete,
    help_text,
    parse_line,
)
from gbr_node.repl.render import DIM, RESET
from gbr_node.repl.screen import Screen
from gbr_node.repl.usage import UsageMeter, session_report
from gbr_node.repl.view import View
from gbr_node.slash import Command, Commands, TerminalCommands


class AgentSide(Protocol):
    """The agent as the REPL drives it (`agent.service.AgentService`)."""

    runtime: AgentRuntime | None  # set before the node calls `Repl.ready()`

    async def with_turn_context(self, prompt: UserPrompt) -> UserPrompt: ...


@dataclass(frozen=True)
class NodeControl:
    """What the REPL needs of the running node (`control.Node.repl_control` wires it):
    the agent, the lines of its status and Tab completion, and the services that
    answer the slash commands of `table` beyond the REPL's own (`repl.commands`)."""

    agent: AgentSide
    pending_approval_ids: Callable[[], list[int]]
    agent_approval_ids: Callable[[], list[int]]
    peer_aliases: Callable[[], list[str]]
    profile_names: Callable[[], list[str]]
    prices: Callable[[], tuple[str | None, float | None, float | None]]
    """(model name, US$ per million input tokens, per million output tokens)."""
    services: Sequence[Commands] = ()
    table: Mapping[str, Command] = field(default_factory=lambda: OWN_TABLE)

    def owners(self) -> dict[str, Commands]:
        """Which service answers each command of `table` (the REPL's own: none)."""
        return {command.name: s for s in self.services for command in s.commands}


def interactive_terminal() -> bool:
    """True when stdin and stdout are a terminal that can be drawn on (not `TERM=dumb`)."""
    return sys.stdin.isatty() and sys.stdout.isatty() and os.environ.get("TERM") != "dumb"


def open_screen(*, color: bool) -> Screen:
    """The `Screen` for this process: a live one on an interactive terminal, else a stream.
    On the interactive terminal the node reports its program status (OSC 7501,
    `repl.status`) unless `GBR_PROGRAM_STATUS=0`."""
    live = interactive_terminal()
    status = live and os.environ.get("GBR_PROGRAM_STATUS", "1") != "0"
    return Screen(View(color=color, live=live, program_status=status))


STOP_TIMEOUT_S = 2.0


class _Quit(Exception):
    pass


class Repl:
    """Runs the terminal conversation for one node until `/quit` or Ctrl-D.

    `show` is the agent runtime's render callback and `notice` the node's
    notice callback: both may be called from the trio thread at any time.
    """

    def __init__(self, node: NodeControl, screen: Screen) -> None:
        self._node = node
        self._owners = node.owners()
        self._screen = screen
        self.color = screen.view.color
        self.usage = UsageMeter()
        self._ready = trio.Event()
        self._turn_ended = trio.Event()

    def ready(self) -> None:
        """The node is up: lines typed from now on are handled (earlier ones wait)."""
        self._ready.set()

    def show(self, show: Show) -> None:
        """Draw one agent action (the `AgentRuntime` render callback)."""
        summary = self.usage.observe(show, time.monotonic())
        if summary is not None:
            show = Show(show.kind, show.text, {**show.data, "summary": summary})
        if show.kind == "turn_end":
            self._turn_ended.set()
        self._screen.apply(lambda view, width, now: view.show(show, width, now))

    def notice(self, text: str) -> None:
        """A line from the node (reload, approval request or outcome), held while an
        answer streams; the pending approvals shown in the status are refreshed."""
        self._screen.apply(lambda view, width, now: view.notice(text, width))
        self._refresh_approvals()

    def line(self, text: str) -> None:
        """Write `text` (a command's output) on lines of its own."""
        self._screen.apply(lambda view, width, now: view.notice(text, width))

    def _refresh_approvals(self) -> None:
        try:
            ids = tuple(self._node.pending_approval_ids())
            mine = tuple(self._node.agent_approval_ids())
        except GbrError:
            return

        def change(view: View, width: int, now: float) -> str:
            view.pending_approvals, view.waiting_approvals = ids, mine
            return ""

        self._screen.apply(change)

    async def run(
        self,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,  # type: ignore[name-defined]  # stale trio-typing stubs (see pyproject)
    ) -> None:
        """Read lines until the person leaves; returns normally then. `task_status`
        is started once keys typed reach the input (no longer the tty's echo)."""
        send, receive = trio.open_memory_channel(math.inf)
        token = trio.lowlevel.current_trio_token()

        def on_key(kind: str, text: str) -> None:
            token.run_sync_soon(send.send_nowait, (kind, text))

        self._refresh_approvals()
        input_done = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_sigint)
            if self._screen.view.live:
                ready = threading.Event()
                nursery.start_soon(self._run_input, on_key, ready, input_done)
                await trio.to_thread.run_sync(ready.wait)
            else:
                input_done.set()
                nursery.start_soon(
                    lambda: trio.to_thread.run_sync(  # type: ignore[call-arg]  # stale trio-typing stubs (see pyproject)
                        _read_plain, on_key, abandon_on_cancel=True
                    )
                )
            task_status.started()
            try:
                await self._ready.wait()
                async for kind, text in receive:
                    await self._handle(kind, text)
            except _Quit:
                pass
            finally:
                # The input thread puts the terminal back as it was (cooked mode, live
                # part erased) before the process may end.
                self._screen.stop(lambda view, width, now: view.close(width))
                with trio.CancelScope(shield=True), trio.move_on_after(STOP_TIMEOUT_S):
                    await input_done.wait()
            nursery.cancel_scope.cancel()

    async def _run_input(
        self, on_key: Callable[[str, str], None], ready: threading.Event, done: trio.Event
    ) -> None:
        try:
            await trio.to_thread.run_sync(  # type: ignore[call-arg]  # stale trio-typing stubs (see pyproject)
                self._screen.run_input, on_key, self._complete, ready, abandon_on_cancel=True
            )
        finally:
            done.set()

    def _complete(self, before: str) -> list[str]:
        """Completions of the line before the cursor (called in the input thread)."""
        return complete(
            before,
            aliases=self._node.peer_aliases(),
            approvals=self._screen.view.pending_approvals,
            profiles=self._node.profile_names(),
            table=self._node.table,
        )

    async def _watch_sigint(self) -> None:
        import signal

        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                await self._handle("interrupt", "")

    @property
    def _runtime(self) -> AgentRuntime:
        runtime = self._node.agent.runtime
        if runtime is None:  # a defect: lines are handled only once the node is ready
            raise RuntimeError("the REPL handled a line before the node's runtime was set")
        return runtime

    async def _handle(self, kind: str, text: str) -> None:
        runtime = self._runtime
        if kind == "eof":
            raise _Quit
        if kind == "interrupt":
            if runtime.machine.prompt_id is None:
                self.line(f"{DIM}(nothing to stop; Ctrl-D or /quit leaves){RESET}")
            else:
                await runtime.inbox.send(Interrupt())
            return
        try:
            parsed = parse_line(text, self._node.table)
        except CommandError as exc:
            self._echo(text)
            self.line(str(exc))
            return
        if isinstance(parsed, UserPrompt):
            self._turn_ended = trio.Event()
            await runtime.inbox.send(await self._node.agent.with_turn_context(parsed))
            if not self._screen.view.live:
                # Lines from a pipe are a script: each waits for the answer before it.
                await self._turn_ended.wait()
        elif isinstance(parsed, InterruptAndSuggest):
            self._echo(text)
            await runtime.inbox.send(parsed)
        elif isinstance(parsed, SlashCommand):
            self._echo(text)
            await self._command(parsed)

    def _echo(self, text: str) -> None:
        self._screen.apply(lambda view, width, now: view.echo(text.strip(), width))

    async def _command(self, cmd: SlashCommand) -> None:
        out: Callable[[str], None] = self.line
        node = self._node
        try:
            if cmd.name == "quit":
                raise _Quit
            if cmd.name == "help":
                out(help_text(node.table))
            elif cmd.name == "history":
                out(history_text(self._runtime))
            elif cmd.name == "clear":
                self._runtime.machine.session.clear()
                out("conversation cleared")
            elif cmd.name == "compact":
                await self._runtime.inbox.send(CompactContext())
            elif cmd.name == "usage":
                model, price_in, price_out = node.prices()
                out(session_report(self.usage.session, model, (price_in, price_out)))
            elif node.table[cmd.name].in_terminal:
                service = cast(TerminalCommands, self._owners[cmd.name])
                future = self._screen.suspend(lambda: service.terminal_command(cmd.name, cmd.args))
                out(await trio.to_thread.run_sync(future.result))
            else:
                text = await self._owners[cmd.name].command(cmd.name, cmd.args)
                if text:
                    out(text)
        except GbrError as exc:
            out(f"error: {exc}")
        self._refresh_approvals()


def history_text(runtime: AgentRuntime) -> str:
    """The conversation for `/history`: one block per message, cut parts marked
    `[interrupted]` and late tool results of an interrupted turn `[stale]` (ADR-0010)."""
    blocks = []
    for entry in runtime.machine.session.entries[1:]:
        msg = entry.message
        role = msg["role"]
        body = entry.meta.get("typed") or msg.get("content") or ""  # the person's words
        if msg.get("tool_calls"):
            calls = ", ".join(
                f"{c['function']['name']}({c['function']['arguments'][:80]})"
                for c in msg["tool_calls"]
            )
            body = f"{body}\n  calls: {calls}".strip()
        marks = "".join(f" [{m}]" for m in ("interrupted", "stale") if entry.meta.get(m))
        if role == "tool":
            body = body if len(body) <= 300 else body[:300] + "…"
        blocks.append(f"{role}{marks}: {body}")
    return "\n".join(blocks) or "(empty)"


def _read_plain(on_key: Callable[[str, str], None]) -> None:
    """Worker thread without a terminal: one message per line of stdin."""
    for line in sys.stdin:
        on_key("line", line.rstrip("\n"))
        if _is_quit(line):
            return
    on_key("eof", "")


def _is_quit(line: str) -> bool:
    try:
        return parse_line(line) == SlashCommand("quit")
    except CommandError:
        return False
