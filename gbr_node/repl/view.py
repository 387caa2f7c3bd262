"""What the person sees, as state, pure: the agent's `Show` actions in, text out.

The screen has two parts (GBR-TERM-01):

- the scrollback: text written once, in order, never redrawn. Each method
  returns the text to append there ("" for none). In `live` mode (an
  interactive terminal) it is whole lines only; otherwise (a pipe,
  `TERM=dumb`) the answer streams through as it arrives.
- the live part under it, redrawn on every change (`live` mode only): the
  rows of the answer still being written (`answer_rows`), notices waiting for
  the answer to end (`» ` and their first line) and messages queued
  (`tray_rows`), and the status
  (`status_rows`): waiting for the model, streaming, each running tool with
  its elapsed time, waiting for approval, idle.

An answer is never cut: while the model streams, notices (an approval
request, a profile reload, a command's output) wait in the tray and go to the
scrollback when the answer ends, after it. Finished markdown blocks are
rendered once (`markdown.render_block`) when complete.

An answer is laid out at the narrowest width the terminal had since it
began (`layout_width`): a window made wider mid-answer gets the full width
from the next answer on. Rows the terminal already shows are never redrawn,
so a row laid out for a width the window only had for a moment (dragged
wider, then back) would be cut by the terminal or wrapped mid-word when it
narrows again; rows no wider than the answer's narrowest width survive it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gbr_node.agent.machine import Show
from gbr_node.agent.messages import ToolExecutionFeedback
from gbr_node.repl.blocks import Block, BlockSplitter
from gbr_node.repl.markdown import render_block
from gbr_node.repl.render import DIM, GREEN, RED, RESET, YELLOW, short_arguments, status_line
from gbr_node.repl.status import report
from gbr_node.textcells import cut, one_line, plain, visible, wrap, wrap_styled

PROMPT = "› "
HELD = "»"
"""Marks a notice in the tray: it goes to the scrollback once the answer ends."""
MAX_CHANGED_SHOWN = 12
"""Paths named in a turn's `changed:` line; the rest are counted."""
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
Row = tuple[str, str]
"""One row of the live part: (style name: "", "dim", "warn" or "prompt", text)."""


@dataclass
class _Call:
    """A tool call of the current step: running until `line` (its ok/error line) is set."""

    name: str
    arguments: dict[str, Any]
    started: float
    line: str | None = None


class _Answer:
    """One streamed answer (text or reasoning): finished blocks out, the rest pending."""

    def __init__(self, reasoning: bool, width: int) -> None:
        self.reasoning = reasoning
        self.width = width  # the narrowest terminal width (cells) since it began
        self.splitter = BlockSplitter()
        self.wrote = False  # some of it is in the scrollback already


class View:
    """The state of the screen; see the module docstring.

    Args:
        color: ANSI colours and rendered markdown; else plain text as written.
        live: an interactive terminal with a live part; else a stream.
        program_status: report working / waiting for approval / done to the
            terminal as OSC 7501 (`status_report`, `repl.status`).
    """

    def __init__(self, *, color: bool, live: bool, program_status: bool = False) -> None:
        self.color = color
        self.live = live
        self.program_status = program_status
        self._reported = ""  # the OSC 7501 state last reported ("" for none)
        self._turns_ended = 0
        self._closed = False
        self._answer: _Answer | None = None
        self._mid_line = False  # stream mode: the last text written ended mid-line
        self._held: list[str] = []  # notices waiting for the answer to end
        self._queued: list[str] = []
        self._calls: dict[str, _Call] = {}
        self._waiting_since: float | None = None
        self._streaming_since: float | None = None
        self.pending_approvals: tuple[int, ...] = ()
        """Every pending approval (Tab after `/approve`)."""
        self.waiting_approvals: tuple[int, ...] = ()
        """The pending approvals this session's agent asked for: the status line's
        "waiting for approval" (never another's request, never a decided one)."""
        self.hint = ""  # e.g. tab completion's candidates, until the next key

    @property
    def busy(self) -> bool:
        """True while a turn runs (waiting for the model, streaming, tools)."""
        waiting = self._waiting_since is not None or self._streaming_since is not None
        return waiting or bool(self._calls)

    def layout_width(self, terminal: int) -> int:
        """The width (cells) to lay out at, given the terminal's width now: that
        width, except that while an answer streams it never grows (the narrowest
        width since the answer began; see the module docstring)."""
        if self._answer is None:
            return terminal
        self._answer.width = min(self._answer.width, terminal)
        return self._answer.width

    # -- into the scrollback --------------------------------------------------

    def show(self, show: Show, width: int, now: float) -> str:
        """Apply one agent action; return the text it adds to the scrollback."""
        kind = show.kind
        if kind in ("text", "reasoning"):
            return self._stream(show.text, kind == "reasoning", width, now)
        if kind == "waiting":
            self._waiting_since, self._streaming_since = now, None
            return ""
        if kind == "prompt":
            if show.text in self._queued:
                self._queued.remove(show.text)
            return self._end_answer(width) + self._lines(_echo(show.text))
        if kind == "queued":
            self._queued.append(show.text)
            return "" if self.live else self.notice(f"{DIM}queued: {show.text}{RESET}", width)
        if kind == "tool_start":
            call = show.data["call"]
            self._calls[call.id] = _Call(call.name, call.arguments, now)
            self._waiting_since = self._streaming_since = None
            return self._end_answer(width)
        if kind == "tool_end":
            return self._end_answer(width) + self._tool_end(show.data["feedback"], width)
        if kind == "turn_end":
            self._waiting_since = self._streaming_since = None
            self._turns_ended += 1
            out = self._end_answer(width, release=False)
            # Calls still running after an interruption are not awaited (their late
            # results come as "stale"); those that ended are written in order.
            out += "".join(call.line for call in self._calls.values() if call.line)
            self._calls.clear()
            cut_note = show.data.get("cut")
            out += self._lines(f"{DIM}{cut_note}{RESET}", width) if cut_note else ""
            summary = " · ".join(p for p in (show.text, show.data.get("summary", "")) if p)
            if summary:
                out += self._lines(f"{DIM}({summary}){RESET}", width)
            if "changed" in show.data:  # the turn's last line: what it changed (GBR-TRUTH-01)
                out += self._lines(f"{DIM}{changed_line(show.data['changed'])}{RESET}", width)
            return out + self._release()
        if kind == "error":
            error = f"{RED}error: {show.text}{RESET}"
            return self._end_answer(width) + self._lines(error, width)
        if kind == "check":  # one status line per step of the write checks (issue 17)
            ok = show.text.endswith(" ok") or " ok (" in show.text
            colour = GREEN if ok else YELLOW
            return self._end_answer(width) + self._lines(f"{colour}{show.text}{RESET}", width)
        if kind in ("notice", "stale"):
            if show.data.get("dropped"):
                self._queued.clear()
            style = YELLOW if kind == "notice" else DIM
            return self.notice(f"{style}{show.text}{RESET}", width)
        return ""  # usage: counted by the REPL's meter, shown at the turn's end

    def notice(self, text: str, width: int) -> str:
        """A line (or lines) of ours: a notice, a command's output. Held while an answer
        streams; returns what to write now."""
        text = self._lines(text, width)
        if self._answer is not None:
            self._held.append(text)
            return ""
        return self._end_line() + text

    def echo(self, line: str, width: int) -> str:
        """The person's own command, as typed (`› /tools`), in order with notices."""
        return self.notice(_echo(line), width)

    def close(self, width: int) -> str:
        """The session ends: everything still pending, finished."""
        self._closed = True
        return self._end_answer(width) + self._end_line()

    def status_report(self) -> str:
        """The OSC 7501 sequence to write when the program state changed since the last
        report, else "" (always "" without `program_status`). The state: `blocked` while
        an approval this session's agent asked for waits, else `working` while a turn
        runs, else `done` once a turn ended; `clear` after `close` if `working` or
        `blocked` was the last report. Zero-width: it may follow any scrollback text."""
        if not self.program_status:
            return ""
        if self._closed:
            state = "clear" if self._reported in ("working", "blocked") else ""
        elif self.waiting_approvals:
            state = "blocked"
        elif self.busy:
            state = "working"
        else:
            state = "done" if self._turns_ended else ""
        if state == self._reported or not state:
            return ""
        self._reported = state
        if state == "blocked":
            ids = ", ".join(f"#{n}" for n in self.waiting_approvals)
            n = self.waiting_approvals[0]
            return report(state, kind="permission", msg=f"approval {ids} waits: /approve {n}")
        return report(state)

    # -- the live part ----------------------------------------------------------

    def answer_rows(self, width: int, budget: int) -> list[Row]:
        """The answer's rows not yet in the scrollback: the last `budget` of them."""
        if self._answer is None or not self.live:
            return []
        style = "dim" if self._answer.reasoning else ""
        rows = [
            (style, row)
            for line in visible(self._answer.splitter.pending()).split("\n")
            for row in wrap(line, width)
        ]
        rows = [] if rows == [(style, "")] else rows
        return rows[-budget:] if budget > 0 else []

    def tray_rows(self, width: int) -> list[Row]:
        """Notices held until the answer ends (first line each), queued messages, the hint."""
        rows: list[Row] = []
        for text in self._held:
            first = plain(text).strip("\n").split("\n", 1)[0]
            rows.append(("warn", cut(f"{HELD} {first}", width)))
        for n, text in enumerate(self._queued, 1):
            rows.append(("dim", cut(f"queued ({n}): {text}", width)))
        if self.hint:
            rows.append(("dim", cut(self.hint, width)))
        return rows

    def status_rows(self, width: int, now: float) -> list[Row]:
        """What the agent is doing now, one row (one per tool call while tools run)."""
        spin = SPINNER[int(now * 10) % len(SPINNER)]
        if self._calls:
            rows = []
            for call in self._calls.values():
                if call.line is not None:
                    rows.append(("dim", cut(plain(call.line), width)))
                    continue
                args = short_arguments(call.arguments)
                text = f"{spin} running {call.name} {args}".rstrip()
                rows.append(("", cut(f"{text} · {now - call.started:.1f} s", width)))
            return rows
        if self._waiting_since is not None:
            waited = int(now - self._waiting_since)
            return [("", cut(f"{spin} waiting for the model · {waited} s · Ctrl-C stops", width))]
        if self._streaming_since is not None:
            return [("", cut(f"{spin} streaming · Ctrl-C stops", width))]
        if self.waiting_approvals:
            ids = ", ".join(f"#{n}" for n in self.waiting_approvals)
            n = self.waiting_approvals[0]
            text = f"● waiting for approval {ids} · /approve {n} · /reject {n} · /edit {n}"
            return [("warn", cut(text, width))]
        return [("dim", cut("idle · /help · Ctrl-D leaves", width))]

    # -- helpers ------------------------------------------------------------------

    def _stream(self, text: str, reasoning: bool, width: int, now: float) -> str:
        if not text:
            return ""
        if self._streaming_since is None:
            self._streaming_since = now
        self._waiting_since = None
        out = ""
        if self._answer is not None and self._answer.reasoning != reasoning:
            out += self._end_answer(width)
        if self._answer is None:
            self._answer = _Answer(reasoning, width)
        if not self.live:
            self._mid_line = not text.endswith("\n")
            return out + self._style(visible(text), reasoning)
        return out + self._write_blocks(self._answer.splitter.feed(text, width), width)

    def _write_blocks(self, blocks: list[Block], width: int) -> str:
        answer = self._answer
        assert answer is not None
        out = []
        for block in blocks:
            if block.gap and answer.wrote:
                out.append("\n")
            color = self.color and not answer.reasoning
            lines = render_block(block, width, color=color)
            out.append(self._style("".join(line + "\n" for line in lines), answer.reasoning))
            answer.wrote = True
        return "".join(out)

    def _end_answer(self, width: int, *, release: bool = True) -> str:
        """The answer is complete: write what is pending, then (by default) what it held."""
        out = ""
        if self._answer is not None:
            if self.live:
                out = self._write_blocks(self._answer.splitter.finish(), width)
            else:
                out = self._end_line()
            self._answer = None
        return out + (self._release() if release else "")

    def _release(self) -> str:
        held, self._held = self._held, []
        return "".join(held)

    def _tool_end(self, feedback: ToolExecutionFeedback, width: int) -> str:
        call = self._calls.get(feedback.call_id)
        line = self._lines(status_line(feedback, call.arguments if call else None, width))
        if call is None:
            return line
        call.line = line
        out = []
        for key in list(self._calls):  # in the order the model made the calls
            if self._calls[key].line is None:
                break
            out.append(self._calls.pop(key).line or "")
        return "".join(out)

    def _end_line(self) -> str:
        if self._mid_line:
            self._mid_line = False
            return "\n"
        return ""

    def _lines(self, text: str, width: int | None = None) -> str:
        """`text` made safe to print (`visible`), coloured or plain, each line wrapped at
        word boundaries to `width` cells when given (issue 34)."""
        text = visible(text, keep_sgr=True)
        if not self.color:
            text = plain(text)
        if width is not None and self.live:  # a terminal; serve's log lines stay whole
            text = "\n".join(row for line in text.split("\n") for row in wrap_styled(line, width))
        return text if text.endswith("\n") else text + "\n"

    def _style(self, text: str, reasoning: bool) -> str:
        if not (reasoning and self.color):
            return text
        return "\n".join(f"{DIM}{line}{RESET}" if line else line for line in text.split("\n"))


def changed_line(paths: list[str] | None) -> str:
    """The turn's summary line (GBR-TRUTH-01): `changed: app.py, utils.py`, `changed: no
    files`, or, when the checkpoints could not be read (`paths` None), that it is not
    known. Paths are shown with `one_line` (a name can hold any character)."""
    if paths is None:
        return "changed: not known (the checkpoints could not be read)"
    if not paths:
        return "changed: no files"
    shown = [one_line(p) for p in paths[:MAX_CHANGED_SHOWN]]
    more = len(paths) - len(shown)
    return "changed: " + ", ".join(shown) + (f" and {more} more (/checkpoints)" if more else "")


def _echo(text: str) -> str:
    lines = text.split("\n")
    return "\n".join([PROMPT + lines[0], *("  " + line for line in lines[1:])])
