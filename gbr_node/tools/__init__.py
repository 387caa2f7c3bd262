"""Local tools (issue 2, "Local tools"): a registry of sandboxed file, folder,
search and command tools with MCP-shaped results. `build_registry` makes one
from a profile's `[tools]` and a `Sandbox`.

The names below are loaded from `registry` on first use (PEP 562), so a
command that needs only `tools.base` (a peer's call, issue 35) does not load
every tool.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gbr_node.tools.registry import (
        Registry,
        Tool,
        ToolResult,
        approval_required_result,
        build_registry,
    )

__all__ = ["Registry", "Tool", "ToolResult", "approval_required_result", "build_registry"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("gbr_node.tools.registry"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
