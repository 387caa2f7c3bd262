"""Token estimates and tool-result cuts, pure (GBR-CTX-01).

The node cannot run every server's tokenizer, so it estimates: UTF-8 bytes
divided by `BYTES_PER_TOKEN`, plus `MESSAGE_OVERHEAD` per message for the
chat template's role markers. Three bytes per token over-counts English prose
(about four with the usual BPE vocabularies) and is close for JSON and code,
so the estimate errs on the safe side; `agent.context` corrects it with the
prompt sizes the server reports (`usage.prompt_tokens`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

BYTES_PER_TOKEN = 3.0
MESSAGE_OVERHEAD = 4  # tokens per message for role and turn markers

_LINE_NUMBER = re.compile(r"^\s*(\d+)\t")


def text_tokens(text: str) -> int:
    """Estimated tokens of `text`."""
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)


def request_tokens(messages: Iterable[dict[str, Any]], tools: Iterable[dict[str, Any]]) -> int:
    """Estimated prompt tokens of a chat request: its messages and its tool specs."""
    total = 0
    for message in messages:
        total += MESSAGE_OVERHEAD + text_tokens(_content_text(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            total += text_tokens(function.get("name", "") + function.get("arguments", ""))
    specs = list(tools)
    return total + (text_tokens(json.dumps(specs, separators=(",", ":"))) if specs else 0)


def cut_tool_result(text: str, max_tokens: int, tool: str) -> str:
    """`text` cut to about `max_tokens`, ending with a note on how to read the rest.

    A `read_file` result (numbered lines, see `tools.files`) is cut at a line
    boundary and the note names the `offset` and `limit` that read on; any
    other result is cut at a line boundary with the size of what was left out.
    Text that fits is returned unchanged.
    """
    if text_tokens(text) <= max_tokens:
        return text
    budget = int(max_tokens * BYTES_PER_TOKEN)
    kept: list[str] = []
    size = 0
    for line in text.split("\n"):
        size += len(line.encode("utf-8")) + 1
        if size > budget and kept:
            break
        kept.append(line if size <= budget else line[: max(0, budget // 2)])
    head = "\n".join(kept)
    left_out = len(text) - len(head)
    numbers = [int(m.group(1)) for m in map(_LINE_NUMBER.match, kept) if m]
    if tool == "read_file" and numbers:
        first, last = numbers[0], numbers[-1]
        note = (
            f"[cut to fit the context window: lines {first}-{last} shown; call read_file "
            f"with offset={last + 1} and limit={last - first + 1} to read on]"
        )
    else:
        note = (
            f"[cut to fit the context window: {left_out} more characters not shown; "
            "ask for less (a narrower path, pattern or command) to see the rest]"
        )
    return f"{head}\n{note}"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""
