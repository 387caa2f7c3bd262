"""Terminal rendering of the agent's `Show` actions.

Answer text streams as it arrives; reasoning is dimmed; each tool call gets
one status line (tool, short arguments, peer, ok/error, milliseconds); notices
and errors get one coloured line each. Lines other than the answer start on a
fresh line, so a status never lands in the middle of a sentence.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from gbr_node.agent.machine import Show
from gbr_node.agent.messages import ToolExecutionFeedback

DIM, RED, YELLOW, GREEN, CYAN, RESET = (
    "\x1b[2m",
    "\x1b[31m",
    "\x1b[33m",
    "\x1b[32m",
    "\x1b[36m",
    "\x1b[0m",
)
ARG_WIDTH = 60


def short_arguments(arguments: dict[str, Any], width: int = ARG_WIDTH) -> str:
    """`key=value` pairs of a tool call cut to `width` characters, for a status line."""
    parts = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text = text.replace("\n", "⏎")
        parts.append(f"{key}={text[:40]}{'…' if len(text) > 40 else ''}")
    line = " ".join(parts)
    return line if len(line) <= width else line[: width - 1] + "…"


def status_line(feedback: ToolExecutionFeedback, arguments: dict[str, Any] | None) -> str:
    """One line for a finished tool call: mark, tool, arguments, peer, outcome, ms."""
    failed = feedback.error is not None or bool((feedback.result or {}).get("isError"))
    structured = (feedback.result or {}).get("structuredContent") or {}
    pending = str(structured.get("status", "")).endswith("approval")
    mark = f"{YELLOW}⏸" if pending else (f"{RED}✗" if failed else f"{GREEN}✓")
    where = f" @{feedback.peer}" if feedback.peer else ""
    args = f" {short_arguments(arguments)}" if arguments else ""
    ms = f"{feedback.elapsed_s * 1000:.0f} ms"
    outcome = ""
    if feedback.error is not None:
        outcome = f" — {feedback.error.splitlines()[0][:120]}"
    elif failed or pending:
        outcome = f" — {feedback.as_text().splitlines()[0][:120]}" if feedback.as_text() else ""
    return f"{mark} {feedback.tool}{where}{RESET}{DIM}{args}{RESET} {ms}{outcome}"


class Renderer:
    """Writes `Show` actions to `out`, or to whatever `sys.stdout` is at the
    time of writing (the REPL patches it) when `out` is None."""

    def __init__(self, out: TextIO | None = None, *, color: bool = True) -> None:
        self._fixed_out = out
        self.color = color
        self._mid_line = False
        self._in_reasoning = False
        self._calls: dict[str, dict[str, Any]] = {}

    def __call__(self, show: Show) -> None:
        """Render one action."""
        kind = show.kind
        if kind == "text":
            self._stream(show.text, "")
        elif kind == "reasoning":
            self._stream(show.text, DIM)
        elif kind == "tool_start":
            call = show.data["call"]
            self._calls[call.id] = call.arguments
        elif kind == "tool_end":
            feedback = show.data["feedback"]
            self.line(status_line(feedback, self._calls.pop(feedback.call_id, None)))
        elif kind == "queued":
            self.line(f"{DIM}queued ({show.data.get('position', 1)}): {show.text}{RESET}")
        elif kind == "stale":
            self.line(f"{DIM}{show.text}{RESET}")
        elif kind == "check":
            ok = show.text.endswith(" ok") or " ok (" in show.text
            self.line(f"{GREEN if ok else YELLOW}{show.text}{RESET}")
        elif kind == "notice":
            self.line(f"{YELLOW}{show.text}{RESET}")
        elif kind == "error":
            self.line(f"{RED}error: {show.text}{RESET}")
        elif kind == "turn_end":
            self._end_line()
            if show.text:
                self.line(f"{DIM}({show.text}){RESET}")
        self._out.flush()

    @property
    def _out(self) -> TextIO:
        return self._fixed_out or sys.stdout

    def line(self, text: str) -> None:
        """Print `text` on a line of its own."""
        self._end_line()
        self._write(text + "\n")
        self._out.flush()

    def _stream(self, text: str, style: str) -> None:
        if not text:
            return
        reasoning = bool(style)
        if reasoning != self._in_reasoning:
            self._end_line()
            self._in_reasoning = reasoning
        self._write(f"{style}{text}{RESET}" if style else text)
        self._mid_line = not text.endswith("\n")

    def _end_line(self) -> None:
        if self._mid_line:
            self._write("\n")
            self._mid_line = False

    def _write(self, text: str) -> None:
        if not self.color:
            for code in (DIM, RED, YELLOW, GREEN, CYAN, RESET):
                text = text.replace(code, "")
        self._out.write(text)
