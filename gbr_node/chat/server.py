"""The receiving side of `/gbr/chat/1.0.0`: trust and policy first, then limits, then the inbox.

`ChatServer` is the node's `StreamServer` (rpc/server.py) with one method,
`message/send`: the same admission as the tool plane (trust decided and a
slot taken before a byte is read, GBR-DOS-01; the frame cap checked on the
length prefix; a read deadline), then `ProfileChatHost` applies the
profile: a peer whose `chat` is "off" is refused before its stream is read,
then the per-peer rate, the inbox size and the dedup by `message_id`, each
refusal naming its reason (protocols/gbr-chat-1.0.0.md §6). An accepted
message is committed to the inbox before it is acknowledged, and handed to
`on_message` (shown at once, answered by the agent on "reply").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from gbr_node.chat.limits import RateWindow
from gbr_node.chat.messages import SEND_METHOD, Ack, ChatMessage, SendParams
from gbr_node.chat.store import ChatStore
from gbr_node.config.network import TrustedPeer
from gbr_node.config.profile import ChatConfig
from gbr_node.errors import RpcError
from gbr_node.rpc import codes
from gbr_node.rpc.codes import ChatRefused
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.messages import Request
from gbr_node.rpc.server import Authorizer, CallRecord, StreamServer, parse_params

log = logging.getLogger("gbr_node.chat")
GrantT = TypeVar("GrantT")


@dataclass(frozen=True)
class ChatGrant:
    """A trusted peer allowed to chat, fixed when its stream was admitted."""

    peer_id: str
    alias: str
    mode: Literal["show", "reply"]


@dataclass(frozen=True)
class Incoming:
    """A message just accepted into the inbox, for the node to show (and answer on "reply")."""

    peer_id: str
    alias: str
    mode: Literal["show", "reply"]
    message: ChatMessage


class ChatInbox(Authorizer[GrantT], Protocol[GrantT]):
    """What `ChatServer` serves: who may chat, and where accepted messages go."""

    async def receive(self, grant: GrantT, message: ChatMessage) -> Ack:
        """Keep `message`, or raise `RpcError` (CHAT_REFUSED with `data.reason`)."""
        ...


def refused(reason: str, message: str, **data: Any) -> ChatRefused:
    """The CHAT_REFUSED error for `reason` ("policy", "too_fast", "inbox_full")."""
    return ChatRefused(codes.CHAT_REFUSED, message, {"reason": reason, **data})


class ProfileChatHost:
    """Applies the active profile's `[peers.ALIAS] chat` and `[chat]` limits to incoming messages.

    Args:
        peers: returns the active profile's `[peers]` (read per stream: hot reload).
        config: returns the active `[chat]` table.
        store: the durable inbox.
        on_message: called on the event loop with each accepted message,
            after it is committed; must not block (its exceptions are logged).
        clock: wall-clock seconds (stored times, the rate window).
    """

    def __init__(
        self,
        peers: Callable[[], Mapping[str, TrustedPeer]],
        config: Callable[[], ChatConfig],
        store: ChatStore,
        on_message: Callable[[Incoming], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._peers = peers
        self._config = config
        self._store = store
        self._on_message = on_message
        self._clock = clock
        self._rate = RateWindow()

    def authorize(self, peer_id: str) -> ChatGrant | None:
        """None for a peer the profile does not trust (UNAUTHORIZED_PEER); raises
        CHAT_REFUSED "policy" for a trusted one whose `chat` is "off"."""
        for alias, peer in self._peers().items():
            if peer.peer_id == peer_id:
                if peer.chat == "off":
                    raise refused("policy", "this node does not take messages from you (chat off)")
                return ChatGrant(peer_id, alias, peer.chat)
        return None

    async def receive(self, grant: ChatGrant, message: ChatMessage) -> Ack:
        """Rate, inbox size and dedup, in that order; commit, acknowledge, hand on."""
        config = self._config()
        now = self._clock()
        wait = self._rate.allow(grant.peer_id, config.messages_per_minute, now)
        if wait is not None:
            raise refused(
                "too_fast",
                f"more than {config.messages_per_minute} messages a minute from you",
                retry_after_s=round(wait, 3),
            )
        status = self._store.receive(
            grant.peer_id,
            grant.alias,
            message,
            now=now,
            max_per_peer=config.inbox_max_per_peer,
        )
        if status != "accepted":
            self._rate.forget(grant.peer_id)
        if status == "inbox_full":
            raise refused(
                "inbox_full", f"inbox full: {config.inbox_max_per_peer} messages from you kept"
            )
        if status == "accepted":
            try:
                self._on_message(Incoming(grant.peer_id, grant.alias, grant.mode, message))
            except Exception:
                log.exception("showing a message from %s failed", grant.alias)
        return Ack(message_id=message.message_id, status=status)


class ChatServer(StreamServer[GrantT]):
    """Serves `/gbr/chat/1.0.0` streams: one `message/send` request and its ack per stream."""

    def __init__(
        self,
        inbox: ChatInbox[GrantT],
        limits: Limits | None = None,
        *,
        on_call: Callable[[CallRecord], None] | None = None,
    ) -> None:
        super().__init__(inbox, limits, on_call=on_call)
        self.inbox = inbox

    async def _dispatch(self, request: Request, grant: GrantT, outcome: Any) -> dict[str, Any]:
        if request.method != SEND_METHOD:
            raise RpcError(codes.METHOD_NOT_FOUND, f"method not found: {request.method}")
        params = parse_params(SendParams, request.params)
        ack = await self.inbox.receive(grant, params.message)
        outcome.note = ack.status
        return ack.model_dump(mode="json")
