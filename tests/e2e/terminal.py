"""A pseudo-terminal seen as a person sees it: pexpect drives the process,
pyte (a VT100 emulator) renders its output into a screen of text, and keeps
the rows scrolled off the top as the terminal's scrollback.

Asserting on the rendered screen, not on raw bytes, is what makes streamed
text testable: the live part under the answer (status, input line) is redrawn
between pieces of it, which puts escape sequences between them in the byte
stream. `transcript()` is what a person could scroll back through: every row
that scrolled off the top, then the screen.
"""

from __future__ import annotations

import re
import time

import pexpect
import pyte

ROWS, COLS = 200, 160
HISTORY_ROWS = 100_000
LIVE_ROW = re.compile(r"^(idle · |[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] |● waiting for approval|queued \(\d+\)|» |tab: )")
"""The rows of the live part above the input line (status, tray) when no answer streams."""


class Terminal:
    """Wraps a pexpect child spawned with dimensions (rows, cols)."""

    def __init__(
        self, child: pexpect.spawn, timeout_s: float = 20.0, *, rows: int = ROWS, cols: int = COLS
    ) -> None:
        self.child = child
        self.timeout_s = timeout_s
        self.screen = pyte.HistoryScreen(cols, rows, history=HISTORY_ROWS)
        self._stream = pyte.Stream(self.screen)
        self.eof = False
        self._mark = 0
        self.raw: list[str] = []
        """Every piece of output as it arrived, escape sequences and all."""

    def text(self) -> str:
        """The screen's text, one line per row, trailing blanks removed."""
        return "\n".join(line.rstrip() for line in self.screen.display).rstrip()

    def rows(self) -> list[str]:
        """Every row: the scrollback (oldest first), then the screen; trailing blanks removed."""
        history = [_row_text(line) for line in self.screen.history.top]
        return history + [line.rstrip() for line in self.screen.display]

    def transcript(self) -> str:
        """`rows()` as one text, trailing empty rows removed."""
        return "\n".join(self.rows()).rstrip()

    def resize(self, cols: int, rows: int | None = None) -> None:
        """Resize the terminal, as a person dragging the window's edge (SIGWINCH)."""
        rows = rows or self.screen.lines
        self.pump(0.01)
        self.screen.resize(rows, cols)
        self.child.setwinsize(rows, cols)

    def pump(self, wait_s: float = 0.05) -> None:
        """Feed whatever output arrived within `wait_s` seconds to the screen."""
        if self.eof:
            time.sleep(wait_s)
            return
        try:
            self.feed(self.child.read_nonblocking(65536, timeout=wait_s))
        except pexpect.TIMEOUT:
            pass
        except pexpect.EOF:
            self.eof = True

    def feed(self, data: str) -> None:
        """Render `data`, output read from the child elsewhere (in arrival order)."""
        self.raw.append(data)
        self._stream.feed(data)

    def expect(self, pattern: str, timeout_s: float | None = None) -> re.Match:
        """Wait until `pattern` (a regex) appears anywhere in the transcript.

        Raises AssertionError with the screen when it does not within the timeout.
        """
        return self._wait(pattern, 0, timeout_s)

    def expect_new(self, pattern: str, timeout_s: float | None = None) -> re.Match:
        """Like `expect`, but only on rows written since the last `mark()`."""
        return self._wait(pattern, self._mark, timeout_s)

    def _wait(self, pattern: str, start: int, timeout_s: float | None) -> re.Match:
        regex = re.compile(pattern)
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            text = "\n".join(self.rows()[start:])
            match = regex.search(text)
            if match:
                return match
            if time.monotonic() > deadline or self.eof:
                raise AssertionError(f"{pattern!r} not on screen after row {start}:\n{text}")
            self.pump()

    def mark(self) -> None:
        """Remember the first row that new output will use, for `expect_new`.

        The live part at the bottom (status rows and the input line `› ...`)
        counts as new: output is written over it and it moves down.
        """
        self.pump(0.01)
        rows = self.rows()
        filled = [i for i, line in enumerate(rows) if line]
        last = filled[-1] if filled else -1
        if last >= 0 and rows[last].startswith("›"):
            while last > 0 and LIVE_ROW.match(rows[last - 1]):
                last -= 1
            self._mark = last
        else:
            self._mark = last + 1

    def sendline(self, line: str) -> None:
        """Type `line` and Enter."""
        self.mark()
        self.child.sendline(line)


def _row_text(line: dict) -> str:
    width = max(line.keys(), default=-1) + 1
    return "".join(line[x].data for x in range(width)).rstrip()
