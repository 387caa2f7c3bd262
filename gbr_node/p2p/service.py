"""`/gbr/mcp/1.0.0` over the libp2p host: serving our tools, and calling a peer's.

Serving: every inbound stream of the protocol goes to `RpcServer`, which asks
the `ProfileToolHost` whether the Noise-authenticated peer ID is trusted
before it reads anything. An untrusted peer gets the JSON-RPC "unauthorized
peer" error (nothing runs), then its connection is closed. Calling: one new
stream per request (ADR-0012b), closed when the response is in, reset when
the call is given up (so the peer stops it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from gbr_node.p2p.host import P2PHost
from gbr_node.rpc import client
from gbr_node.rpc.messages import ToolInfo
from gbr_node.rpc.server import CallRecord, Limits, RpcServer
from gbr_node.rpc.toolhost import Grant, ProfileToolHost

MCP_PROTOCOL = "/gbr/mcp/1.0.0"
UNTRUSTED_LINGER_S = 1.0
"""How long an untrusted peer keeps its connection after its "unauthorized" answer."""
log = logging.getLogger("gbr_node.serve")


def serve_mcp(
    host: P2PHost,
    tool_host: ProfileToolHost,
    limits: Callable[[], Limits],
    on_call: Callable[[CallRecord], None] | None = None,
) -> RpcServer[Grant]:
    """Answer `/gbr/mcp/1.0.0` streams on `host` with the tools of `tool_host`.

    A peer the profile does not trust gets the JSON-RPC "unauthorized peer"
    error; its connection is closed when it leaves, or `UNTRUSTED_LINGER_S`
    seconds after the answer at the latest.

    `limits` returns the limits in force (the profile's `[node]`; read per
    stream so a hot reload applies to the next call). `on_call` receives one
    `CallRecord` per answered stream (the serve log line).
    """
    server = RpcServer(tool_host, limits(), on_call=on_call)

    async def handle(stream: Any, peer_id: str) -> None:
        server.limits = limits()
        await server.handle_stream(stream, peer_id)
        if tool_host.authorize(peer_id) is None:
            await part_with_untrusted(host, peer_id)

    host.set_stream_handler(MCP_PROTOCOL, handle, require_trust=False)
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


async def call_tool(
    host: P2PHost,
    target: str,
    name: str,
    arguments: dict[str, Any],
    *,
    limits: Limits,
    dial_timeout_s: float = 10.0,
) -> dict[str, Any]:
    """Call tool `name` on `target` (peer ID or `/p2p/` multiaddr) on a new stream.

    Returns the MCP result `{"content": [...], "isError": bool}`. Raises
    PeerUnreachable (dial, Noise, wrong peer ID, stream broken), CallTimeout
    (after `limits.call_timeout_s`), or an RpcError subclass the peer sent
    (UnauthorizedPeer, InvalidParams for a tool not granted, ...). A call
    given up before its answer (time limit, cancellation) resets the stream:
    the peer cancels it and frees its slot.
    """
    stream = await host.new_stream(target, MCP_PROTOCOL, timeout_s=dial_timeout_s)
    try:
        result = await client.call_tool(
            stream,
            name,
            arguments,
            timeout_s=limits.call_timeout_s,
            max_message_bytes=limits.max_message_bytes,
        )
    except BaseException:
        await stream.reset()  # given up (time limit, cancelled): the peer stops the call
        raise
    finally:
        await stream.aclose()
    return result.model_dump(exclude_none=True)


async def list_tools(
    host: P2PHost, target: str, *, limits: Limits, dial_timeout_s: float = 10.0
) -> list[ToolInfo]:
    """`tools/list` on `target`: the tools it grants us. Raises like `call_tool`."""
    stream = await host.new_stream(target, MCP_PROTOCOL, timeout_s=dial_timeout_s)
    try:
        return await client.list_tools(
            stream, timeout_s=limits.call_timeout_s, max_message_bytes=limits.max_message_bytes
        )
    except BaseException:
        await stream.reset()
        raise
    finally:
        await stream.aclose()


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
