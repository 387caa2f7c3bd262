"""Many messages on one stream, `/gbr/chat/stream/1.0.0` (protocols/gbr-chat-1.0.0.md §2.1).

Receiving (in-memory streams, the real `ChatServer` and SQLite store): each
message is admitted again before it is read (trust and `chat` re-read from the
profile), an answer with id null ends the stream, and so do the sender's end
and silence. Sending (real libp2p hosts on 127.0.0.1): `ChatStreams` keeps the
stream for the next message, replaces one that broke, and falls back to one
stream per message for a receiver that speaks only `/gbr/chat/1.0.0`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from gbr_node.chat.messages import CHAT_PROTOCOL, CHAT_STREAM_PROTOCOL, new_message
from gbr_node.chat.server import ChatServer, Incoming, ProfileChatHost
from gbr_node.chat.store import ChatStore
from gbr_node.config.network import TrustedPeer
from gbr_node.config.profile import ChatConfig
from gbr_node.p2p.chat import ChatStreams, send_chat, serve_chat
from gbr_node.rpc.framing import FrameDecoder, encode_frame
from gbr_node.rpc.limits import Limits
from tests.chat.vectors import send
from tests.p2p.helpers import running_host

BOB = "12D3KooW" + "S" * 44
READ_TIMEOUT_S = 10.0


class Receiver:
    """A `ChatServer` over a real store whose profile the test edits between messages."""

    def __init__(self, folder: Path) -> None:
        self.peers: dict[str, TrustedPeer] = {"bob": TrustedPeer(peer_id=BOB, chat="show")}
        self.store = ChatStore(folder / "chat.db")
        self.shown: list[Incoming] = []
        host = ProfileChatHost(
            lambda: self.peers, lambda: ChatConfig(), self.store, self.shown.append
        )
        self.server = ChatServer(host, Limits(read_timeout_s=READ_TIMEOUT_S))


class Session:
    """The sender's end of one in-memory session stream."""

    def __init__(self, stream: trio.testing.MemoryStapledStream) -> None:  # type: ignore[name-defined]
        self.stream = stream
        self.decoder = FrameDecoder(1 << 20)

    async def request(self, message_id: str, request_id: int) -> dict[str, Any]:
        await self.stream.send_all(
            encode_frame(json.dumps(send(message_id, request_id=request_id)).encode())
        )
        return await self.answer()

    async def answer(self) -> dict[str, Any]:
        while True:
            chunk = await self.stream.receive_some()
            assert chunk, "the receiver closed the stream before answering"
            frames = self.decoder.feed(chunk)
            if frames:
                answer: dict[str, Any] = json.loads(frames[0])
                return answer

    async def rest(self) -> bytes:
        """Everything until the receiver closes the stream."""
        received = bytearray()
        while chunk := await self.stream.receive_some():
            received += chunk
        return bytes(received)


@asynccontextmanager
async def _session(receiver: Receiver, timeout_s: float = 10) -> AsyncIterator[Session]:
    """A session stream from BOB that `receiver` serves, for at most `timeout_s`."""
    client, served = trio.testing.memory_stream_pair()
    with trio.fail_after(timeout_s):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receiver.server.handle_session, served, BOB)
            yield Session(client)


async def test_three_messages_on_one_stream_each_acked_kept_and_shown(tmp_path: Path) -> None:
    receiver = Receiver(tmp_path)
    async with _session(receiver) as session:
        answers = [await session.request(f"m-{n}", n) for n in (1, 2, 3)]
        duplicate = await session.request("m-2", 4)
        await session.stream.send_stream.aclose()  # the sender ends its side
        assert await session.rest() == b""  # closed, nothing more said
    assert [a["result"]["status"] for a in answers] == ["accepted"] * 3
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert duplicate["result"]["status"] == "duplicate"
    assert [i.message.message_id for i in receiver.shown] == ["m-1", "m-2", "m-3"]
    assert receiver.store.inbox_count(BOB) == 3
    assert receiver.server.active_calls(BOB) == 0


@pytest.mark.parametrize(
    ("withdraw", "code", "reason"),
    [
        ("chat off", -32006, "policy"),
        ("untrusted", -32001, None),
    ],
)
async def test_a_withdrawn_peer_is_refused_on_its_next_message(
    tmp_path: Path, withdraw: str, code: int, reason: str | None
) -> None:
    receiver = Receiver(tmp_path)
    async with _session(receiver) as session:
        first = await session.request("m-1", 1)
        if withdraw == "chat off":
            receiver.peers["bob"] = TrustedPeer(peer_id=BOB, chat="off")
        else:
            receiver.peers.clear()
        refusal = await session.request("m-2", 2)
        assert await session.rest() == b""
    assert first["result"]["status"] == "accepted"
    assert refusal["id"] is None
    assert refusal["error"]["code"] == code
    if reason:
        assert refusal["error"]["data"]["reason"] == reason
    assert receiver.store.inbox_count(BOB) == 1
    assert len(receiver.shown) == 1


async def test_a_silent_session_is_closed_quietly_and_holds_no_slot(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    receiver = Receiver(tmp_path)
    async with _session(receiver, READ_TIMEOUT_S * 3) as session:
        await session.request("m-1", 1)
        await trio.testing.wait_all_tasks_blocked()
        assert receiver.server.active_calls(BOB) == 0  # no slot held while it waits
        assert await session.rest() == b""  # after read_timeout_s: closed, no error frame
    assert receiver.server.active_calls(BOB) == 0


async def test_half_a_frame_then_silence_gets_call_timeout_and_the_end(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    receiver = Receiver(tmp_path)
    async with _session(receiver, READ_TIMEOUT_S * 3) as session:
        await session.request("m-1", 1)
        frame = encode_frame(json.dumps(send("m-2", request_id=2)).encode())
        await session.stream.send_all(frame[:10])
        late = await session.answer()
        assert await session.rest() == b""
    assert (late["id"], late["error"]["code"]) == (None, -32003)
    assert receiver.store.inbox_count(BOB) == 1


async def test_a_broken_frame_gets_an_error_and_the_end(tmp_path: Path) -> None:
    receiver = Receiver(tmp_path)
    async with _session(receiver) as session:
        await session.request("m-1", 1)
        await session.stream.send_all(encode_frame(b"{not json"))
        broken = await session.answer()
        assert await session.rest() == b""
    assert (broken["id"], broken["error"]["code"]) == (None, -32700)


# -- sending, between real hosts -------------------------------------------------------


class CountingServer(ChatServer[Any]):
    """Counts the streams of each kind it serves."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.streams: list[str] = []

    async def handle_stream(self, stream: Any, peer_id: str) -> None:
        self.streams.append(CHAT_PROTOCOL)
        await super().handle_stream(stream, peer_id)

    async def handle_session(self, stream: Any, peer_id: str, before_each: Any = None) -> None:
        self.streams.append(CHAT_STREAM_PROTOCOL)
        await super().handle_session(stream, peer_id, before_each)


@pytest.mark.parametrize("receiver_speaks", ["both", "1.0.0 only"])
async def test_the_sender_keeps_one_stream_and_falls_back_to_one_per_message(
    tmp_path: Path, receiver_speaks: str
) -> None:
    peers: dict[str, TrustedPeer] = {}
    store = ChatStore(tmp_path / "chat.db")
    shown: list[Incoming] = []
    chat = ProfileChatHost(lambda: peers, lambda: ChatConfig(), store, shown.append)
    server = CountingServer(chat, Limits())
    with trio.fail_after(60):
        async with running_host() as bob, running_host() as alice:
            peers["bob"] = TrustedPeer(peer_id=bob.peer_id, chat="show")
            if receiver_speaks == "both":
                serve_chat(alice, server, Limits)
            else:
                alice.set_stream_handler(CHAT_PROTOCOL, server.handle_stream, require_trust=False)
            target = f"{alice.addrs[0]}/p2p/{alice.peer_id}"
            streams = ChatStreams()
            statuses = []
            for n in range(3):
                message = new_message(f"hello {n}", role="agent")
                ack = await send_chat(
                    bob, target, message, max_message_bytes=65536, timeout_s=20, streams=streams
                )
                statuses.append(ack.status)
            if receiver_speaks == "both":
                # the kept stream's connection drops: the next message takes a new one
                await bob.disconnect(alice.peer_id)
                ack = await send_chat(
                    bob,
                    target,
                    new_message("after", role="agent"),
                    max_message_bytes=65536,
                    timeout_s=20,
                    streams=streams,
                )
                statuses.append(ack.status)
    expected = {"both": [CHAT_STREAM_PROTOCOL] * 2, "1.0.0 only": [CHAT_PROTOCOL] * 3}
    assert server.streams == expected[receiver_speaks]
    assert set(statuses) == {"accepted"}
    assert [i.message.parts[0].text for i in shown][:3] == ["hello 0", "hello 1", "hello 2"]  # type: ignore[union-attr]
    assert store.inbox_count(bob.peer_id) == len(statuses)
    store.close()
