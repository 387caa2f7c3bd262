"""`gbr-node mcp`: the node's and its trusted peers' tools for an MCP client, on stdio (GBR-MCP-01).

Built on the official SDK's low-level `Server` and `stdio_server`, which speak
both eras of MCP on one stdio connection: the current specification
(2026-07-28: `server/discover`, per-request envelopes, change notifications on
a `subscriptions/listen` stream) and the legacy `initialize` handshake. What
this module adds is what the node serves:

- its own tools (`NodeTools`: the sandboxed local tools under the active
  profile, with the same approvals, and mounted MCP servers' `NAME__TOOL`);
- every trusted peer's granted tools as `ALIAS__TOOL`, called over libp2p;
- tool names checked against MCP's rule and settled by `names.offer`; every
  rename is logged once;
- `notifications/tools/list_changed` when the offered list changes (profile
  reload, a mounted server up or down, a peer's grants): on `subscriptions/
  listen` streams for modern clients, on the connection for legacy ones;
- results capped (`results.capped`), peers' failures kept apart by kind
  (`results.peer_failure`); a client's `notifications/cancelled` cancels the
  handler, which cancels a peer's call (its stream is reset) or a mounted
  server's (the SDK sends it `notifications/cancelled` in turn).

stdout carries only JSON-RPC: while serving, fd 1 points at stderr (and fd 0
at /dev/null), so a stray print cannot corrupt the stream; the wire itself is
read and written on the event loop (`stdio.claimed_stdio`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

import mcp_types as types
import trio
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gbr_node import __version__
from gbr_node.errors import GbrError, InvalidArguments, SecurityViolation, UnknownTool
from gbr_node.mcp import names
from gbr_node.mcp.results import DEFAULT_MAX_RESULT_TOKENS, capped, peer_failure, peer_result
from gbr_node.mcp.stdio import claimed_stdio
from gbr_node.sandbox.caller import CALLER, MCP
from gbr_node.tools.base import ToolResult

log = logging.getLogger("gbr_node.mcp")
PEER_REFRESH_S = 15.0
"""How often trusted peers are asked again which tools they grant (and when a change is
announced), besides right after any change of the node's own tools."""
CHANGE_SETTLE_S = 0.1
FIRST_LIST_WAIT_S = 10.0
"""How long the first `tools/list` waits for mounted servers starting and the first dial
of the trusted peers (seconds); what comes later is announced with `list_changed`."""
"""A burst of changes (a reload restarting three servers) is announced once, this long after."""
PEER_SEPARATOR = "__"
NODE_TOOLS_OF_THE_AGENT = frozenset({"list_peers", "dial_peer", "send_message"})
"""The agent's peer tools: `gbr-node mcp` dials peers itself and leaves these out (and
`send_message`, the agent's chat with peers, EVD-AI-02)."""


class LocalTools(Protocol):
    """The node's own tools (`mcp.toolset.NodeTools`)."""

    def specs(self) -> list[dict[str, Any]]: ...

    async def run(self, name: str, arguments: dict[str, Any]) -> ToolResult: ...


class PeerTools(Protocol):
    """Trusted peers' tools (`p2p.remote.PeerDirectory`): `ALIAS__TOOL` specs and calls."""

    def specs(self) -> list[dict[str, Any]]: ...

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]: ...

    async def dial_known(self) -> None: ...


class McpStdioServer:
    """Serves one MCP client on this process's stdin/stdout.

    Args:
        local: returns the node's tools in force (they change on hot reload).
        peers: trusted peers' tools, or None on a node without libp2p.
        listeners: the node's `tool_listeners`; this server adds itself.
        mounts_settled: True once every mounted MCP server is up or has failed to
            start; the first `tools/list` waits for it and for the first dial of
            the trusted peers, at most FIRST_LIST_WAIT_S (issue 34), so a client
            that lists once sees them; later changes go out as `list_changed`.
        instructions: the text MCP clients show about this server.
        max_result_tokens: cap on one result (tokens' worth, 4 characters each).
    """

    def __init__(
        self,
        local: Callable[[], LocalTools],
        peers: PeerTools | None,
        listeners: list[Callable[[], None]],
        *,
        instructions: str = "",
        max_result_tokens: int = DEFAULT_MAX_RESULT_TOKENS,
        mounts_settled: Callable[[], bool] = lambda: True,
    ) -> None:
        self._local = local
        self._mounts_settled = mounts_settled
        self._peers_dialed = trio.Event()
        self._first_list = True
        self._peers = peers
        self._max_tokens = max_result_tokens
        self._bus = InMemorySubscriptionBus()
        self._legacy_session: Any = None
        self._changed = trio.Event()
        self._peers_wanted = trio.Event()
        self._announced = ""
        self._noted: set[str] = set()
        self._naming: names.Naming | None = None  # until the tools may have changed
        listeners.append(self._on_node_change)
        self.server: Server[Any] = Server(
            "gbr-node",
            version=__version__,
            instructions=instructions,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self._bus),
        )

    async def run(self) -> None:
        """Serve until the client closes stdin; peers are dialed and watched meanwhile."""
        self._announced = self._fingerprint(self.naming())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._announce_changes)
            if self._peers is not None:
                nursery.start_soon(self._follow_peers)
            options = self.server.create_initialization_options(
                NotificationOptions(tools_changed=True)
            )
            with claimed_stdio() as pipes:
                async with stdio_server(*(pipes or ())) as (read_stream, write_stream):
                    await self.server.run(read_stream, write_stream, options)
            nursery.cancel_scope.cancel()

    def naming(self) -> names.Naming:
        """The tools offered right now, under their public names (worked out again
        only after the node's tools or a peer's may have changed)."""
        if self._naming is not None:
            return self._naming
        candidates = [
            names.Candidate("local", None, spec["name"], spec) for spec in self._local().specs()
        ]
        for spec in self._peers.specs() if self._peers is not None else ():
            if spec["name"] in NODE_TOOLS_OF_THE_AGENT:
                continue
            alias, _, tool = spec["name"].partition(PEER_SEPARATOR)
            candidates.append(names.Candidate("peer", alias, tool, spec))
        naming = names.offer(candidates)
        for note in naming.notes:
            if note not in self._noted:
                self._noted.add(note)
                log.warning("%s", note)
        self._naming = naming
        return naming

    # -- handlers ------------------------------------------------------------

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        self._remember_legacy(ctx)
        if self._first_list:
            self._first_list = False
            with trio.move_on_after(FIRST_LIST_WAIT_S):
                if self._peers is not None:
                    await self._peers_dialed.wait()
                while not self._mounts_settled():
                    await trio.sleep(0.05)
        tools = [types.Tool.model_validate(_tool_fields(spec)) for spec in self.naming().specs()]
        return types.ListToolsResult(tools=tools)

    async def _call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        self._remember_legacy(ctx)
        offered = self.naming().find(params.name)
        if offered is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        arguments = dict(params.arguments or {})
        candidate = offered.candidate
        if candidate.kind == "peer":
            result = await self._call_peer(candidate.owner or "", candidate.tool, arguments)
        else:
            result = await self._call_local(candidate.tool, arguments)
        schema = candidate.spec.get("inputSchema")
        result = capped(result, tool=offered.name, input_schema=schema, max_tokens=self._max_tokens)
        return types.CallToolResult.model_validate(result)

    async def _call_local(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        token = CALLER.set((MCP, None))  # an MCP client is remote (GBR-PRIV-01)
        try:
            return (await self._local().run(tool, arguments)).to_mcp()
        except UnknownTool as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from exc
        except InvalidArguments as exc:
            return _error(str(exc))
        except SecurityViolation as exc:
            return _error(f"refused by the sandbox: {exc}")
        except GbrError as exc:
            return _error(f"{tool} failed: {exc}")
        finally:
            CALLER.reset(token)

    async def _call_peer(self, alias: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        assert self._peers is not None
        try:
            result = await self._peers.call(f"{alias}{PEER_SEPARATOR}{tool}", arguments)
        except UnknownTool as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from exc
        except GbrError as exc:
            log.info("peer %s: %s failed: %s", alias, tool, exc)
            self._peers_wanted.set()  # its grants may have changed: ask it again now
            return peer_failure(alias, tool, exc)
        return peer_result(alias, tool, result)

    # -- change notifications --------------------------------------------------

    def _remember_legacy(self, ctx: Any) -> None:
        """Keep the handshake-era session: its connection is where list_changed goes
        (stdio carries one connection; a modern client hears on its listen stream)."""
        if self._legacy_session is None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._legacy_session = ctx.session

    def _on_node_change(self) -> None:
        self._naming = None
        self._changed.set()
        self._peers_wanted.set()

    async def _announce_changes(self) -> None:
        while True:
            await self._changed.wait()
            await trio.sleep(CHANGE_SETTLE_S)
            self._changed = trio.Event()
            current = self._fingerprint(self.naming())
            if current == self._announced:
                continue
            self._announced = current
            log.info("tool list changed; telling the MCP client")
            await self._bus.publish(ToolsListChanged())
            if self._legacy_session is not None:
                await self._legacy_session.send_tool_list_changed()

    async def _follow_peers(self) -> None:
        assert self._peers is not None
        while True:
            await self._peers.dial_known()
            self._peers_dialed.set()
            self._naming = None
            self._changed.set()
            with trio.move_on_after(PEER_REFRESH_S):
                await self._peers_wanted.wait()
            self._peers_wanted = trio.Event()

    @staticmethod
    def _fingerprint(naming: names.Naming) -> str:
        return json.dumps(naming.specs(), sort_keys=True, default=str)


def _tool_fields(spec: dict[str, Any]) -> dict[str, Any]:
    """The members of an MCP tool spec that `tools/list` carries."""
    fields = {"name": spec["name"], "inputSchema": spec.get("inputSchema") or {"type": "object"}}
    for key in ("title", "description", "annotations"):
        if spec.get(key) is not None:
            fields[key] = spec[key]
    return fields


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}
