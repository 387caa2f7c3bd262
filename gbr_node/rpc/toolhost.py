"""The node's `ToolHost`: trust and grants from the active profile, tools from its registry.

Security model (DESIGN.md): a peer is served only if its peer ID is trusted
in the active profile's `[peers]`, and then only the tools granted to it;
remote calls run through the same registry, sandbox and profile as local
ones. The snapshot is read once per stream (`authorize`), so a hot reload
applies from the next inbound call on and a call in flight keeps the rules
it started with (ADR-0012a).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gbr_node.config.network import TrustedPeer
from gbr_node.errors import UnknownTool
from gbr_node.tools.base import CALLER, ToolResult


class ToolRegistry(Protocol):
    """What a grant needs of the node's tools (`mcp.toolset.NodeTools`)."""

    def has(self, name: str) -> bool: ...

    def specs(self) -> list[dict[str, Any]]: ...

    async def run(self, name: str, arguments: dict[str, Any] | None) -> ToolResult:
        """Run a tool; returns a `tools.base.ToolResult` (its `to_mcp()` is what is sent)."""
        ...


@dataclass(frozen=True)
class Snapshot:
    """The rules in force: trusted peers by alias, and the tool registry."""

    peers: Mapping[str, TrustedPeer]
    registry: ToolRegistry


@dataclass(frozen=True)
class Grant:
    """What one trusted peer may do, fixed when its stream was authorized."""

    peer_id: str
    alias: str
    peer: TrustedPeer
    registry: ToolRegistry


Notify = Callable[[Grant, str, dict[str, Any]], Awaitable[None]]

ALWAYS_GRANTED = frozenset({"approval_status"})
"""Tools every trusted peer may call: they only show the peer its own requests."""


def granted(peer: TrustedPeer, name: str) -> bool:
    """True when `peer` may call tool `name`: its grant, or a tool every peer may call."""
    return name in ALWAYS_GRANTED or peer.may_call(name)


class ProfileToolHost:
    """Serves the registry to the peers the current profile trusts.

    Args:
        current: returns the snapshot in force (changes on hot reload).
        on_notify: receives `notifications/*` from trusted peers, or None to
            ignore them.
    """

    def __init__(self, current: Callable[[], Snapshot], on_notify: Notify | None = None) -> None:
        self._current = current
        self._on_notify = on_notify

    def alias_of(self, peer_id: str) -> str | None:
        """The alias of a trusted peer ID in the current profile, or None."""
        for alias, peer in self._current().peers.items():
            if peer.peer_id == peer_id:
                return alias
        return None

    def authorize(self, peer_id: str) -> Grant | None:
        """The peer's grant, or None when the current profile does not trust it."""
        snapshot = self._current()
        for alias, peer in snapshot.peers.items():
            if peer.peer_id == peer_id:
                return Grant(peer_id, alias, peer, snapshot.registry)
        return None

    def list_tools(self, grant: Grant) -> list[dict[str, Any]]:
        """MCP specs of the tools granted to this peer that are enabled here."""
        return [s for s in grant.registry.specs() if granted(grant.peer, s["name"])]

    async def call_tool(self, grant: Grant, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run a granted tool (`Registry.run`).

        Raises:
            UnknownTool: the tool is not granted to this peer, or the profile
                does not enable it here, or it does not exist. The message is
                the same in every case and names no other tool, so a peer
                learns nothing about tools it may not call (DESIGN.md,
                security model; protocols/gbr-mcp-1.0.0.md section 8).
        """
        if not granted(grant.peer, name) or not grant.registry.has(name):
            raise UnknownTool(f"unknown tool {name!r}")
        CALLER.set((grant.peer_id, grant.alias))  # this task's context only
        result = await grant.registry.run(name, arguments)
        return result.to_mcp()

    async def notify(self, grant: Grant, method: str, params: dict[str, Any]) -> None:
        """Pass a notification from a trusted peer on (e.g. approval outcomes)."""
        if self._on_notify is not None:
            await self._on_notify(grant, method, params)
