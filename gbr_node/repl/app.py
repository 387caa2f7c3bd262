"""The interactive REPL: keyboard in a thread, everything else in trio.

The input line stays usable while the model streams and tools run: a worker
thread runs prompt_toolkit's `prompt()` and hands each line to the trio loop
(the pattern of trio's own `_repl.py`), while answers are printed above the
input line through prompt_toolkit's stdout proxy. A plain line typed while the
agent works is queued; `/s TEXT` cuts in (ADR-0010); Ctrl-C stops the current
answer; Ctrl-D leaves.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import contextmanager
from typing import Protocol

import trio

from gbr_node.agent.messages import CompactContext, Interrupt, InterruptAndSuggest, UserPrompt
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.errors import GbrError
from gbr_node.repl.commands import (
    APPROVAL_COMMANDS,
    CommandError,
    SlashCommand,
    help_text,
    parse_line,
)
from gbr_node.repl.render import DIM, RESET, Renderer

PROMPT = "› "
STREAM_WRITE_DELAY_S = 0.02


class NodeControl(Protocol):
    """What the REPL's slash commands need of the running node."""

    runtime: AgentRuntime

    def tools_lines(self) -> list[str]: ...

    def peers_lines(self) -> list[str]: ...

    async def dial(self, multiaddr: str) -> str: ...

    async def env_command(self, args: str) -> str: ...

    async def approvals_command(self, name: str, args: str) -> str: ...

    async def lib_command(self, query: str) -> str: ...

    async def with_library_context(self, prompt: UserPrompt) -> UserPrompt: ...

    async def check_command(self, args: str) -> str: ...

    def edit_approval(self, args: str) -> str:
        """`/edit N`, run in the input thread while it owns the terminal."""
        ...


class _Quit(Exception):
    pass


class Repl:
    """Runs the terminal conversation for one node until `/quit` or Ctrl-D."""

    def __init__(self, node: NodeControl, renderer: Renderer) -> None:
        self._node = node
        self._render = renderer

    async def run(self) -> None:
        """Read lines until the person leaves; returns normally then."""
        send, receive = trio.open_memory_channel(0)
        token = trio.lowlevel.current_trio_token()
        with _patched_stdout():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_sigint)
                nursery.start_soon(
                    lambda: trio.to_thread.run_sync(
                        _read_lines, send, token, self._node.edit_approval, abandon_on_cancel=True
                    )
                )
                try:
                    async for kind, text in receive:
                        await self._handle(kind, text)
                except _Quit:
                    pass
                nursery.cancel_scope.cancel()

    async def _watch_sigint(self) -> None:
        import signal

        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                await self._handle("interrupt", "")

    async def _handle(self, kind: str, text: str) -> None:
        runtime = self._node.runtime
        if kind == "eof":
            raise _Quit
        if kind == "output":
            self._render.line(text)
            return
        if kind == "interrupt":
            if runtime.machine.prompt_id is None:
                self._render.line(f"{DIM}(nothing to stop; Ctrl-D or /quit leaves){RESET}")
            else:
                await runtime.inbox.send(Interrupt())
            return
        try:
            parsed = parse_line(text)
        except CommandError as exc:
            self._render.line(str(exc))
            return
        if isinstance(parsed, UserPrompt):
            await runtime.inbox.send(await self._node.with_library_context(parsed))
        elif isinstance(parsed, InterruptAndSuggest):
            await runtime.inbox.send(parsed)
        elif isinstance(parsed, SlashCommand):
            await self._command(parsed)

    async def _command(self, cmd: SlashCommand) -> None:
        out: Callable[[str], None] = self._render.line
        try:
            if cmd.name == "quit":
                raise _Quit
            if cmd.name == "help":
                out(help_text())
            elif cmd.name == "tools":
                out("\n".join(self._node.tools_lines()) or "no tools")
            elif cmd.name == "peers":
                out("\n".join(self._node.peers_lines()) or "no trusted peers in this profile")
            elif cmd.name == "dial":
                out(await self._node.dial(cmd.args))
            elif cmd.name == "history":
                out(history_text(self._node.runtime))
            elif cmd.name == "clear":
                self._node.runtime.machine.session.clear()
                out("conversation cleared")
            elif cmd.name == "compact":
                await self._node.runtime.inbox.send(CompactContext())
            elif cmd.name == "env":
                text = await self._node.env_command(cmd.args)
                if text:
                    out(text)
            elif cmd.name == "lib":
                out(await self._node.lib_command(cmd.args))
            elif cmd.name == "check":
                out(await self._node.check_command(cmd.args))
            elif cmd.name in APPROVAL_COMMANDS:
                out(await self._node.approvals_command(cmd.name, cmd.args))
        except GbrError as exc:
            out(f"error: {exc}")


def history_text(runtime: AgentRuntime) -> str:
    """The conversation for `/history`: one block per message, cut parts marked
    `[interrupted]` and late tool results of an interrupted turn `[stale]` (ADR-0010)."""
    blocks = []
    for entry in runtime.machine.session.entries[1:]:
        msg = entry.message
        role = msg["role"]
        body = msg.get("content") or ""
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


def _read_lines(
    send: trio.MemorySendChannel,
    token: trio.lowlevel.TrioToken,
    edit: Callable[[str], str],
) -> None:
    """Worker thread: read lines and hand them to trio as (kind, text) pairs.

    `/edit N` is carried out here, between two prompts, because `$EDITOR`
    needs the terminal that this thread owns (EVD-DEV-02); its report is
    handed over as ("output", text).
    """
    session = _prompt_session()
    while True:
        try:
            line = session.prompt(PROMPT) if session else _plain_readline()
        except KeyboardInterrupt:
            trio.from_thread.run(send.send, ("interrupt", ""), trio_token=token)
            continue
        except EOFError:
            trio.from_thread.run(send.send, ("eof", ""), trio_token=token)
            return
        if _is_quit(line):  # leave now, before drawing another prompt
            trio.from_thread.run(send.send, ("eof", ""), trio_token=token)
            return
        if line.strip().lower().startswith("/edit "):
            trio.from_thread.run(send.send, ("output", edit(line.strip()[6:])), trio_token=token)
            continue
        trio.from_thread.run(send.send, ("line", line), trio_token=token)


def _is_quit(line: str) -> bool:
    try:
        return parse_line(line) == SlashCommand("quit")
    except CommandError:
        return False


def _plain_readline() -> str:
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


def _prompt_session():
    if not sys.stdin.isatty():
        return None
    # No cursor-position requests: we show no menus that need them, and a
    # terminal that never answers one would stall every redraw.
    os.environ.setdefault("PROMPT_TOOLKIT_NO_CPR", "1")
    from prompt_toolkit import PromptSession

    return PromptSession()


@contextmanager
def _patched_stdout():
    """Route prints through prompt_toolkit so they appear above the input line."""
    if not sys.stdin.isatty():
        yield
        return
    from prompt_toolkit.patch_stdout import StdoutProxy

    proxy = StdoutProxy(raw=True, sleep_between_writes=STREAM_WRITE_DELAY_S)
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = proxy  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        proxy.close()
