"""A pseudo-terminal seen as a person sees it: pexpect drives the process,
pyte (a VT100 emulator) renders its output into a screen of text.

Asserting on the rendered screen, not on raw bytes, is what makes streamed
text testable: prompt_toolkit redraws the input line between pieces of an
answer, which puts escape sequences between them in the byte stream.
"""

from __future__ import annotations

import re
import time

import pexpect
import pyte

ROWS, COLS = 200, 160


class Terminal:
    """Wraps a pexpect child spawned with dimensions (ROWS, COLS)."""

    def __init__(self, child: pexpect.spawn, timeout_s: float = 20.0) -> None:
        self.child = child
        self.timeout_s = timeout_s
        self.screen = pyte.Screen(COLS, ROWS)
        self._stream = pyte.Stream(self.screen)
        self.eof = False

    def text(self) -> str:
        """The screen's text, one line per row, trailing blanks removed."""
        return "\n".join(line.rstrip() for line in self.screen.display).rstrip()

    def pump(self, wait_s: float = 0.05) -> None:
        """Feed whatever output arrived within `wait_s` seconds to the screen."""
        if self.eof:
            time.sleep(wait_s)
            return
        try:
            self._stream.feed(self.child.read_nonblocking(65536, timeout=wait_s))
        except pexpect.TIMEOUT:
            pass
        except pexpect.EOF:
            self.eof = True

    def expect(self, pattern: str, timeout_s: float | None = None) -> re.Match:
        """Wait until `pattern` (a regex) appears anywhere on screen.

        Raises AssertionError with the screen when it does not within the timeout.
        """
        regex = re.compile(pattern)
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            match = regex.search(self.text())
            if match:
                return match
            if time.monotonic() > deadline or (self.eof and not match):
                raise AssertionError(f"{pattern!r} not on screen:\n{self.text()}")
            self.pump()

    def expect_new(self, pattern: str, timeout_s: float | None = None) -> re.Match:
        """Like `expect`, but only on rows written since the last `mark()`."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            text = "\n".join(line.rstrip() for line in self.screen.display[self._mark :])
            match = regex.search(text)
            if match:
                return match
            if time.monotonic() > deadline or self.eof:
                raise AssertionError(f"{pattern!r} not on screen after row {self._mark}:\n{text}")
            self.pump()

    def mark(self) -> None:
        """Remember the first row that new output will use, for `expect_new`.

        The input line (`› ...`) at the bottom counts as new: output is drawn
        over it and it moves down.
        """
        self.pump(0.01)
        rows = [line.rstrip() for line in self.screen.display]
        filled = [i for i, line in enumerate(rows) if line]
        last = filled[-1] if filled else -1
        self._mark = last if last >= 0 and rows[last].startswith("›") else last + 1

    def sendline(self, line: str) -> None:
        """Type `line` and Enter."""
        self.mark()
        self.child.sendline(line)

    _mark = 0
