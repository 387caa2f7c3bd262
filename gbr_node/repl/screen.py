"""The terminal: a scrollback written line by line above a live part, and the input.

Why this shape (GBR-TERM-01). prompt_toolkit's stdout proxy prints whatever
it is given above the prompt, partial lines included: a streamed word cut at
the right margin, the prompt drawn after half a line, and every redraw
guessing where the cursor is. A full-screen application with an output pane
would keep the answer out of the terminal's own scrollback (no scrolling
back, no copying after exit). So the answer is split in two:

- whole lines, once final, are written above the live part and never touched
  again: the terminal wraps and scrolls them, and its scrollback holds them;
- the line still being written, the status and the input are a small
  prompt_toolkit `Application` (not full screen) redrawn below them; it is
  re-wrapped on every draw, so a resize or typing can never split the answer.

Writing above is done on the application's own loop: erase the live part,
write the lines, draw the live part again. No cooked-mode switch happens
(unlike `run_in_terminal`), so keys typed meanwhile are never echoed into the
answer by the tty. The application runs in a worker thread with its own
asyncio loop (trio's `_repl.py` pattern); every change to the `View` is
posted to that loop, in order, so one thread owns the screen.

Keys: Enter sends; Alt-Enter or Esc Enter insert a newline; a bracketed
paste is inserted whole (several lines are one message); Tab completes slash
commands, peer aliases, approval ids and profile names; Up/Down walk the
history, kept in the user's state folder across sessions; Ctrl-C stops the
answer (or clears the line when idle); Ctrl-D on an empty line leaves.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from gbr_node.repl.view import PROMPT, Row, View

if TYPE_CHECKING:  # prompt_toolkit itself is imported when the input starts
    from prompt_toolkit import Application
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.history import History
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

LIVE_REDRAW_S = 1 / 20  # at most this often for a streamed piece that wrote no line
TICK_S = 0.1  # the status's elapsed times while busy
SIZE_POLL_S = 0.2  # SIGWINCH reaches only the main thread: the input thread polls
INPUT_ROWS = 10
Change = Callable[[View, int, float], str]
"""A change to the view: (view, width in cells, monotonic now) -> text for the scrollback.
After each, the view's OSC 7501 report (`View.status_report`), if its state changed, is
written with that text."""


def history_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where typed lines are kept across sessions: `$XDG_STATE_HOME/gbr-node/history`,
    by default `~/.local/state/gbr-node/history` (XDG Base Directory spec)."""
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "gbr-node" / "history"


class Screen:
    """The one writer to the terminal while `gbr-node run` lives.

    `apply(change)` changes the view and writes what it returns; from any
    thread while the interactive input runs (it is posted to the input's
    loop), from the trio thread otherwise (written to `out` at once).
    """

    def __init__(self, view: View, out: TextIO | None = None) -> None:
        self.view = view
        self._out = out or sys.stdout
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._early: list[Change] | None = None  # changes made while the input starts
        self._ui: _Input | None = None
        self._stopped = False  # stop() came before the input's loop ran: it ends at once

    def apply(self, change: Change) -> None:
        """Change the view and write what the change returns (see `Change`)."""
        with self._lock:  # held while posting: the loop cannot close in between
            if self._early is not None:
                self._early.append(change)
                return
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._apply_here, change)
                return
        text = change(self.view, self.view.layout_width(_width(self._out)), time.monotonic())
        text += self.view.status_report()
        if text:
            self._out.write(text)
            self._out.flush()

    def _apply_here(self, change: Change) -> None:
        ui = self._ui
        assert ui is not None
        text = change(self.view, ui.width(), time.monotonic())
        ui.write_above(text + self.view.status_report())

    # -- the interactive input -------------------------------------------------

    def run_input(
        self,
        on_key: Callable[[str, str], None],
        complete: Callable[[str], list[str]],
        ready: threading.Event,
    ) -> None:
        """Run the input line in this (worker) thread until `stop()`.

        `on_key(kind, text)` is called in this thread with ("line", text),
        ("interrupt", "") or ("eof", ""); it must not block. `complete(text)`
        gives the completions of the line before the cursor. `ready` is set
        once changes are drawn by this thread.
        """
        with self._lock:
            if self._stopped:  # the node stopped before the input started: none runs
                ready.set()
                return
            self._early = []
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        saved = sys.stdout, sys.stderr
        try:
            self._ui = _Input(self.view, on_key, complete)  # takes the real stdout
            # Anything else printed meanwhile becomes whole lines above the live part.
            sys.stdout = sys.stderr = _LineSink(self)

            def started() -> None:
                with self._lock:
                    early, self._early = self._early or [], None
                    self._loop = loop
                    stopped = self._stopped
                for change in early:
                    self._apply_here(change)
                if stopped:  # stop() came while it started
                    assert self._ui is not None
                    self._ui.exit()
                ready.set()

            loop.call_soon(started)
            loop.run_until_complete(self._ui.run())
        finally:
            sys.stdout, sys.stderr = saved
            with self._lock:
                self._loop, self._early = None, None
            loop.run_until_complete(asyncio.sleep(0))  # changes posted before: written now
            ready.set()
            loop.close()

    def stop(self, final: Change | None = None) -> None:
        """Apply `final`, erase the live part and end `run_input` (from any thread)."""

        def stop_here() -> None:
            if final is not None:
                self._apply_here(final)
            assert self._ui is not None
            self._ui.exit()

        with self._lock:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(stop_here)
                return
            self._stopped = True  # an input not running yet ends as it starts
        if final is not None:
            self.apply(final)

    def suspend(self, work: Callable[[], Any]) -> Future[Any]:
        """Run `work` in a thread with the terminal handed over (for `$EDITOR`):
        the live part is erased, the tty is in cooked mode, and writes wait
        until it returns. Returns a concurrent Future of its result."""
        future: Future[Any] = Future()
        with self._lock:
            loop = self._loop
        if loop is None:

            def run() -> None:
                try:
                    future.set_result(work())
                except BaseException as exc:  # handed to the caller through the future
                    future.set_exception(exc)

            threading.Thread(target=run, daemon=True).start()
            return future

        def start() -> None:
            assert self._ui is not None
            self._ui.suspend(work, future)

        loop.call_soon_threadsafe(start)
        return future


class _LineSink:
    """A text stream whose whole lines go to the screen as notices."""

    def __init__(self, screen: Screen) -> None:
        self._screen = screen
        self._partial = ""

    def write(self, text: str) -> int:
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._screen.apply(_notice(line))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        if sys.__stdout__ is None:  # no stdout at all (pythonw, a closed descriptor)
            raise OSError("no standard output")
        return sys.__stdout__.fileno()


def _notice(line: str) -> Change:
    """The change that writes `line` as a notice."""
    return lambda view, width, now: view.notice(line, width)


class _Input:
    """The prompt_toolkit application: live answer rows, tray, status, input."""

    def __init__(
        self,
        view: View,
        on_key: Callable[[str, str], None],
        complete: Callable[[str], list[str]],
    ) -> None:
        from prompt_toolkit import Application
        from prompt_toolkit.buffer import Buffer
        from prompt_toolkit.filters import Condition
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.key_binding import merge_key_bindings
        from prompt_toolkit.key_binding.defaults import load_key_bindings
        from prompt_toolkit.layout import HSplit, Layout, Window
        from prompt_toolkit.layout.containers import ConditionalContainer
        from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
        from prompt_toolkit.layout.dimension import Dimension
        from prompt_toolkit.output.color_depth import ColorDepth
        from prompt_toolkit.styles import Style

        # No cursor-position requests: nothing here needs them, and a terminal
        # that never answers one would stall the first draw.
        os.environ.setdefault("PROMPT_TOOLKIT_NO_CPR", "1")
        self.view = view
        self._on_key = on_key
        self._complete = complete
        self._held: list[str] | None = None  # writes held while the terminal is handed over
        self._closing = False
        self._last_draw = 0.0
        self._draw_later: asyncio.TimerHandle | None = None
        path = history_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))  # what you type is yours
            history: History = FileHistory(str(path))
        except OSError:
            history = InMemoryHistory()
        self.buffer = Buffer(multiline=True, history=history, enable_history_search=False)
        self.buffer.on_text_changed += self._clear_hint

        def rows(get: Callable[[int], list[Row]]) -> ConditionalContainer:
            def text() -> StyleAndTextTuples:
                out: StyleAndTextTuples = []
                for style, row in get(self.width()):
                    out += [(f"class:{style}" if style else "", row), ("", "\n")]
                return out[:-1]

            window = Window(
                FormattedTextControl(text, focusable=False),
                dont_extend_height=True,
                wrap_lines=False,
            )
            return ConditionalContainer(window, filter=Condition(lambda: bool(get(self.width()))))

        def answer(width: int) -> list[Row]:
            return view.answer_rows(width, max(1, self.rows() // 2))

        body = HSplit(
            [
                rows(answer),
                rows(view.tray_rows),
                rows(lambda width: view.status_rows(width, time.monotonic())),
                Window(
                    BufferControl(self.buffer),
                    get_line_prefix=lambda line, wrap: PROMPT if line == 0 and wrap == 0 else "  ",
                    wrap_lines=True,
                    dont_extend_height=True,
                    height=Dimension(min=1, max=INPUT_ROWS),
                ),
            ]
        )
        visible = Condition(lambda: not self._closing)
        style = Style.from_dict({"dim": "#888888", "warn": "#d7af00", "prompt": "bold"})
        self.app: Application[None] = Application(
            layout=Layout(ConditionalContainer(body, filter=visible), focused_element=self.buffer),
            key_bindings=merge_key_bindings([load_key_bindings(), self._bindings()]),
            style=style,
            color_depth=ColorDepth.DEPTH_8_BIT if view.color else ColorDepth.DEPTH_1_BIT,
            erase_when_done=True,
            terminal_size_polling_interval=SIZE_POLL_S,
        )

    def _bindings(self) -> KeyBindings:
        from prompt_toolkit.key_binding import KeyBindings

        kb = KeyBindings()

        @kb.add("enter")
        def _send(event: KeyPressEvent) -> None:
            text = self.buffer.text
            if text.strip():
                self._on_key("line", text)
                # Let the trio thread take the line now (`/s` cuts the stream there),
                # before this thread keeps the GIL to redraw (issue 35).
                os.sched_yield()
                self.buffer.append_to_history()
            self.buffer.reset()

        @kb.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            self.buffer.insert_text("\n")

        @kb.add("c-c")
        def _interrupt(event: KeyPressEvent) -> None:
            if not self.view.busy and self.buffer.text:
                self.buffer.reset()
            else:
                self._on_key("interrupt", "")

        @kb.add("c-d")
        def _eof(event: KeyPressEvent) -> None:
            if self.buffer.text:
                self.buffer.delete()
            else:
                self._on_key("eof", "")

        @kb.add("tab")
        def _complete(event: KeyPressEvent) -> None:
            before = self.buffer.document.text_before_cursor
            options = self._complete(before)
            if not options:
                return
            common = os.path.commonprefix(options)
            if len(common) > len(before):
                self.buffer.insert_text(common[len(before) :])
            if len(options) == 1:
                if not common.endswith(" "):
                    self.buffer.insert_text(" ")
            else:
                start = common.rfind(" ") + 1
                self.view.hint = "tab: " + "  ".join(o[start:] for o in options)

        return kb

    def _clear_hint(self, _buffer: Any) -> None:
        self.view.hint = ""

    # -- geometry -------------------------------------------------------------

    def width(self) -> int:
        """The width to lay out at: the terminal's now, read on every call (a
        resize is seen at the next write, not at the next size poll), held
        while an answer streams (`View.layout_width`)."""
        return self.view.layout_width(max(1, self.app.output.get_size().columns))

    def rows(self) -> int:
        return max(3, self.app.output.get_size().rows)

    # -- running --------------------------------------------------------------

    async def run(self) -> None:
        """Run until `exit()`; ticks the status's elapsed times while busy."""
        ticker = asyncio.ensure_future(self._tick())
        try:
            # an exit() that came before the application ran ends it as it starts
            await self.app.run_async(handle_sigint=False, pre_run=self._exit_if_closing)
        finally:
            ticker.cancel()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            if self.view.busy:
                self.app.invalidate()

    def _exit_if_closing(self) -> None:
        if self._closing:
            self.app.exit()

    def exit(self) -> None:
        self._closing = True
        future = self.app.future  # set while the application runs
        if self.app.is_running and future is not None and not future.done():
            self.app.exit()

    def write_above(self, text: str) -> None:
        """Write `text` (whole lines) above the live part, then redraw it; with no
        text, redraw soon (at most every LIVE_REDRAW_S)."""
        if self._held is not None:
            if text:
                self._held.append(text)
            return
        if not text:
            self._redraw_soon()
            return
        app = self.app
        if app.is_running:
            app.renderer.erase()
        app.output.write_raw(text.replace("\n", "\r\n"))
        app.output.flush()
        self._last_draw = time.monotonic()
        app.invalidate()

    def _redraw_soon(self) -> None:
        wait = self._last_draw + LIVE_REDRAW_S - time.monotonic()
        if wait <= 0:
            self._last_draw = time.monotonic()
            self.app.invalidate()
        elif self._draw_later is None:

            def later() -> None:
                self._draw_later = None
                self._last_draw = time.monotonic()
                self.app.invalidate()

            self._draw_later = asyncio.get_running_loop().call_later(wait, later)

    def suspend(self, work: Callable[[], Any], future: Future[Any]) -> None:
        from prompt_toolkit.application import run_in_terminal

        self._held = []

        def done(task: asyncio.Future[Any]) -> None:
            held, self._held = self._held or [], None
            self.write_above("".join(held))
            if task.cancelled():
                future.cancel()
            elif task.exception() is not None:
                future.set_exception(task.exception())
            else:
                future.set_result(task.result())

        # run_in_terminal's Awaitable is a Future already (ensure_future hands it back)
        asyncio.ensure_future(run_in_terminal(work, in_executor=True)).add_done_callback(done)


def _width(out: TextIO) -> int:
    try:
        return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return shutil.get_terminal_size().columns
