"""The node's chat desk: sending through the outbox, receiving into the inbox, what the person sees.

`ChatDesk` ties the parts of EVD-AI-02 together for one node: the durable
store (`.gbr/chat.db`), the receiving policy (`ProfileChatHost`, served by
`ChatServer` on the libp2p host), the outbox's delivery task, and the lines
the person sees (chat/present.py): each message received at once, each of
ours queued, then delivered, refused (with the receiver's reason) or
expired. It also offers the model's `send_message` tool and the REPL's
`/msg`, `/inbox`, `/thread`. It knows nothing of libp2p: `deliver` is given.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal

from gbr_node.chat.messages import Ack, ChatMessage, new_message
from gbr_node.chat.outbox import Change, Outbox
from gbr_node.chat.present import (
    change_text,
    inbox_text,
    incoming_text,
    queued_text,
    thread_text,
)
from gbr_node.chat.records import Outgoing
from gbr_node.chat.server import Incoming, ProfileChatHost
from gbr_node.chat.store import ChatStore
from gbr_node.config.network import TrustedPeer
from gbr_node.config.profile import ChatConfig
from gbr_node.errors import GbrError, InvalidArguments

log = logging.getLogger("gbr_node.chat")
TOOL_WAIT_S = 3.0
"""How long `send_message` waits for the acknowledgement before answering "queued" (seconds)."""

SEND_MESSAGE_SPEC: dict[str, Any] = {
    "name": "send_message",
    "description": "Send a text message to another agent node (a trusted peer) over an "
    "encrypted libp2p stream, dialing it if needed. Delivery is durable: if the peer is "
    "offline the message is queued and retried for up to a day. Its answer, if any, "
    "arrives later as a message in the same thread, shown to the person.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "peer": {"type": "string", "description": "The peer's alias (or peer ID)."},
            "text": {"type": "string", "description": "The message."},
            "context_id": {
                "type": "string",
                "description": "The thread to continue (default: the latest one with this peer).",
            },
        },
        "required": ["peer", "text"],
        "additionalProperties": False,
    },
}


class ChatDesk:
    """Chat for one node.

    Args:
        store: the durable chat store.
        peers: returns the active profile's `[peers]`.
        config: returns the active `[chat]` table.
        deliver: sends one message to a peer ID, returns its `Ack` (p2p/chat.py).
        notice: shows one block of lines to the person (the REPL's notices,
            `serve`'s stdout); called on the event loop.
        clock: wall-clock seconds.
        connected: returns the peer IDs connected now (`Outbox`).
    `on_reply`, when set, gets every accepted message of a peer on "reply".
    """

    def __init__(
        self,
        store: ChatStore,
        peers: Callable[[], Mapping[str, TrustedPeer]],
        config: Callable[[], ChatConfig],
        deliver: Callable[[str, ChatMessage], Awaitable[Ack]],
        notice: Callable[[str], None],
        clock: Callable[[], float] = time.time,
        connected: Callable[[], Iterable[str]] = tuple,
    ) -> None:
        self.store = store
        self._peers = peers
        self._config = config
        self.notice = notice
        self.host = ProfileChatHost(peers, config, store, self._incoming, clock)
        self.outbox = Outbox(store, deliver, self._changed, clock, connected)
        self.on_reply: Callable[[Incoming], None] | None = None

    def find(self, target: str) -> tuple[str, TrustedPeer]:
        """(alias, peer) of a trusted peer named by alias or peer ID; GbrError otherwise."""
        for alias, peer in self._peers().items():
            if target in (alias, peer.peer_id):
                return alias, peer
        known = ", ".join(self._peers()) or "none"
        raise GbrError(f"{target!r} is not a trusted peer of the active profile (peers: {known})")

    def send(
        self,
        target: str,
        text: str,
        *,
        role: Literal["user", "agent"],
        context_id: str | None = None,
        in_reply_to: str | None = None,
    ) -> Outgoing:
        """Queue `text` for the trusted peer `target` (alias or peer ID) and show it queued.

        The thread is `context_id`, else the latest one with that peer, else a
        new one. A message of the person (`role="user"`) starts the thread's
        reply count again. Raises GbrError for an unknown peer or empty text.
        """
        alias, peer = self.find(target)
        if not text.strip():
            raise InvalidArguments("the message is empty")
        context = context_id or self.store.latest_context(peer.peer_id)
        if in_reply_to is None and context is not None:
            incoming = [i for i in self.store.thread(peer.peer_id, context) if i.incoming]
            in_reply_to = incoming[-1].message.message_id if incoming else None
        try:
            message = new_message(text, role=role, context_id=context, in_reply_to=in_reply_to)
        except ValueError as exc:
            raise InvalidArguments(f"context_id: {exc}") from exc
        size = len(json.dumps(message.wire()).encode())
        limit = self._config().max_message_bytes
        if size > limit:
            raise InvalidArguments(
                f"the message is too big: {size} bytes, [chat] max_message_bytes is {limit}"
            )
        if role == "user":
            self.store.reset_replies(peer.peer_id, message.context_id)
        entry = self.outbox.send(peer.peer_id, alias, message, ttl_s=self._config().ttl_s)
        note = ""
        if peer.chat == "off":
            note = f' (chat = "off" for {alias} here: its answers will be refused)'
        self.notice(queued_text(entry, note=note))
        return entry

    async def send_message_tool(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The model's `send_message(peer, text, context_id?)`: queue, wait briefly for the
        ack, and say where the message stands. Raises GbrError for bad arguments."""
        extra = set(arguments) - {"peer", "text", "context_id"}
        peer, text = arguments.get("peer"), arguments.get("text")
        context_id = arguments.get("context_id")
        if extra or not isinstance(peer, str) or not isinstance(text, str):
            raise InvalidArguments("send_message takes peer (string), text (string), context_id?")
        if context_id is not None and not isinstance(context_id, str):
            raise InvalidArguments("context_id must be a string")
        entry = self.send(peer, text, role="agent", context_id=context_id or None)
        message_id = entry.message.message_id
        settled = await self.outbox.wait_settled(message_id, TOOL_WAIT_S) or entry
        where = f"thread {settled.message.context_id}, message {message_id}"
        if settled.state == "delivered":
            text_out = f"Delivered to {settled.alias} ({where}). Its answer, if any, comes later."
        elif settled.state == "queued":
            why = f" ({settled.last_error})" if settled.last_error else ""
            text_out = (
                f"Queued for {settled.alias} ({where}), not delivered yet{why}; it is retried "
                "until it is delivered or expires, and the person sees which."
            )
        else:
            text_out = (
                f"Not delivered to {settled.alias} ({where}): {settled.state}, {settled.last_error}"
            )
        return {
            "content": [{"type": "text", "text": text_out}],
            "isError": settled.state in ("refused", "expired"),
            "structuredContent": {
                "message_id": message_id,
                "context_id": settled.message.context_id,
                "state": settled.state,
            },
        }

    def _incoming(self, incoming: Incoming) -> None:
        note = " · our agent answers" if incoming.mode == "reply" else ""
        self.notice(incoming_text(incoming.alias, incoming.peer_id, incoming.message, note=note))
        if incoming.mode == "reply" and self.on_reply is not None:
            self.on_reply(incoming)

    def _changed(self, change: Change) -> None:
        self.notice(change_text(change.entry, str(change.state), change.detail))

    # -- what the person reads -----------------------------------------------

    def inbox_text(self) -> str:
        """`/inbox`: every thread, the most recent last."""
        return inbox_text(self.store.threads())

    def thread_text(self, args: str) -> str:
        """`/thread ALIAS [THREAD]`: the latest thread with ALIAS, or the one whose id starts
        with THREAD. Raises GbrError for an unknown alias or thread."""
        words = args.split()
        if not words:
            raise GbrError("usage: /thread ALIAS [THREAD]")
        alias, peer = self.find(words[0])
        if len(words) > 1:
            wanted = [
                t.context_id
                for t in self.store.threads()
                if t.peer_id == peer.peer_id and t.context_id.startswith(words[1])
            ]
            if not wanted:
                raise GbrError(f"no thread {words[1]!r} with {alias}")
            context: str | None = wanted[-1]
        else:
            context = self.store.latest_context(peer.peer_id)
        if context is None:
            return f"no messages with {alias} yet"
        return thread_text(self.store.thread(peer.peer_id, context))
