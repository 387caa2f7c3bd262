"""Calling a peer's tools: one kept `/gbr/mcp/1.1.0` stream per peer, or a stream per call.

`McpStreams.call(target, method, params)` sends the request on the peer's
kept stream, where any number of calls are in flight at once and answered in
any order (rpc/session.py, protocols/gbr-mcp-1.1.0.md). When the peer has
none usable, one is opened, proposing `/gbr/mcp/1.1.0` then `/gbr/mcp/1.0.0`
(multistream-select): calls made meanwhile wait for that one opening instead
of each opening its own. A peer that agrees only to 1.0.0 (an older gbr-node,
the js peers of tests/interop) gets one new 1.0.0 stream per call, as
`call_once` makes, and is remembered as such for `OLD_PEER_S`.

A stream that breaks fails only the calls in flight on it, each with its own
error; the next call opens a new stream. A call the peer's clean end of
stream left unanswered (`StreamEnded`: by the protocol nothing of it ran) is
sent once more on a new stream.
"""

from __future__ import annotations

from typing import Any

import trio

from gbr_node.errors import StreamEnded
from gbr_node.p2p.host import P2PHost, parse_target
from gbr_node.p2p.stream import Libp2pByteStream
from gbr_node.rpc import client
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.messages import CallToolResult, ListToolsResult, ToolInfo
from gbr_node.rpc.session import CallSession

__all__ = ["MCP_PIPELINED", "MCP_PROTOCOL", "McpStreams", "call_once", "call_tool", "list_tools"]

MCP_PROTOCOL = "/gbr/mcp/1.0.0"
"""One request per stream (protocols/gbr-mcp-1.0.0.md)."""
MCP_PIPELINED = "/gbr/mcp/1.1.0"
"""Requests pipelined on a kept stream, matched by id (protocols/gbr-mcp-1.1.0.md)."""
REUSE_S = 5.0
"""A kept stream idle longer than this (seconds) is closed, not reused: well within the
serving node's idle deadline (its `read_timeout_s`, 10 s by default)."""
OLD_PEER_S = 300.0
"""How long (seconds) a peer that agreed only to 1.0.0 is called on 1.0.0 directly,
without proposing 1.1.0 first (one round trip saved per call)."""


async def call_once(
    stream: Libp2pByteStream, method: str, params: dict[str, Any] | None, *, limits: Limits
) -> dict[str, Any]:
    """`method` as the one request of `stream` (a new `/gbr/mcp/1.0.0` stream); its result.

    The stream is closed after the answer, and reset when the call is given up
    (time limit, cancellation, error) so that the peer stops it. Raises as
    `rpc.client.call` does.
    """
    try:
        return await client.call(
            stream,
            method,
            params,
            timeout_s=limits.call_timeout_s,
            max_message_bytes=limits.max_message_bytes,
        )
    except BaseException:
        await stream.reset()
        raise
    finally:
        await stream.aclose()


class McpStreams:
    """The kept `/gbr/mcp/1.1.0` stream of each peer this node calls (issue 35).

    Args:
        host: our libp2p host, which dials and opens the streams.
    """

    def __init__(self, host: P2PHost) -> None:
        self._host = host
        self._sessions: dict[str, CallSession] = {}
        self._opening: dict[str, trio.Lock] = {}
        self._old: dict[str, float] = {}

    async def call(
        self,
        target: str,
        method: str,
        params: dict[str, Any] | None,
        *,
        limits: Limits,
        dial_timeout_s: float = 10.0,
    ) -> dict[str, Any]:
        """Send `method` to `target` (peer ID or `/p2p/` multiaddr) and return its result.

        `dial_timeout_s` bounds dialing and opening a stream (seconds);
        `limits.call_timeout_s` the request and its answer. Raises
        PeerUnreachable (dial, Noise, the stream broke: `StreamBroken`),
        CallTimeout, or the `RpcError` subclass the peer answered with
        (`UnauthorizedPeer`, `InvalidParams`, `PeerBusy`, ...). Cancelled, the
        call is withdrawn (1.1.0: `notifications/cancelled`; 1.0.0: its stream
        is reset) and the peer stops it.
        """
        peer_id = parse_target(target)[0].to_base58()
        for attempt in (1, 2):
            opened = await self._session(target, peer_id, limits, dial_timeout_s)
            if isinstance(opened, Libp2pByteStream):
                return await call_once(opened, method, params, limits=limits)
            try:
                result: dict[str, Any] = await opened.call(
                    method, params, timeout_s=limits.call_timeout_s
                )
                return result
            except StreamEnded:
                if attempt == 2:
                    raise
            finally:
                if not opened.usable:
                    await self._retire(peer_id, opened)
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Close every kept stream (calls still in flight on them fail)."""
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.aclose()

    async def _session(
        self, target: str, peer_id: str, limits: Limits, dial_timeout_s: float
    ) -> CallSession | Libp2pByteStream:
        """The peer's usable session; else a new one, or a new 1.0.0 stream for an old peer."""
        kept = await self._kept(peer_id)
        if kept is not None:
            return kept
        if trio.current_time() - self._old.get(peer_id, -OLD_PEER_S) < OLD_PEER_S:
            return await self._host.new_stream(target, MCP_PROTOCOL, timeout_s=dial_timeout_s)
        async with self._opening.setdefault(peer_id, trio.Lock()):
            kept = await self._kept(peer_id)  # opened by another call meanwhile
            if kept is not None:
                return kept
            stream = await self._host.new_stream(
                target, MCP_PIPELINED, timeout_s=dial_timeout_s, fallback=(MCP_PROTOCOL,)
            )
            if stream.protocol_id != MCP_PIPELINED:
                self._old[peer_id] = trio.current_time()
                return stream
            session = CallSession(stream, max_message_bytes=limits.max_message_bytes)
            self._sessions[peer_id] = session
            return session

    async def _kept(self, peer_id: str) -> CallSession | None:
        """The peer's session if it is usable and busy or recently used; a stale one is retired."""
        session = self._sessions.get(peer_id)
        if session is None:
            return None
        recent = trio.current_time() - session.last_used < REUSE_S
        if session.usable and (session.in_flight or recent):
            return session
        await self._retire(peer_id, session)
        return None

    async def _retire(self, peer_id: str, session: CallSession) -> None:
        """Take `session` out of use; close it once no call is in flight on it (the last
        call on it closes it otherwise)."""
        if self._sessions.get(peer_id) is session:
            del self._sessions[peer_id]
        if not session.in_flight:
            await session.aclose()


async def call_tool(
    host: P2PHost,
    target: str,
    name: str,
    arguments: dict[str, Any],
    *,
    limits: Limits,
    dial_timeout_s: float = 10.0,
    streams: McpStreams | None = None,
) -> dict[str, Any]:
    """Call tool `name` on `target` (peer ID or `/p2p/` multiaddr).

    With `streams`, on the peer's kept `/gbr/mcp/1.1.0` stream (1.0.0 for a
    peer that speaks only that); without, on a new 1.0.0 stream. Returns the
    MCP result `{"content": [...], "isError": bool}`. Raises PeerUnreachable
    (dial, Noise, wrong peer ID, stream broken), CallTimeout (after
    `limits.call_timeout_s`), or an RpcError subclass the peer sent
    (UnauthorizedPeer, InvalidParams for a tool not granted, ...). A call
    given up before its answer (time limit, cancellation) is withdrawn (its
    1.0.0 stream reset; on 1.1.0, `notifications/cancelled`): the peer stops it
    and frees its slot.
    """
    params = {"name": name, "arguments": arguments}
    result = await _call(host, target, "tools/call", params, limits, dial_timeout_s, streams)
    return client.shaped(CallToolResult, result, "tools/call").model_dump(exclude_none=True)


async def list_tools(
    host: P2PHost,
    target: str,
    *,
    limits: Limits,
    dial_timeout_s: float = 10.0,
    streams: McpStreams | None = None,
) -> list[ToolInfo]:
    """`tools/list` on `target`: the tools it grants us. Raises like `call_tool`."""
    result = await _call(host, target, "tools/list", None, limits, dial_timeout_s, streams)
    return client.shaped(ListToolsResult, result, "tools/list").tools


async def _call(
    host: P2PHost,
    target: str,
    method: str,
    params: dict[str, Any] | None,
    limits: Limits,
    dial_timeout_s: float,
    streams: McpStreams | None,
) -> dict[str, Any]:
    if streams is not None:
        return await streams.call(
            target, method, params, limits=limits, dial_timeout_s=dial_timeout_s
        )
    stream = await host.new_stream(target, MCP_PROTOCOL, timeout_s=dial_timeout_s)
    return await call_once(stream, method, params, limits=limits)
