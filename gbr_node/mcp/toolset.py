"""The node's own tools: the sandboxed registry's and the mounted MCP servers' (GBR-MCP-01).

`NodeTools` is what the agent's dispatcher, the RPC server's grants and
`gbr-node mcp` see as "this node's tools": the profile's `Registry` snapshot
(`read_file`, ..., `approval_status`) and every mounted tool (`NAME__TOOL`)
offered by `Mounts`. A peer may call a mounted tool only when granted it by
name or by `mcp_servers` (`TrustedPeer.may_call`); `"*"` covers local tools only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gbr_node.mcp.mounts import Mounts
from gbr_node.tools.base import ToolResult
from gbr_node.tools.registry import Registry


class NodeTools:
    """A registry snapshot (replaced on hot reload) plus the live mounted tools."""

    def __init__(self, registry: Registry, mounts: Mounts) -> None:
        self.registry = registry
        self.mounts = mounts

    def specs(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """MCP specs: the registry's tools, then the mounted ones (all, or those in `names`)."""
        mounted = self.mounts.specs()
        if names is not None:
            wanted = set(names)
            mounted = [spec for spec in mounted if spec["name"] in wanted]
        return self.registry.specs(names) + mounted

    def has(self, name: str) -> bool:
        """True when `name` is one of the node's tools now."""
        return self.registry.has(name) or self.mounts.has(name)

    async def run(self, name: str, arguments: dict[str, Any] | None) -> ToolResult:
        """Run tool `name`; raises like `Registry.call` (and `Mounts.call` for mounted ones)."""
        if self.mounts.has(name):
            return await self.mounts.call(name, arguments or {})
        return await self.registry.run(name, arguments)

    def call(self, name: str, arguments: dict[str, Any] | None) -> ToolResult:
        """`Registry.call` (blocking); a mounted tool needs the event loop: use `run`."""
        return self.registry.call(name, arguments)
