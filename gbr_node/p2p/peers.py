"""The peers service: this node's libp2p host once it runs, its trusted peers
(`PeerDirectory`), the RPC and chat limits of the profile in force, and
`/peers`, `/dial`; how chat messages and approval outcomes reach a peer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

from gbr_node.chat.messages import Ack, ChatMessage
from gbr_node.config.events import UpdateEnv
from gbr_node.config.loader import LoadedProfile
from gbr_node.errors import GbrError
from gbr_node.p2p.chat import ChatStreams, send_chat
from gbr_node.p2p.host import P2PHost
from gbr_node.p2p.mcp_streams import McpStreams
from gbr_node.p2p.remote import PeerDirectory
from gbr_node.p2p.service import notify_peer
from gbr_node.rpc.limits import Limits
from gbr_node.slash import Command


class PeerService:
    """The host (`host`) and trusted peers (`directory`) of the running node; both
    None until `attach` (and in a process without a host). `loaded` gives the
    profile in force."""

    commands = (
        Command("peers", "", "list trusted peers and whether they are connected"),
        Command(
            "dial",
            "ALIAS|MULTIADDR",
            "connect to a trusted peer and learn its tools",
            needs_argument=True,
            completes="alias",
        ),
    )

    def __init__(self, loaded: Callable[[], LoadedProfile]) -> None:
        self._loaded = loaded
        self.host: P2PHost | None = None
        self.directory: PeerDirectory | None = None
        self._chat_streams = ChatStreams()

    def attach(
        self,
        host: P2PHost,
        send_message: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None,
    ) -> PeerDirectory:
        """Use `host` from now on; the peer directory calls peers on kept 1.1.0 streams
        and offers `send_message` (the chat desk's tool) with the peer tools."""
        self.host = host
        self.directory = PeerDirectory(
            host, lambda: self._loaded().profile.peers, self.limits, McpStreams(host)
        )
        self.directory.send_message = send_message
        return self.directory

    def is_trusted(self, peer_id: str) -> bool:
        """True when the active profile trusts `peer_id`."""
        return any(p.peer_id == peer_id for p in self._loaded().profile.peers.values())

    def limits(self) -> Limits:
        """The RPC limits of the profile's `[node]` table."""
        return Limits.from_config(self._loaded().profile.node)

    def chat_limits(self) -> Limits:
        """The limits of the chat plane: the `[node]` ones, with `[chat] max_message_bytes`."""
        profile = self._loaded().profile
        return replace(self.limits(), max_message_bytes=profile.chat.max_message_bytes)

    def connected_peers(self) -> Iterable[str]:
        """Peer IDs connected now (none without a host)."""
        return self.host.connected_peers() if self.host else ()

    def peer_aliases(self) -> list[str]:
        """The aliases of the active profile's trusted peers (Tab after `/dial`)."""
        return list(self._loaded().profile.peers)

    async def deliver_chat(self, peer_id: str, message: ChatMessage) -> Ack:
        """Send one chat message to a trusted peer (the outbox's `deliver`), dialing it at
        the addresses the profile gives if needed."""
        if self.host is None:
            raise GbrError("this node has no libp2p host")
        for peer in self._loaded().profile.peers.values():
            if peer.peer_id == peer_id:
                self.host.add_addrs(peer_id, peer.addrs)
        limits = self.limits()
        return await send_chat(
            self.host,
            peer_id,
            message,
            max_message_bytes=limits.max_message_bytes,
            timeout_s=limits.read_timeout_s,
            streams=self._chat_streams,
        )

    async def notify(self, peer_id: str, method: str, params: dict[str, Any]) -> None:
        """Send a notification to a peer; GbrError when it is not reached."""
        if self.host is None:
            raise GbrError("no libp2p host")
        await notify_peer(self.host, peer_id, method, params)

    async def reconnect_awaited(self) -> list[tuple[str, str, dict[str, Any]]]:
        """`PeerDirectory.reconnect_awaited`; nothing without a host."""
        return [] if self.directory is None else await self.directory.reconnect_awaited()

    def awaits(self, asked: tuple[str, int]) -> bool:
        """True when our agent's own call got that (peer ID, approval id)'s "pending"."""
        return self.directory is not None and asked in self.directory.awaiting

    def stop_awaiting(self, asked: tuple[str, int]) -> None:
        if self.directory is not None:
            self.directory.awaiting.discard(asked)

    async def dial(self, target: str) -> str:
        """`/dial ALIAS|MULTIADDR`: connect to a trusted peer and learn its tools."""
        if self.directory is None:
            raise GbrError("this node has no libp2p host")
        return await self.directory.dial(target)

    def peers_lines(self) -> list[str]:
        """`/peers`: trusted peers and whether they are connected."""
        return self.directory.lines() if self.directory else []

    async def command(self, name: str, args: str) -> str:
        """`/peers`, `/dial ALIAS|MULTIADDR`."""
        if name == "dial":
            return await self.dial(args)
        return "\n".join(self.peers_lines()) or "no trusted peers in this profile"

    async def profile_changed(self, update: UpdateEnv, previous: LoadedProfile) -> None:
        """Peers no longer trusted are disconnected."""
        if self.host is not None:
            await self.host.drop_untrusted()
