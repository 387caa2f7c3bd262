"""A profile's `[node]` and `[peers]` sections: this node on the network and the peers it
trusts (UBQ-AI-02); pure, frozen models, an unknown key in them an error.

`config.profile` builds the whole profile from these and the other sections.
`NetworkSections` is the same two sections alone, for the one-shot commands that
use nothing else: `gbr-node call` dials a peer by the profile's `[peers]` alias
and reads `[node] mdns`, and applies none of the profile's other rules (sandbox,
tools, model, checks), so it validates only these (`config.loader.load_network`)
and does not build the other models (issue 35).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gbr_node.config.patterns import PEER_ADDR, PEER_ID, RELAY_MULTIADDR, TABLE_NAME, TCP_MULTIADDR

MOUNT_SEPARATOR = "__"
"""A mounted MCP server's tools are named `NAME__TOOL` (GBR-MCP-01); local tools never hold it."""
MCP_SERVERS_GRANT = "mcp_servers"
"""The grant word that, in a peer's `tools`, grants every mounted MCP server's tools."""


def check_host_and_port(text: str, *, port_zero: bool = False) -> None:
    """Check the host and TCP port of a multiaddr the patterns of `config.patterns`
    accepted: an ip4 or ip6 host must be an IP address, the port 1-65535 (0 too with
    `port_zero`: a listen address, any free port).

    Raises:
        ValueError: naming the address and what is wrong with it.
    """
    _empty, kind, host, _tcp, port, *_rest = text.split("/")
    if kind in ("ip4", "ip6"):
        try:
            (ipaddress.IPv4Address if kind == "ip4" else ipaddress.IPv6Address)(host)
        except ValueError:
            raise ValueError(f"{text}: {host} is not an {kind} address") from None
    if not (0 if port_zero else 1) <= int(port) <= 65535:
        raise ValueError(f"{text}: port {port} is not 1-65535")


class Frozen(BaseModel):
    """Base of the profile's models: frozen, and an unknown key is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeConfig(Frozen):
    """`[node]`: libp2p listen multiaddrs, JSON-RPC limits, and reaching peers on other
    networks (issue 23). Sizes in bytes, times in seconds.

    `announce`: the multiaddrs others should dial (never a wildcard such as
    0.0.0.0: py-libp2p's DCUtR dials what is announced). `relays`: relays this
    node keeps a reservation on (`/ip4/A/tcp/P/p2p/RELAY`), so that peers reach it
    at `RELAY/p2p-circuit/p2p/SELF`. `relay = true` makes this node a relay
    (circuit relay v2 hop) for the peers `relay_for` says: "trusted" (the
    profile's `[peers]`, by Noise-authenticated peer ID) or "any". The relay only
    forwards bytes; trust stays end to end. Its limits: `relay_max_reservations`
    held at once, `relay_max_circuits` open at once, `relay_circuit_bytes` and
    `relay_circuit_s` per circuit, `relay_reservation_s` how long a reservation
    lasts (py-libp2p's `reservation_ttl`). `mdns = true` finds peers on the LAN;
    discovery never grants trust.
    """

    listen: tuple[Annotated[str, Field(pattern=TCP_MULTIADDR)], ...] = ("/ip4/127.0.0.1/tcp/4001",)
    max_message_bytes: Annotated[int, Field(gt=0)] = 4 * 1024 * 1024
    max_concurrent_calls_per_peer: Annotated[int, Field(gt=0)] = 16
    call_timeout_s: Annotated[float, Field(gt=0)] = 120.0
    read_timeout_s: Annotated[float, Field(gt=0)] = 10.0
    announce: tuple[Annotated[str, Field(pattern=TCP_MULTIADDR)], ...] = ()
    relays: tuple[Annotated[str, Field(pattern=RELAY_MULTIADDR)], ...] = ()
    relay: bool = False
    relay_for: Literal["trusted", "any"] = "trusted"
    relay_max_reservations: Annotated[int, Field(ge=1, le=100_000)] = 16
    relay_max_circuits: Annotated[int, Field(ge=1, le=100_000)] = 8
    relay_circuit_bytes: Annotated[int, Field(ge=64 * 1024, le=1 << 40)] = 128 * 1024 * 1024
    relay_circuit_s: Annotated[int, Field(ge=10, le=30 * 86400)] = 3600
    relay_reservation_s: Annotated[int, Field(ge=2, le=30 * 86400)] = 3600
    mdns: bool = False

    @field_validator("listen")
    @classmethod
    def _bindable(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            check_host_and_port(text, port_zero=True)
        return value

    @field_validator("announce", "relays")
    @classmethod
    def _dialable(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            check_host_and_port(text)
            host = text.split("/")[2]
            if host in ("0.0.0.0", "::"):
                raise ValueError(
                    f"{text} is a wildcard, not an address others can dial: give this "
                    "machine's real address, e.g. /ip4/203.0.113.5/tcp/4001"
                )
        return value


class TrustedPeer(Frozen):
    """`[peers.ALIAS]`: a trusted peer, where to dial it, and the tools it may call.

    `addrs` are direct TCP multiaddrs or relayed ones (`RELAY/p2p-circuit`, issue
    23); direct ones are tried first.

    `tools` lists tool names; `"*"` (alone or in the list) grants every local
    tool, and `"mcp_servers"` every mounted MCP server's tool (`NAME__TOOL`).
    A mounted server runs outside the sandbox with the person's rights, so
    `"*"` alone never grants its tools (GBR-MCP-01): they must be named, or
    granted with `"mcp_servers"`.

    `chat` says what this node does with the peer's `/gbr/chat/1.0.0` messages
    (EVD-AI-02): "off" refuses them (the default: a peer trusted for tools is
    not thereby allowed to talk to the person), "show" shows and keeps them for
    the person only, "reply" also lets this node's agent answer them, in a
    conversation of its own per thread, with this peer's `tools` grant and
    nothing more. Any other value is a profile error (GBR-FAIL-01).
    """

    peer_id: Annotated[str, Field(pattern=PEER_ID)]
    addrs: tuple[Annotated[str, Field(pattern=PEER_ADDR)], ...] = ()
    tools: tuple[str, ...] | Literal["*"] = ()
    chat: Literal["off", "show", "reply"] = "off"

    @model_validator(mode="after")
    def _addrs_reach_this_peer(self) -> TrustedPeer:
        for text in self.addrs:
            check_host_and_port(text)
            named = text.rsplit("/p2p/", 1)[1] if text.rsplit("/", 2)[-2] == "p2p" else None
            if named is not None and named != self.peer_id:
                raise ValueError(f"addrs: {text} ends in peer {named}, not this peer's peer_id")
        return self

    def may_call(self, tool: str) -> bool:
        """True when this peer is granted `tool` (a mounted one only by name or `mcp_servers`)."""
        mounted = MOUNT_SEPARATOR in tool
        if self.tools == "*":
            return not mounted
        if tool in self.tools:
            return True
        return (MCP_SERVERS_GRANT if mounted else "*") in self.tools


PeerAlias = Annotated[str, Field(pattern=TABLE_NAME)]
"""The ALIAS of a `[peers.ALIAS]` table."""


class NetworkSections(BaseModel):
    """A profile's `[node]` and `[peers]`, each validated in full as in `Profile` (same
    models, same errors); every other key of the document is left unread, unchecked.

    For one-shot commands that apply none of the other sections' rules: a mistake
    in, say, `[tools.run_command]` does not stop `gbr-node call`, which runs no
    tool here, while a bad peer address still does, with the message `serve`
    would give. Rules of `Profile` that tie these sections to others (a
    `[peers]` alias that is also an `[mcp_servers]` name) are `Profile`'s alone.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    node: NodeConfig = NodeConfig()
    peers: dict[PeerAlias, TrustedPeer] = {}
