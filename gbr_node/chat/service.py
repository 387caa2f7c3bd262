"""The chat service: conversations with other agents (issue 19, EVD-AI-02) —
the desk (store, outbox, the chat plane's host side), the agents that answer
peers on "reply", and `/msg`, `/inbox`, `/thread`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path

from gbr_node.agent.dispatch import LocalTools
from gbr_node.agent.oracle import ChatModel
from gbr_node.chat.desk import ChatDesk
from gbr_node.chat.messages import Ack, ChatMessage
from gbr_node.chat.replies import ReplyAgents
from gbr_node.chat.store import ChatStore, default_path
from gbr_node.config.network import TrustedPeer
from gbr_node.config.profile import ChatConfig
from gbr_node.errors import GbrError
from gbr_node.slash import Command
from gbr_node.textcells import RESET, YELLOW


class ChatService:
    """The project's chat desk (`desk`) and reply agents (`replies`).

    `deliver` sends one message to a peer (`p2p.peers.PeerService.deliver_chat`),
    `connected` names the peers connected now; `tools` and `model` are what a
    reply agent works with.
    """

    commands = (
        Command(
            "msg",
            "ALIAS TEXT",
            "send TEXT to the trusted peer ALIAS (queued until delivered)",
            needs_argument=True,
            completes="alias",
        ),
        Command("inbox", "", "list the conversations with other agents"),
        Command(
            "thread",
            "ALIAS [THREAD]",
            "show the latest (or THREAD's) conversation with ALIAS",
            needs_argument=True,
            completes="alias",
        ),
    )

    def __init__(
        self,
        project_dir: Path,
        peers: Callable[[], Mapping[str, TrustedPeer]],
        config: Callable[[], ChatConfig],
        deliver: Callable[[str, ChatMessage], Awaitable[Ack]],
        notice: Callable[[str], None],
        connected: Callable[[], Iterable[str]],
        tools: Callable[[], LocalTools],
        model: Callable[[], ChatModel],
    ) -> None:
        self.notice = notice
        self.desk = ChatDesk(
            ChatStore(default_path(project_dir)),
            peers,
            config,
            deliver,
            notice,
            connected=connected,
        )
        self.replies = ReplyAgents(
            self.desk.store, peers, config, tools, model, self._send_reply, notice
        )
        self.desk.on_reply = self.replies.take

    def answer_nobody(self) -> None:
        """No agent of ours answers here (`serve`, `mcp`, `send`): messages are shown
        and kept for later."""
        self.desk.on_reply = None

    def _send_reply(self, peer_id: str, text: str, context_id: str, answered: str) -> None:
        """Queue our agent's answer to a peer on "reply" in the thread it answers."""
        try:
            self.desk.send(peer_id, text, role="agent", context_id=context_id, in_reply_to=answered)
        except GbrError as exc:  # the peer was dropped from the profile meanwhile
            self.notice(f"{YELLOW}answer not sent: {exc}{RESET}")

    async def command(self, name: str, args: str) -> str:
        """`/msg ALIAS TEXT`, `/inbox`, `/thread ALIAS [THREAD]` (issue 19)."""
        if name == "inbox":
            return self.desk.inbox_text()
        if name == "thread":
            return self.desk.thread_text(args)
        alias, _, text = args.strip().partition(" ")
        if not text.strip():
            raise GbrError("usage: /msg ALIAS TEXT")
        self.desk.send(alias, text.strip(), role="user")
        return ""
