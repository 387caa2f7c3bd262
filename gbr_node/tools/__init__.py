"""Local tools (issue 2, "Local tools"): a registry of sandboxed file, folder,
search and command tools with MCP-shaped results. `build_registry` makes one
from a profile's `[tools]` and a `Sandbox`."""

from gbr_node.tools.registry import (
    Registry,
    Tool,
    ToolResult,
    approval_required_result,
    build_registry,
)

__all__ = ["Registry", "Tool", "ToolResult", "approval_required_result", "build_registry"]
