"""Agents that talk to each other (issue 19, EVD-AI-02): two real `gbr-node run` processes in
pseudo-terminals, scripted model servers, `/gbr/chat/1.0.0` between them."""

from __future__ import annotations

import pytest

from tests.e2e.chat_helpers import ChatNode
from tests.support.replies import text_reply, tool_call_reply


@pytest.fixture
def nodes(tmp_path):
    made: list[ChatNode] = []

    def make(name: str, port: int | None = None) -> ChatNode:
        node = ChatNode(tmp_path, name, port)
        made.append(node)
        return node

    yield make
    for node in made:
        node.stop()


def test_a_person_messages_a_peer_and_it_shows_on_the_peers_screen(nodes):
    alice, bob = nodes("alice"), nodes("bob")
    alice.write_profile({"bob": (bob, "show", "")})
    bob.write_profile({"alice": (alice, "show", "")})
    b = bob.start()
    a = alice.start()
    a.sendline("/msg bob hello from alice")
    a.expect_new(r"→ bob · thread \w+ · message \w+ queued: hello from alice")
    a.expect_new(r"→ bob · message \w+ delivered")
    b.expect(r"✉ message from alice \(12D3Ko…\w+\) · thread \w+")
    b.expect(r"  │ hello from alice")


def test_the_model_sends_a_message_and_the_peers_agent_answers_in_the_thread(nodes):
    """The whole path of issue 19: A's model calls send_message(bob, ...); B shows it; B's
    agent (chat = "reply") answers in a conversation of its own; A shows the answer."""
    alice, bob = nodes("alice"), nodes("bob")
    alice.write_profile({"bob": (bob, "show", "")})
    bob.write_profile({"alice": (alice, "reply", 'tools = ["read_file"]')})
    (bob.project / "status.txt").write_text("build is green\n", encoding="utf-8")
    alice.model.enqueue(
        tool_call_reply("send_message", {"peer": "bob", "text": "How is the build?"}),
        text_reply("I asked bob."),
    )
    bob.model.enqueue(
        tool_call_reply("read_file", {"path": "status.txt"}),
        text_reply("The build is green."),
    )
    b = bob.start()
    a = alice.start()
    a.sendline("ask bob how the build is")
    a.expect_new(r"✓ send_message")
    a.expect_new("I asked bob.")
    b.expect(r"✉ message from alice's agent \(12D3Ko…\w+\) · thread \w+ · our agent answers")
    b.expect(r"  │ How is the build\?")
    b.expect(r"\[reply to alice \(12D3Ko…\w+\) · thread \w+\] our agent calls read_file")
    b.expect(r"\[reply to alice .*\] ✓ read_file: status.txt.*\n.*build is green")
    b.expect(r"\[reply to alice .*\] our agent answers:\n  │ The build is green\.")
    a.expect(r"✉ message from bob's agent \(12D3Ko…\w+\) · thread \w+")
    a.expect(r"  │ The build is green\.")
    assert "Delivered to bob" in alice.model.chat_bodies[1]["messages"][-1]["content"]
    # the answer is in the same thread as the question
    a.sendline("/thread bob")
    a.expect_new(r"→ our agent \[delivered\]:\n  │ How is the build\?")
    a.expect_new(r"← bob's agent:\n  │ The build is green\.")
    # B's person-facing conversation was not touched: B's model got two requests, both
    # of the reply conversation, whose tools are bob's grant to alice and nothing more
    first = bob.model.chat_bodies[0]
    assert {t["function"]["name"] for t in first["tools"]} == {"read_file", "approval_status"}
    assert "Message from peer alice" in first["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("bob_trusts", "said"),
    [
        ("nobody", r"refused: the peer does not trust this node"),
        ("off", r"refused: refused by the peer.s policy \(chat is off for us\)"),
    ],
)
def test_an_untrusted_or_chat_off_sender_is_refused_and_nothing_reaches_b(nodes, bob_trusts, said):
    alice, bob = nodes("alice"), nodes("bob")
    alice.write_profile({"bob": (bob, "show", "")})
    bob.write_profile({} if bob_trusts == "nobody" else {"alice": (alice, "off", "")})
    b = bob.start()
    a = alice.start()
    a.sendline("/msg bob are you there?")
    a.expect_new(r"→ bob · message \w+ " + said)
    a.sendline("/thread bob")
    a.expect_new(r"→ you \[refused\]:\n  │ are you there\?")
    b.sendline("/inbox")
    b.expect_new("no messages yet")
    assert "are you there" not in b.transcript()
    assert "no messages yet" in bob.gbr("inbox").stdout


def test_a_message_to_a_node_that_is_down_is_queued_and_delivered_once_it_starts(nodes):
    alice, bob = nodes("alice"), nodes("bob")
    alice.write_profile({"bob": (bob, "show", "")})
    bob.write_profile({"alice": (alice, "show", "")})
    a = alice.start()
    a.sendline("/msg bob are you up yet?")
    a.expect_new(r"→ bob · thread \w+ · message \w+ queued: are you up yet\?")
    a.expect_new(r"→ bob · message \w+ still queued, retrying: .*connection refused")
    b = bob.start()
    b.expect(r"✉ message from alice \(12D3Ko…\w+\) · thread \w+\n  │ are you up yet\?", 60)
    a.expect_new(r"→ bob · message \w+ delivered", 60)
    b.sendline("/inbox")
    b.expect_new(r"alice\s+thread \w+  1 in, 0 out")
    assert b.transcript().count("are you up yet?") == 2  # the message, and /inbox's preview


def test_a_queued_message_survives_a_kill_9_of_its_sender(nodes):
    alice, bob = nodes("alice"), nodes("bob")
    alice.write_profile({"bob": (bob, "show", "")})
    bob.write_profile({"alice": (alice, "show", "")})
    a = alice.start()
    a.sendline("/msg bob written before the crash")
    a.expect_new(r"queued: written before the crash")
    alice.kill()
    b = bob.start()
    a = alice.start()
    b.expect(r"✉ message from alice .*\n  │ written before the crash", 60)
    a.expect(r"→ bob · message \w+ delivered", 60)
    b.sendline("/inbox")
    b.expect_new(r"alice\s+thread \w+  1 in, 0 out")


def test_an_undelivered_message_is_reported_expired(nodes):
    alice, bob = nodes("alice"), nodes("bob")
    alice.write_profile({"bob": (bob, "show", "")}, extra="[chat]\nttl_s = 3")
    a = alice.start()
    a.sendline("/msg bob nobody will read this")
    a.expect_new(r"→ bob · message \w+ expired: not delivered within 3 s", 30)
    a.sendline("/thread bob")
    a.expect_new(r"→ you \[expired\]:\n  │ nobody will read this")


def test_a_headless_node_sends_with_gbr_node_send_through_the_durable_outbox(nodes):
    """issue 34: `gbr-node send` reaches a running peer; to a peer that is down the message
    stays queued, and goes out with the sender's next attempt (here the next send)."""
    alice, bob = nodes("alice"), nodes("bob")
    alice.write_profile({"bob": (bob, "show", "")})
    bob.write_profile({"alice": (alice, "show", "")})
    key = ("--identity", str(alice.identity.path))
    queued = alice.gbr(*key, "send", "bob", "first", "while", "down")
    assert queued.returncode == 0, queued.stderr
    assert "queued: first while down" in queued.stdout and "still queued" in queued.stdout
    b = bob.start()
    sent = alice.gbr(*key, "send", "bob", "hello", "from", "a", "script")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert "delivered" in sent.stdout
    b.expect(r"  │ hello from a script")
    b.expect(r"  │ first while down")
    unknown = alice.gbr(*key, "send", "carol", "hi")
    assert unknown.returncode == 2 and "not a trusted peer" in unknown.stderr
