"""Trusted peers' tools as the agent sees them (`agent.dispatch.RemoteTools`).

For each trusted peer of the active profile, the tools it grants us (learned
with `tools/list` when we dial it) are offered to the model as `ALIAS__TOOL`;
two tools of our own, `list_peers` and `dial_peer`, let the model see who is
trusted and connect to one (EVD-AI-02). Calls go on each peer's kept
`/gbr/mcp/1.1.0` stream, several at once, when given `McpStreams` (else each
on its own 1.0.0 stream, ADR-0012b); a peer that vanishes mid-call raises,
and the dispatcher turns that into an error result for the model.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from gbr_node.chat.desk import SEND_MESSAGE_SPEC
from gbr_node.config.network import TrustedPeer
from gbr_node.errors import GbrError, UnknownTool
from gbr_node.p2p.host import P2PHost
from gbr_node.p2p.mcp_streams import McpStreams
from gbr_node.p2p.offered import admit
from gbr_node.p2p.service import call_tool, list_tools
from gbr_node.rpc.limits import Limits

SEPARATOR = "__"
RECONNECT_TIMEOUT_S = 5.0
SETTLED = ("applied", "rejected", "failed")
"""Approval statuses that end an approval (approvals/state.py `Approval.settled`)."""
log = logging.getLogger("gbr_node.peers")

PEER_TOOLS = (
    {
        "name": "list_peers",
        "description": "List the trusted peer nodes: alias, peer ID, whether connected, and the "
        "tools each grants you (called as ALIAS__TOOL).",
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
    },
    {
        "name": "dial_peer",
        "description": "Connect to a trusted peer node (by alias) over an encrypted libp2p "
        "connection and learn which of its tools you may call.",
        "inputSchema": {
            "type": "object",
            "properties": {"peer": {"type": "string", "description": "The peer's alias."}},
            "required": ["peer"],
            "additionalProperties": False,
        },
    },
)


class PeerDirectory:
    """The trusted peers of the active profile and the tools they grant us.

    Args:
        host: our libp2p host.
        peers: returns the active profile's `[peers]` (alias → TrustedPeer).
        limits: returns the RPC limits in force.
        streams: the kept `/gbr/mcp/1.1.0` streams to call peers on, or None for a
            new `/gbr/mcp/1.0.0` stream per call.
    """

    def __init__(
        self,
        host: P2PHost,
        peers: Callable[[], Mapping[str, TrustedPeer]],
        limits: Callable[[], Limits],
        streams: McpStreams | None = None,
    ) -> None:
        self._host = host
        self._peers = peers
        self._limits = limits
        self._streams = streams
        self._tools: dict[str, list[dict[str, Any]]] = {}
        self.send_message: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None
        """The chat desk's `send_message` tool (EVD-AI-02), offered with the peer tools when set."""
        self.awaiting: set[tuple[str, int]] = set()
        """(peer ID, approval_id) of "pending_approval" results our calls got: their
        outcomes, when the peer notifies them, are for this node's agent."""

    def handles(self, name: str) -> bool:
        """True for `list_peers`, `dial_peer`, `send_message` and `ALIAS__TOOL` names."""
        return name in ("list_peers", "dial_peer", "send_message") or SEPARATOR in name

    def specs(self) -> list[dict[str, Any]]:
        """MCP specs: our peer tools (and `send_message`), then each known peer's granted tools."""
        specs = [dict(spec) for spec in PEER_TOOLS]
        if self.send_message is not None:
            specs.append(dict(SEND_MESSAGE_SPEC))
        trusted = self._peers()
        for alias, tools in self._tools.items():
            if alias not in trusted:
                continue
            for tool in tools:
                described = f"[on peer {alias}] {tool.get('description', '')}".strip()
                specs.append(
                    {**tool, "name": f"{alias}{SEPARATOR}{tool['name']}", "description": described}
                )
        return specs

    async def dial(self, alias_or_addr: str) -> str:
        """Connect to a trusted peer (alias, peer ID or `/p2p/` multiaddr), learn its tools.

        Returns a one-line summary, and a second line naming the tools left out
        (`offered.admit`: names no model request may carry). Raises GbrError for a peer that is not
        trusted, PeerUnreachable when it cannot be reached.
        """
        alias, peer = self._find(alias_or_addr)
        target = alias_or_addr if alias_or_addr.startswith("/") else peer.peer_id
        if target == peer.peer_id:
            self._host.add_addrs(peer.peer_id, peer.addrs)
        else:  # remembered, so that an awaited outcome can bring us back (reconnect_awaited)
            self._host.add_addrs(peer.peer_id, [target])
        listed = await list_tools(self._host, target, limits=self._limits(), streams=self._streams)
        tools, note = admit(alias, (t.model_dump() for t in listed), SEPARATOR)
        self._tools[alias] = tools
        names = ", ".join(t["name"] for t in tools) or "none"
        said = f"connected to {alias} ({peer.peer_id}); tools granted to us: {names}"
        return said if note is None else f"{said}\n{note}"

    async def dial_known(self) -> None:
        """Dial every trusted peer that has addresses; failures are logged, not raised."""
        for alias, peer in self._peers().items():
            if peer.addrs:
                try:
                    await self.dial(alias)
                except GbrError as exc:
                    log.info("could not reach peer %s: %s", alias, exc)

    async def reconnect_awaited(
        self, *, timeout_s: float = RECONNECT_TIMEOUT_S
    ) -> list[tuple[str, str, dict[str, Any]]]:
        """Dial again each trusted peer whose approval outcome we await (`awaiting`) and
        to which no connection is open, and ask it where those approvals stand.

        The peer knows no address of ours: it delivers an outcome only on a
        connection we hold (`approvals.service` `redeliver_forever`), and one decided while
        the connection was down (the peer restarted, its idle timeout, a network
        change) may never be sent, so the agent would never hear of the decision
        (EVD-AI-01). Returns `(alias, peer ID, params)` for each awaited approval
        found settled, `params` as an approval-resolved notification's
        (`approval_id`, `status`, `text`). Each dial and query is bounded by
        `timeout_s` seconds; failures are logged, not raised.
        """
        trusted = {peer.peer_id: alias for alias, peer in self._peers().items()}
        connected = set(self._host.connected_peers())
        settled = []
        for peer_id, number in sorted(self.awaiting):
            alias = trusted.get(peer_id)
            if alias is None or peer_id in connected:
                continue
            try:
                with trio.fail_after(timeout_s):
                    result = await call_tool(
                        self._host,
                        peer_id,
                        "approval_status",
                        {"approval_id": number},
                        limits=self._limits(),
                        streams=self._streams,
                    )
            except (GbrError, trio.TooSlowError) as exc:
                log.info("awaiting approval #%s of %s, not reachable: %s", number, alias, exc)
                continue
            status = (result.get("structuredContent") or {}).get("status")
            if status in SETTLED:
                text = "".join(part.get("text", "") for part in result.get("content", []))
                params = {"approval_id": number, "status": status, "text": text}
                settled.append((alias, peer_id, params))
        return settled

    def lines(self) -> list[str]:
        """`/peers`: one line per trusted peer (how it is connected: direct, relayed),
        then the untrusted peers mDNS found on the LAN (issue 23), if it runs."""
        connected = set(self._host.connected_peers())
        lan = self._host.lan.found() if self._host.lan is not None else {}
        out = []
        for alias, peer in self._peers().items():
            state = "not connected"
            if peer.peer_id in connected:
                kinds = self._host.connection_types(peer.peer_id)
                state = "connected" + (" (relayed)" if "direct" not in kinds else "")
            elif peer.peer_id in lan:
                state = "on the LAN"
            tools = ", ".join(t["name"] for t in self._tools.get(alias, [])) or "-"
            out.append(f"  {alias:<12} {state:<22} {peer.peer_id}  tools: {tools}")
        trusted = {peer.peer_id for peer in self._peers().values()}
        strangers = [(pid, addrs) for pid, addrs in lan.items() if pid not in trusted]
        if strangers:
            out.append("  found on the LAN, not trusted (discovery never grants trust):")
            out += [f"    {pid}  {' '.join(addrs)}" for pid, addrs in strangers]
        return out

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run `list_peers`, `dial_peer` or `ALIAS__TOOL`; returns an MCP result.

        Raises UnknownTool for an alias that is not trusted, and whatever
        `p2p.service.call_tool` raises (PeerUnreachable, CallTimeout, RpcError).
        """
        if name == "list_peers":
            return _text("\n".join(self.lines()) or "no trusted peers in the active profile")
        if name == "dial_peer":
            return _text(await self.dial(str(arguments.get("peer", ""))))
        if name == "send_message":
            if self.send_message is None:
                raise UnknownTool("no tool named 'send_message' on this node")
            return await self.send_message(arguments)
        alias, _, tool = name.partition(SEPARATOR)
        peer = self._peers().get(alias)
        if peer is None:
            raise UnknownTool(f"no trusted peer named {alias!r}")
        self._host.add_addrs(peer.peer_id, peer.addrs)
        result = await call_tool(
            self._host, peer.peer_id, tool, arguments, limits=self._limits(), streams=self._streams
        )
        structured = result.get("structuredContent") or {}
        if structured.get("status") == "pending_approval":
            self.awaiting.add((peer.peer_id, int(structured.get("approval_id", 0))))
        return result

    def _find(self, key: str) -> tuple[str, TrustedPeer]:
        for alias, peer in self._peers().items():
            if key in (alias, peer.peer_id) or key.endswith(f"/p2p/{peer.peer_id}"):
                return alias, peer
        raise GbrError(f"{key!r} is not a trusted peer of the active profile (see [peers])")


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}
