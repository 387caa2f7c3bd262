"""The project's files as a turn starts, for the person's message, pure (issue 32).

A model that does not know what the project holds guesses names: asked to
"change the default greeting" a small one wrote `gbr-node/gbr-node.py`, asked
to fix the countdown it created `countdown.txt`. Agents of the field give the
model the working folder's layout up front (Gemini CLI sends the folder
structure, up to 200 entries, in its first message; Claude Code the git
status). `project_note` is that layout: every file path, root-relative, one
per line, as `list_dir` would show them, bounded by a token budget. It rides
on the person's message of the turn (`UserPrompt.context`), so the system
message, and the server's prompt cache over it, stay as they are. It says
nothing about the request: the same listing for every message and every model.
"""

from __future__ import annotations

from collections.abc import Iterable

from gbr_node.agent.tokens import text_tokens

HEADING = "[Project files, as this message was sent"


def project_note(files: Iterable[str] | None, budget_tokens: int) -> str:
    """The note listing `files` (root-relative, "/"-separated), or "" when none fits.

    `files` None means the project holds more than the node walks for the
    view (`tools.workspace.MAX_ENTRIES`): the note then says to list it.
    `budget_tokens` bounds the note (estimated, `agent.tokens`); paths past it
    are counted, not listed. An empty project gets a one-line note too, so
    the model does not go looking for files that are not there.
    """
    if files is None:
        note = f"{HEADING}: too many to list here; use list_dir]"
        return note if text_tokens(note) <= budget_tokens else ""
    paths = list(files)
    if not paths:
        note = f"{HEADING}: none, the folder is empty]"
        return note if text_tokens(note) <= budget_tokens else ""
    head = f"{HEADING} ({len(paths)}):"
    lines = [head]
    closing = f"\n... and {len(paths)} more; use list_dir]"
    used = len(head.encode()) + len(closing.encode())  # bytes, as `text_tokens` counts
    for path in paths:
        cost = len(path.encode()) + 1
        if text_tokens("x" * (used + cost)) > budget_tokens:
            break
        lines.append(path)
        used += cost
    if len(lines) == 1:
        return ""
    left = len(paths) - (len(lines) - 1)
    lines.append(f"... and {left} more; use list_dir]" if left else "]")
    return "\n".join(lines)
