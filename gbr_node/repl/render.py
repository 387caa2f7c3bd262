"""Lines of ours about the agent's work: a finished tool call, shortened arguments.

Everything that came from the model or a peer (arguments, error texts) is
made visible (`textcells.visible`) and cut at a word boundary with an
ellipsis before the colour codes are added, so a status line is one line and
cannot carry terminal escapes.
"""

from __future__ import annotations

import json
from typing import Any

from rich.cells import cell_len

from gbr_node.agent.messages import ToolExecutionFeedback
from gbr_node.textcells import CYAN as CYAN
from gbr_node.textcells import DIM as DIM
from gbr_node.textcells import GREEN as GREEN
from gbr_node.textcells import RED as RED
from gbr_node.textcells import RESET as RESET
from gbr_node.textcells import YELLOW as YELLOW
from gbr_node.textcells import cut

ARG_WIDTH = 60
VALUE_WIDTH = 40
OUTCOME_WIDTH = 120
ARGS_MIN_WIDTH = 24


def short_arguments(arguments: dict[str, Any], width: int = ARG_WIDTH) -> str:
    """`key=value` pairs of a tool call, each value and the whole cut to fit
    (`VALUE_WIDTH`, `width` cells) at a word boundary, with an ellipsis."""
    parts = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{cut(str(key), VALUE_WIDTH)}={cut(text, VALUE_WIDTH)}")
    return cut(" ".join(parts), width)


def status_line(
    feedback: ToolExecutionFeedback, arguments: dict[str, Any] | None, width: int = 100
) -> str:
    """One line of at most `width` cells for a finished tool call: mark, tool, peer,
    arguments, milliseconds, and for a failure or a pending approval the outcome."""
    failed = feedback.error is not None or bool((feedback.result or {}).get("isError"))
    structured = (feedback.result or {}).get("structuredContent") or {}
    pending = str(structured.get("status", "")).endswith("approval")
    mark = "⏸" if pending else ("✗" if failed else "✓")
    colour = YELLOW if pending else (RED if failed else GREEN)
    where = f" @{cut(feedback.peer, VALUE_WIDTH)}" if feedback.peer else ""
    head = f"{mark} {cut(feedback.tool, VALUE_WIDTH)}{where}"
    ms = f" {feedback.elapsed_s * 1000:.0f} ms"
    outcome = ""
    if pending and structured.get("approval_id"):
        outcome = f"pending approval #{structured['approval_id']}"
    elif feedback.error is not None:
        outcome = feedback.error
    elif (failed or pending) and feedback.as_text():
        outcome = feedback.as_text()
    room = width - cell_len(head + ms)
    if outcome:  # what went wrong matters more than the arguments: they get what is left
        keep = max(10, room - 3 - (ARGS_MIN_WIDTH if arguments else 0))
        outcome = " — " + cut(outcome.strip().splitlines()[0], min(OUTCOME_WIDTH, keep))
    args_room = room - cell_len(outcome) - 1
    args = f" {short_arguments(arguments, args_room)}" if arguments and args_room >= 6 else ""
    return f"{colour}{head}{RESET}{DIM}{args}{RESET}{ms}{outcome}"
