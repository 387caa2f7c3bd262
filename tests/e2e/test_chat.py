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
