"""`/gbr/mcp/1.0.0` and `/gbr/mcp/1.1.0` over the libp2p host: serving our tools, calling a peer's.

Serving: every inbound stream of either protocol goes to `RpcServer` (1.0.0:
one request; 1.1.0: many in flight, rpc/pipelined.py), which asks the
`ProfileToolHost` whether the Noise-authenticated peer ID is trusted before
it reads anything. An untrusted peer gets the JSON-RPC "unauthorized peer"
error (nothing runs), then its connection is closed. Calling: with
`McpStreams`, on the peer's kept 1.1.0 stream (p2p/mcp_streams.py); without,
one new 1.0.0 stream per request (ADR-0012b), closed when the response is
in, reset when the call is given up (so the peer stops it). `call_tool` and
`list_tools` live in p2p/mcp_streams.py (so `gbr-node call` needs none of the
serving side) and are named here too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from gbr_node.p2p.host import P2PHost
from gbr_node.p2p.mcp_streams import (
    MCP_PIPELINED,
    MCP_PROTOCOL,
    McpStreams,
    call_tool,
    list_tools,
)
from gbr_node.rpc import client
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.pipelined import serve_pipelined
from gbr_node.rpc.server import CallRecord, RpcServer
from gbr_node.rpc.toolhost import Grant, ProfileToolHost

__all__ = [
    "MCP_PIPELINED",
    "MCP_PROTOCOL",
    "McpStreams",
    "call_tool",
    "describe_call",
    "list_tools",
    "notify_peer",
    "part_with_untrusted",
    "serve_mcp",
]
UNTRUSTED_LINGER_S = 1.0
"""How long an untrusted peer keeps its connection after its "unauthorized" answer."""
log = logging.getLogger("gbr_node.serve")


def serve_mcp(
    host: P2PHost,
    tool_host: ProfileToolHost,
    limits: Callable[[], Limits],
    on_call: Callable[[CallRecord], None] | None = None,
) -> RpcServer[Grant]:
    """Answer `/gbr/mcp/1.0.0` and `/gbr/mcp/1.1.0` streams on `host` with the tools of `tool_host`.

    A peer the profile does not trust gets the JSON-RPC "unauthorized peer"
    error; its connection is closed when it leaves, or `UNTRUSTED_LINGER_S`
    seconds after the answer at the latest.

    `limits` returns the limits in force (the profile's `[node]`; read per
    stream, and per request on 1.1.0, so a hot reload applies to the next call).
    `on_call` receives one `CallRecord` per answered request (the serve log line).
    """
    server = RpcServer(tool_host, limits(), on_call=on_call)

    def refresh() -> None:
        server.limits = limits()

    async def handle(stream: Any, peer_id: str) -> None:
        refresh()
        await server.handle_stream(stream, peer_id)
        if tool_host.authorize(peer_id) is None:
            await part_with_untrusted(host, peer_id)

    async def handle_pipelined(stream: Any, peer_id: str) -> None:
        refresh()
        await serve_pipelined(server, stream, peer_id, before_each=refresh)
        if tool_host.authorize(peer_id) is None:
            await part_with_untrusted(host, peer_id)

    host.set_stream_handler(MCP_PROTOCOL, handle, require_trust=False)
    host.set_stream_handler(MCP_PIPELINED, handle_pipelined, require_trust=False)
    return server


async def part_with_untrusted(host: P2PHost, peer_id: str) -> None:
    """Close the connection of an untrusted peer that has had its "unauthorized" answer:
    once it leaves, or `UNTRUSTED_LINGER_S` seconds after the answer at the latest."""
    # Closing the connection at once can lose the answer in flight (js-libp2p
    # drops unread stream data on GO_AWAY): let the peer read it and leave.
    with trio.move_on_after(UNTRUSTED_LINGER_S):
        while peer_id in host.connected_peers():
            await trio.sleep(0.05)
    await host.disconnect(peer_id)


def describe_call(record: CallRecord, alias: str | None) -> str:
    """One serve log line: peer alias or short ID, tool or method, outcome, milliseconds."""
    who = alias or f"{record.peer_id[:6]}…{record.peer_id[-6:]}"
    what = record.tool or record.method or "-"
    return f"{who} {what} {record.outcome} {record.elapsed_s * 1000:.0f} ms"


async def notify_peer(
    host: P2PHost,
    target: str,
    method: str,
    params: dict[str, Any],
    *,
    timeout_s: float = 10.0,
) -> None:
    """Send one JSON-RPC notification (no response) to `target` on a new stream.

    Raises PeerUnreachable when the peer cannot be reached, CallTimeout when
    the notification cannot be written within `timeout_s` seconds.
    """
    stream = await host.new_stream(target, MCP_PROTOCOL, timeout_s=timeout_s)
    try:
        await client.notify(stream, method, params, timeout_s=timeout_s)
    finally:
        await stream.aclose()
