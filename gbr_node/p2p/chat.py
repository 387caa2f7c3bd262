"""`/gbr/chat/1.0.0` over the libp2p host: serving the chat plane, and sending messages.

Serving: every inbound stream of `/gbr/chat/1.0.0` (one message) or
`/gbr/chat/stream/1.0.0` (many, one at a time) goes to `ChatServer`, which
decides trust and policy before it reads each message (an untrusted peer gets
"unauthorized peer", then its connection is closed, as on `/gbr/mcp/1.0.0`).
Sending: on a stream kept open per peer between messages (`ChatStreams`),
opened (dialing first if needed: EVD-AI-02) when there is none; a peer that
speaks only `/gbr/chat/1.0.0` gets a new stream per message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio
from pydantic import ValidationError

from gbr_node.chat.messages import (
    CHAT_PROTOCOL,
    CHAT_STREAM_PROTOCOL,
    SEND_METHOD,
    Ack,
    ChatMessage,
)
from gbr_node.chat.server import ChatServer
from gbr_node.errors import RemoteProtocolError, StreamBroken
from gbr_node.p2p.host import P2PHost, parse_target
from gbr_node.p2p.service import part_with_untrusted
from gbr_node.p2p.stream import Libp2pByteStream
from gbr_node.rpc import client
from gbr_node.rpc.codes import INVALID_REQUEST
from gbr_node.rpc.limits import Limits

REUSE_S = 5.0
"""A stream idle longer than this (seconds) is closed, not reused: well within the
receiver's idle deadline (its `read_timeout_s`, 10 s by default), so a reused stream is
rarely one the receiver is closing."""


def serve_chat(host: P2PHost, server: ChatServer[Any], limits: Callable[[], Limits]) -> None:
    """Answer both chat protocols' streams on `host` with `server`; `limits` is read per
    message (a hot reload applies to the next one)."""

    def refresh() -> None:
        server.limits = limits()

    async def handle(stream: Any, peer_id: str) -> None:
        refresh()
        await server.handle_stream(stream, peer_id)
        await part_unless_trusted(peer_id)

    async def handle_session(stream: Any, peer_id: str) -> None:
        await server.handle_session(stream, peer_id, before_each=refresh)
        await part_unless_trusted(peer_id)

    async def part_unless_trusted(peer_id: str) -> None:
        try:
            if server.authorizer.authorize(peer_id) is not None:
                return
        except Exception:  # refused by policy: still a trusted peer
            return
        await part_with_untrusted(host, peer_id)

    host.set_stream_handler(CHAT_PROTOCOL, handle, require_trust=False)
    host.set_stream_handler(CHAT_STREAM_PROTOCOL, handle_session, require_trust=False)


class ChatStreams:
    """At most one idle chat stream per peer, kept between messages for the next one.

    A message sent on one skips opening a stream and multistream-select (two
    round trips of three). Streams are taken by one message at a time:
    messages sent at once to one peer take new streams.
    """

    def __init__(self) -> None:
        self._idle: dict[str, tuple[Libp2pByteStream, float]] = {}

    async def take(self, peer_id: str) -> Libp2pByteStream | None:
        """The peer's idle stream, if one was kept less than `REUSE_S` ago (an older one
        is closed); else None."""
        kept = self._idle.pop(peer_id, None)
        if kept is None:
            return None
        stream, since = kept
        if trio.current_time() - since > REUSE_S:
            await stream.aclose()
            return None
        return stream

    async def give_back(self, peer_id: str, stream: Libp2pByteStream) -> None:
        """Keep `stream` (a session stream just answered) for the next message, or close it."""
        old = self._idle.pop(peer_id, None)
        if old is not None:
            await old[0].aclose()
        if stream.protocol_id == CHAT_STREAM_PROTOCOL:
            self._idle[peer_id] = (stream, trio.current_time())
        else:
            await stream.aclose()


async def send_chat(
    host: P2PHost,
    target: str,
    message: ChatMessage,
    *,
    max_message_bytes: int,
    timeout_s: float,
    streams: ChatStreams | None = None,
) -> Ack:
    """Send `message` to `target` (peer ID or `/p2p/` multiaddr); its `Ack`.

    With `streams`, the peer's idle stream is used if there is one (a reused
    stream that turns out ended or broken before the answer is replaced by a
    new one, once: the receiver drops a second copy, so nothing is doubled),
    and the stream is kept there afterwards; without, one new stream for this
    message. `timeout_s` bounds the dial and, again, the request and its answer.
    Raises PeerUnreachable (dial, Noise, stream broken), CallTimeout, an
    `RpcError` subclass for the receiver's refusal (`ChatRefused` with
    `data["reason"]`, `UnauthorizedPeer`, `MessageTooLarge`, ...), or
    RemoteProtocolError for an answer that is no ack.
    """
    peer_id = parse_target(target)[0].to_base58()
    stream = await streams.take(peer_id) if streams is not None else None
    result: dict[str, Any] | None = None
    if stream is not None:
        try:
            result = await _request(stream, message, max_message_bytes, timeout_s)
        except StreamBroken:
            result = None  # the receiver closed it meanwhile: a new stream
    if result is None:
        stream = await host.new_stream(
            target, CHAT_STREAM_PROTOCOL, timeout_s=timeout_s, fallback=(CHAT_PROTOCOL,)
        )
        result = await _request(stream, message, max_message_bytes, timeout_s)
    assert stream is not None
    if streams is None:
        await stream.aclose()
    else:
        await streams.give_back(peer_id, stream)
    try:
        return Ack.model_validate(result)
    except ValidationError as exc:
        raise RemoteProtocolError(INVALID_REQUEST, f"the peer's answer is no ack: {exc}") from exc


async def _request(
    stream: Libp2pByteStream, message: ChatMessage, max_message_bytes: int, timeout_s: float
) -> dict[str, Any]:
    """One `message/send` on `stream` and its result; the stream is reset on any failure."""
    try:
        return await client.call(
            stream,
            SEND_METHOD,
            {"message": message.wire()},
            timeout_s=timeout_s,
            max_message_bytes=max_message_bytes,
        )
    except BaseException:
        await stream.reset()
        raise
