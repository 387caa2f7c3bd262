"""`/gbr/chat/1.0.0` over the libp2p host: serving the chat plane, and sending one message.

Serving: every inbound stream of the protocol goes to `ChatServer`, which
decides trust and policy before it reads anything (an untrusted peer gets
"unauthorized peer", then its connection is closed, as on `/gbr/mcp/1.0.0`).
Sending: one new stream per message (dialing first if needed: EVD-AI-02),
closed when the acknowledgement is in, reset when the attempt is given up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from gbr_node.chat.messages import CHAT_PROTOCOL, SEND_METHOD, Ack, ChatMessage
from gbr_node.chat.server import ChatServer
from gbr_node.errors import RemoteProtocolError
from gbr_node.p2p.host import P2PHost
from gbr_node.p2p.service import part_with_untrusted
from gbr_node.rpc import client
from gbr_node.rpc.codes import INVALID_REQUEST
from gbr_node.rpc.server import Limits


def serve_chat(host: P2PHost, server: ChatServer[Any], limits: Callable[[], Limits]) -> None:
    """Answer `/gbr/chat/1.0.0` streams on `host` with `server`; `limits` is read per stream
    (a hot reload applies to the next message)."""

    async def handle(stream: Any, peer_id: str) -> None:
        server.limits = limits()
        await server.handle_stream(stream, peer_id)
        if not host_trusts(peer_id):
            await part_with_untrusted(host, peer_id)

    def host_trusts(peer_id: str) -> bool:
        try:
            return server.authorizer.authorize(peer_id) is not None
        except Exception:  # refused by policy: still a trusted peer
            return True

    host.set_stream_handler(CHAT_PROTOCOL, handle, require_trust=False)


async def send_chat(
    host: P2PHost,
    target: str,
    message: ChatMessage,
    *,
    max_message_bytes: int,
    timeout_s: float,
) -> Ack:
    """Send `message` to `target` (peer ID or `/p2p/` multiaddr) on a new stream; its `Ack`.

    `timeout_s` bounds the dial and, again, the request and its answer.
    Raises PeerUnreachable (dial, Noise, stream broken), CallTimeout, an
    `RpcError` subclass for the receiver's refusal (`ChatRefused` with
    `data["reason"]`, `UnauthorizedPeer`, `MessageTooLarge`, ...), or
    RemoteProtocolError for an answer that is no ack.
    """
    stream = await host.new_stream(target, CHAT_PROTOCOL, timeout_s=timeout_s)
    try:
        result = await client.call(
            stream,
            SEND_METHOD,
            {"message": message.wire()},
            timeout_s=timeout_s,
            max_message_bytes=max_message_bytes,
        )
    except BaseException:
        await stream.reset()
        raise
    finally:
        await stream.aclose()
    try:
        return Ack.model_validate(result)
    except ValidationError as exc:
        raise RemoteProtocolError(INVALID_REQUEST, f"the peer's answer is no ack: {exc}") from exc
