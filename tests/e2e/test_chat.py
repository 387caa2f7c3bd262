"""Agents that talk to each other (issue 19, EVD-AI-02): two real `gbr-node run` processes in
pseudo-terminals, scripted model servers, `/gbr/chat/1.0.0` between them."""

from __future__ import annotations

import pytest

from tests.e2e.chat_helpers import ChatNode


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
