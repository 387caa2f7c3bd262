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

    def expect(self, pattern: str, timeout_s: float | None = None, *, after: int = 0) -> re.Match:
        """Wait until `pattern` (a regex) appears on screen at or after offset `after`.

        Raises AssertionError with the screen when it does not within the timeout.
        """
        regex = re.compile(pattern)
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            match = regex.search(self.text(), after)
            if match:
                return match
            if time.monotonic() > deadline or (self.eof and not match):
                raise AssertionError(f"{pattern!r} not on screen:\n{self.text()}")
            self.pump()

    def expect_new(self, pattern: str, timeout_s: float | None = None) -> re.Match:
        """Like `expect`, but only text added after the last call of `mark()`."""
        return self.expect(pattern, timeout_s, after=self._mark)

    def mark(self) -> None:
        """Remember the current end of the screen text for `expect_new`."""
        self.pump(0.01)
        self._mark = len(self.text())

    def sendline(self, line: str) -> None:
        """Type `line` and Enter."""
        self.mark()
        self.child.sendline(line)

    _mark = 0
