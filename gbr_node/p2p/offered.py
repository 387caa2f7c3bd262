"""Which of a peer's tools the model may be offered, and under what name [pure] (GBR-PRIV-01).

A peer's `tools/list` answer is data from another machine: its names become
function names in every request to the model, where a newline, an escape
sequence or 300 characters make the model server refuse every request (HTTP
400 "Invalid tool name"). A tool is offered as `ALIAS__TOOL` only when that
whole name keeps MCP's rule (SEP-986: `[A-Za-z0-9_.-]`) within 64 characters,
as `mcp/names.py` does for MCP clients; a name listed twice is offered once;
a description is cut at MAX_DESCRIPTION_CHARS and a tool whose input schema
is not a JSON object of at most MAX_SCHEMA_BYTES is left out. Every tool left
out is named (made visible) in one note for the person.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from gbr_node.textcells import one_line

OFFERED_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_DESCRIPTION_CHARS = 1024
MAX_SCHEMA_BYTES = 16 * 1024


def admit(
    alias: str, tools: Iterable[dict[str, Any]], separator: str = "__"
) -> tuple[list[dict[str, Any]], str | None]:
    """`(kept, note)`: the tools of peer `alias` that may be offered (descriptions
    cut), in order, and one line naming those left out and why (None when none)."""
    kept: list[dict[str, Any]] = []
    seen: set[str] = set()
    left: list[str] = []
    for tool in tools:
        name = tool.get("name")
        shown = one_line(repr(name), 40)
        schema = tool.get("inputSchema", {"type": "object"})
        if not isinstance(name, str) or not OFFERED_NAME.fullmatch(f"{alias}{separator}{name}"):
            left.append(f"{shown} (not 1-64 of A-Z a-z 0-9 _ . - with the alias)")
        elif name in seen:
            left.append(f"{shown} (listed twice)")
        elif not isinstance(schema, dict) or len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
            left.append(f"{shown} (input schema not an object of at most {MAX_SCHEMA_BYTES} bytes)")
        else:
            seen.add(name)
            description = str(tool.get("description") or "")[:MAX_DESCRIPTION_CHARS]
            kept.append({**tool, "description": description, "inputSchema": schema})
    if not left:
        return kept, None
    noun = "tool" if len(left) == 1 else "tools"
    return kept, f"peer {one_line(alias, 40)}: {len(left)} {noun} left out: " + "; ".join(left)
