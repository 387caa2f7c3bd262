"""The durable chat store on a real SQLite file: dedup, inbox size, outbox states, threads."""

from __future__ import annotations

from gbr_node.chat.messages import new_message
from gbr_node.chat.store import ChatStore

A, B = "12D3KooWPeerA", "12D3KooWPeerB"


def test_a_second_copy_is_a_duplicate_and_kept_once(tmp_path) -> None:
    store = ChatStore(tmp_path / "chat.db")
    msg = new_message("hi", role="agent")
    assert store.receive(A, "a", msg, now=1, max_per_peer=10) == "accepted"
    assert store.receive(A, "a", msg, now=2, max_per_peer=10) == "duplicate"
    assert store.receive(B, "b", msg, now=3, max_per_peer=10) == "accepted"  # dedup per sender
    assert store.inbox_count(A) == 1 and store.inbox_count() == 2


def test_a_full_inbox_refuses_new_messages_but_still_knows_old_ones(tmp_path) -> None:
    store = ChatStore(tmp_path / "chat.db")
    first = new_message("1", role="agent")
    assert store.receive(A, "a", first, now=1, max_per_peer=1) == "accepted"
    assert store.receive(A, "a", new_message("2", role="agent"), now=2, max_per_peer=1) == (
        "inbox_full"
    )
    assert store.receive(A, "a", first, now=3, max_per_peer=1) == "duplicate"
    assert store.clear_inbox(A) == 1
    assert store.receive(A, "a", new_message("2", role="agent"), now=4, max_per_peer=1) == (
        "accepted"
    )


def test_a_queued_message_is_settled_once_and_survives_reopening(tmp_path) -> None:
    path = tmp_path / "chat.db"
    store = ChatStore(path)
    msg = new_message("hi", role="user")
    store.enqueue(A, "a", msg, now=10, ttl_s=60)
    store.retry_later(msg.message_id, at=20, error="connection refused")
    store.close()
    again = ChatStore(path)  # a restart (or a kill -9 after the commit)
    (queued,) = again.queued()
    assert (queued.state, queued.attempts, queued.next_attempt_at) == ("queued", 1, 20)
    assert queued.expires_at == 70 and queued.message == msg
    assert again.settle(msg.message_id, "delivered", now=30)
    assert not again.settle(msg.message_id, "expired", now=80)  # settled stays settled
    delivered = again.outgoing(msg.message_id)
    assert delivered is not None and delivered.state == "delivered"
    assert again.queued() == []


def test_a_thread_holds_both_ways_in_order(tmp_path) -> None:
    store = ChatStore(tmp_path / "chat.db")
    question = new_message("q", role="user", context_id="t1")
    store.enqueue(A, "a", question, now=1, ttl_s=60)
    answer = new_message("a", role="agent", context_id="t1", in_reply_to=question.message_id)
    store.receive(A, "a", answer, now=2, max_per_peer=10)
    store.receive(
        A, "a", new_message("other", role="agent", context_id="t2"), now=3, max_per_peer=9
    )
    items = store.thread(A, "t1")
    assert [(i.incoming, i.message.text, i.state) for i in items] == [
        (False, "q", "queued"),
        (True, "a", None),
    ]
    assert store.latest_context(A) == "t2"
    assert [(t.context_id, t.received, t.sent) for t in store.threads()] == [
        ("t1", 1, 1),
        ("t2", 1, 0),
    ]


def test_reply_counts_persist_and_reset(tmp_path) -> None:
    store = ChatStore(tmp_path / "chat.db")
    assert [store.count_reply(A, "t") for _ in range(3)] == [1, 2, 3]
    assert ChatStore(tmp_path / "chat.db").replies(A, "t") == 3
    store.reset_replies(A, "t")
    assert store.replies(A, "t") == 0
