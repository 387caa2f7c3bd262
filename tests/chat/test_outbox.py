"""The outbox's delivery on a real store, with a scripted `deliver` and trio's mock clock:
backoff, the receiver's refusals, TTL, order per peer, a restart."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

from gbr_node.chat.messages import Ack, ChatMessage, new_message
from gbr_node.chat.outbox import Change, Outbox
from gbr_node.chat.server import refused
from gbr_node.chat.store import ChatStore
from gbr_node.errors import PeerUnreachable
from gbr_node.rpc import codes
from gbr_node.rpc.codes import UnauthorizedPeer

PEER = "12D3KooWPeer"


class Receiver:
    """`deliver` that answers from a script: an exception to raise, or "ack"."""

    def __init__(self, *script: object) -> None:
        self.script = list(script)
        self.sent: list[tuple[float, str]] = []

    async def __call__(self, peer_id: str, message: ChatMessage) -> Ack:
        self.sent.append((trio.current_time(), message.text))
        outcome = self.script.pop(0) if self.script else "ack"
        if isinstance(outcome, Exception):
            raise outcome
        return Ack(message_id=message.message_id, status="accepted")


async def run_until(outbox: Outbox, done: Callable[[], bool], timeout_s: float = 600) -> None:
    with trio.fail_after(timeout_s):
        async with trio.open_nursery() as nursery:
            await nursery.start(outbox.run)
            while not done():
                await trio.sleep(0.1)
            nursery.cancel_scope.cancel()


def make(tmp_path, receiver: Receiver) -> tuple[Outbox, list[Change]]:
    changes: list[Change] = []
    store = ChatStore(tmp_path / "chat.db")
    return Outbox(store, receiver, changes.append, clock=trio.current_time), changes


def states(changes: list[Change]) -> list[str]:
    return [str(c.state) for c in changes]


async def test_an_unreachable_peer_is_retried_with_backoff_until_delivered(
    tmp_path, autojump_clock
) -> None:
    receiver = Receiver(PeerUnreachable("refused"), PeerUnreachable("refused"), "ack")
    outbox, changes = make(tmp_path, receiver)
    outbox.send(PEER, "bob", new_message("hi", role="user"), ttl_s=3600)
    await run_until(outbox, lambda: "delivered" in states(changes))
    times = [t for t, _ in receiver.sent]
    assert len(times) == 3
    assert times[1] - times[0] == pytest.approx(1, abs=0.2)
    assert times[2] - times[1] == pytest.approx(2, abs=0.2)
    assert states(changes) == ["retrying", "delivered"]  # said once, not at every retry


async def test_too_fast_waits_as_long_as_the_receiver_says(tmp_path, autojump_clock) -> None:
    receiver = Receiver(refused("too_fast", "slow down", retry_after_s=12.0), "ack")
    outbox, changes = make(tmp_path, receiver)
    outbox.send(PEER, "bob", new_message("hi", role="user"), ttl_s=3600)
    await run_until(outbox, lambda: "delivered" in states(changes))
    assert receiver.sent[1][0] - receiver.sent[0][0] == pytest.approx(12, abs=0.2)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (refused("policy", "chat off"), "policy"),
        (UnauthorizedPeer(codes.UNAUTHORIZED_PEER, "who are you"), "untrusted"),
        (codes.MessageTooLarge(codes.TOO_LARGE, "too large", {"limit": 1}), "too_big"),
        (codes.InvalidParams(codes.INVALID_PARAMS, "bad"), "invalid"),
    ],
)
async def test_a_final_refusal_settles_the_message_refused(
    tmp_path, autojump_clock, error, reason
) -> None:
    receiver = Receiver(error)
    outbox, changes = make(tmp_path, receiver)
    outbox.send(PEER, "bob", new_message("hi", role="user"), ttl_s=3600)
    await run_until(outbox, lambda: bool(changes))
    assert states(changes) == ["refused"] and changes[0].reason == reason
    await trio.sleep(100)
    assert len(receiver.sent) == 1  # never tried again


async def test_a_message_past_its_ttl_expires(tmp_path, autojump_clock) -> None:
    receiver = Receiver(*[PeerUnreachable("down")] * 100)
    outbox, changes = make(tmp_path, receiver)
    outbox.send(PEER, "bob", new_message("hi", role="user"), ttl_s=120)
    await run_until(outbox, lambda: "expired" in states(changes))
    assert trio.current_time() == pytest.approx(120, abs=6)
    expired = outbox.store.outgoing(changes[-1].entry.message.message_id)
    assert expired is not None and expired.state == "expired"


async def test_one_peers_messages_go_in_order_and_wait_for_the_first(
    tmp_path, autojump_clock
) -> None:
    receiver = Receiver(PeerUnreachable("down"), "ack", "ack")
    outbox, changes = make(tmp_path, receiver)
    for text in ("one", "two"):
        outbox.send(PEER, "bob", new_message(text, role="user"), ttl_s=3600)
    await run_until(outbox, lambda: states(changes).count("delivered") == 2)
    assert [text for _, text in receiver.sent] == ["one", "one", "two"]


async def test_a_restarted_outbox_delivers_what_was_queued(tmp_path, autojump_clock) -> None:
    first, _ = make(tmp_path, Receiver())
    message = new_message("before the crash", role="user")
    first.store.enqueue(PEER, "bob", message, now=trio.current_time(), ttl_s=3600)
    first.store.close()  # the process died before any attempt
    receiver = Receiver()
    outbox, changes = make(tmp_path, receiver)
    await run_until(outbox, lambda: "delivered" in states(changes))
    assert receiver.sent[0][1] == "before the crash"


async def test_wait_settled_returns_the_delivered_row(tmp_path, autojump_clock) -> None:
    outbox, _ = make(tmp_path, Receiver())
    entry = outbox.send(PEER, "bob", new_message("hi", role="agent"), ttl_s=3600)
    async with trio.open_nursery() as nursery:
        await nursery.start(outbox.run)
        settled = await outbox.wait_settled(entry.message.message_id, 5)
        nursery.cancel_scope.cancel()
    assert settled is not None and settled.state == "delivered"
