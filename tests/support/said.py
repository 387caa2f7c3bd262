"""What the person typed, out of the user message the model got (the node puts the
project's files first, `agent.project`, issue 32)."""

from __future__ import annotations

from gbr_node.agent.project import HEADING


def said(content: str) -> str:
    """`content` without the leading project note, if it has one."""
    if not content.startswith(HEADING):
        return content
    end = content.find("]\n\n")
    return content[end + 3 :] if end >= 0 else content
