"""MCP `tools/call` results as `gbr-node mcp` hands them over (GBR-MCP-01) [pure].

- `capped`: a result bigger than the budget (default 20,000 tokens' worth, at
  `CHARS_PER_TOKEN` characters a token) is cut, and a last text item says how
  much was kept and how to page for the rest, so an MCP client's context is
  never flooded by one call.
- `peer_failure`: a call to a trusted peer that did not run to a result
  becomes an `isError` result naming the peer and the kind of failure —
  unreachable, timed out, refused — and `peer_result` marks a peer's own
  `isError` result as "tool failed"; the kind is also in `structuredContent`
  (`{"peer_error": {"kind", "peer", "tool"}}`) for programs.
- `text_only`: an MCP server's result content reduced to text items (the
  node's wire, `/gbr/mcp/1.0.0`, and the model carry text), saying what an
  image or audio item was instead of dropping it silently.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from gbr_node.errors import CallTimeout, GbrError, PeerUnreachable, RpcError

CHARS_PER_TOKEN = 4
DEFAULT_MAX_RESULT_TOKENS = 20_000
_LINE_BACKOFF_CHARS = 2_000  # a cut moves back to a line end at most this far

FailureKind = Literal["unreachable", "timeout", "refused", "tool_failed"]


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _item_size(item: dict[str, Any]) -> int:
    return len(item.get("text", "")) if item.get("type") == "text" else _json_size(item)


def _paging_hint(tool: str, input_schema: dict[str, Any] | None) -> str:
    properties = (input_schema or {}).get("properties") or {}
    if "offset" in properties:
        return (
            f"call {tool} again with a larger offset (or a smaller limit) to page through the rest"
        )
    return f"call {tool} again asking for less (a narrower path, pattern or query) to see the rest"


def capped(
    result: dict[str, Any],
    *,
    tool: str,
    input_schema: dict[str, Any] | None = None,
    max_tokens: int = DEFAULT_MAX_RESULT_TOKENS,
) -> dict[str, Any]:
    """`result` (an MCP `tools/call` result) within `max_tokens` tokens' worth of characters.

    Text items are kept in order up to the budget; the one that crosses it is
    cut (at a line end when one is near); later items are dropped; a
    `structuredContent` that no longer fits is dropped too. A final text item
    says what was kept of how much and how to page (with offset/limit when
    the tool's `input_schema` has an `offset`). A result within budget is
    returned unchanged. Raises ValueError when `max_tokens` < 1.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    budget = max_tokens * CHARS_PER_TOKEN
    content = list(result.get("content") or [])
    structured = result.get("structuredContent")
    sizes = [_item_size(item) for item in content]
    total = sum(sizes) + (_json_size(structured) if structured is not None else 0)
    if total <= budget:
        return result
    kept: list[dict[str, Any]] = []
    shown = 0
    for item, size in zip(content, sizes, strict=True):
        room = budget - shown
        if size <= room:
            kept.append(item)
            shown += size
            continue
        if item.get("type") == "text" and room > 0:
            text = item["text"][:room]
            line_end = text.rfind("\n")
            if line_end > 0 and line_end >= len(text) - _LINE_BACKOFF_CHARS:
                text = text[: line_end + 1]
            kept.append({**item, "text": text})
            shown += len(text)
        break
    out: dict[str, Any] = {"content": kept, "isError": bool(result.get("isError"))}
    dropped_structured = ""
    if structured is not None:
        if _json_size(structured) <= budget - shown:
            out["structuredContent"] = structured
            shown += _json_size(structured)
        else:
            dropped_structured = " Its structuredContent did not fit and was left out."
    kept_tokens = shown // CHARS_PER_TOKEN
    out["content"].append(
        _text(
            f"[gbr-node: result cut to about {kept_tokens:,} tokens ({shown:,} of {total:,} "
            f"characters).{dropped_structured} To see more, {_paging_hint(tool, input_schema)}.]"
        )
    )
    return out


def _failure(kind: FailureKind, peer: str, tool: str, text: str) -> dict[str, Any]:
    return {
        "content": [_text(text)],
        "isError": True,
        "structuredContent": {"peer_error": {"kind": kind, "peer": peer, "tool": tool}},
    }


def peer_failure(peer: str, tool: str, exc: GbrError) -> dict[str, Any]:
    """The `isError` result for a call to `peer`'s `tool` that raised `exc`.

    `PeerUnreachable` (dial failed, stream or connection broken: the peer went
    away) is "unreachable"; `CallTimeout` (ours, or the peer's CALL_TIMEOUT) is
    "timeout"; any other JSON-RPC error the peer answered (unauthorized, not
    granted, sandbox refusal, busy, ...) is "refused"; anything else is
    "unreachable" with the error's words.
    """
    if isinstance(exc, CallTimeout):
        return _failure("timeout", peer, tool, f"peer {peer} did not finish {tool} in time: {exc}")
    if isinstance(exc, RpcError):
        return _failure("refused", peer, tool, f"peer {peer} refused {tool}: {exc.message}")
    if isinstance(exc, PeerUnreachable):
        return _failure("unreachable", peer, tool, f"peer {peer} is unreachable: {exc}")
    return _failure("unreachable", peer, tool, f"calling {tool} on peer {peer} failed: {exc}")


def peer_result(peer: str, tool: str, result: dict[str, Any]) -> dict[str, Any]:
    """`peer`'s result for `tool`; an `isError` one is marked "tool failed", naming the peer."""
    if not result.get("isError"):
        return result
    failed = _failure("tool_failed", peer, tool, f"{tool} failed on peer {peer}:")
    failed["content"] += list(result.get("content") or [])
    return failed


def text_only(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP content items as text items: text is kept, an embedded text resource gives
    its text, a resource link its URI, and image/audio/blob items one line saying
    what was left out (their bytes do not reach the model)."""
    out = []
    for item in content:
        kind = item.get("type")
        if kind == "text":
            out.append(_text(str(item.get("text", ""))))
        elif kind == "resource":
            resource = item.get("resource") or {}
            if "text" in resource:
                out.append(_text(str(resource["text"])))
            else:
                out.append(_text(f"[binary resource {resource.get('uri', '')} left out]"))
        elif kind == "resource_link":
            out.append(_text(f"[resource {item.get('uri', '')}: {item.get('name', '')}]"))
        else:
            mime = item.get("mimeType") or kind
            size = len(str(item.get("data", ""))) * 3 // 4
            out.append(_text(f"[{kind} content ({mime}, about {size:,} bytes) left out]"))
    return out
