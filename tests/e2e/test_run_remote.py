"""`gbr-node run` calling a tool on a second node: a separate `gbr-node serve` process."""

import pytest

from tests.e2e.conftest import write_profile
from tests.e2e.p2p_helpers import Identity, ServeProcess
from tests.support.replies import text_reply, tool_call_reply


@pytest.fixture
def served_peer(tmp_path, project):
    """A second node ("bob") serving read_file to the REPL node's identity ("alice").

    Yields (alice's key file, bob's peer ID, bob's full multiaddr, bob's root).
    """
    alice, bob = Identity(tmp_path / "alice.key"), Identity(tmp_path / "bob.key")
    bob_root = tmp_path / "bob"
    bob_root.mkdir()
    (bob_root / "remote.txt").write_text("the answer is on bob\n", encoding="utf-8")
    grant = f'[peers.alice]\npeer_id = "{alice.peer_id}"\ntools = ["read_file"]\n'
    write_profile(bob_root, "http://127.0.0.1:9/v1", extra=grant)
    server = ServeProcess(bob_root, tmp_path / "home", bob)
    try:
        yield alice.path, bob.peer_id, server.addr, bob_root
    finally:
        server.kill()


def test_a_turn_calls_a_tool_on_a_second_node(project, model_server, served_peer, run_node):
    alice_key, bob, addr, _ = served_peer
    write_profile(
        project,
        model_server.base_url,
        extra=f'[peers.bob]\npeer_id = "{bob}"\naddrs = ["{addr.rsplit("/p2p/", 1)[0]}"]\n'
        'tools = "*"\n',
    )
    model_server.enqueue(
        tool_call_reply("bob__read_file", {"path": "remote.txt"}),
        text_reply("Bob says the answer is there."),
    )
    term = run_node("--listen", "/ip4/127.0.0.1/tcp/0", identity=alice_key)
    term.sendline("/dial bob")
    term.expect_new("connected to bob")
    term.sendline("what does bob have?")
    term.expect_new(r"✓ bob__read_file @bob path=remote.txt \d+ ms")
    term.expect_new("Bob says the answer is there.")
    first, second = model_server.chat_bodies
    offered = {t["function"]["name"] for t in first["tools"]}
    assert {"bob__read_file", "list_peers", "dial_peer"} <= offered
    tool_msg = second["messages"][-1]
    assert tool_msg["role"] == "tool" and "the answer is on bob" in tool_msg["content"]


def test_an_unreachable_peer_is_an_error_result_not_a_hang(project, model_server, run_node):
    write_profile(
        project,
        model_server.base_url,
        extra='[peers.ghost]\npeer_id = "12D3KooWBwWFwNgcJhE2qEsL3ewZHApd6s68SSUBGAiVwXHre1E7"\n'
        'addrs = ["/ip4/127.0.0.1/tcp/1"]\ntools = "*"\n',
    )
    model_server.enqueue(
        tool_call_reply("ghost__read_file", {"path": "x"}), text_reply("The peer is down.")
    )
    term = run_node("--listen", "/ip4/127.0.0.1/tcp/0")
    term.sendline("ask the ghost")
    term.expect_new(r"✗ ghost__read_file @ghost .*connection refused")
    term.expect_new("The peer is down.")
    assert "connection refused" in model_server.chat_bodies[1]["messages"][-1]["content"]
