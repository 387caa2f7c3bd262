"""`/s` and Ctrl-C through a real pseudo-terminal against the real test model server (ADR-0010).

The model server records every request (and validates it like the real
API) and every client that left before its reply was complete; the
assertions read those records and the rendered screen.
"""

import json
import time

import pytest

from gbr_node.agent.machine import SUGGESTION_PREFIX
from gbr_node.agent.session import INTERRUPTED_MARK
from tests.e2e.conftest import TIMEOUT_S, write_profile
from tests.e2e.p2p_helpers import Identity, ServeProcess, children_running
from tests.support.replies import Delay, SseReply, text_reply
from tests.support.said import said

CHUNK = {"id": "chatcmpl-test", "object": "chat.completion.chunk"}
SLOW_S = 0.05  # seconds between chunks of a slow stream
SLOW_CHUNKS = 400  # 20 s of answer: always cut long before its end
SLEEP_ALLOWED = '[tools.run_command]\nallow = ["sleep"]\n'


def chunk(delta, finish=None):
    return {**CHUNK, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def slow_words(tag, count=SLOW_CHUNKS):
    """A stream of words `TAGw0 TAGw1 ...`, one chunk every SLOW_S seconds."""
    items = [chunk({"role": "assistant", "content": ""})]
    for n in range(count):
        items += [chunk({"content": f"{tag}w{n} "}), Delay(SLOW_S)]
    return SseReply([*items, chunk({}, "stop")])


def wait_until(term, predicate, what):
    """Pump the terminal until `predicate()` is true; AssertionError after TIMEOUT_S."""
    deadline = time.monotonic() + TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{term.text()}")
        term.pump(0.01)


def wait_disconnects(term, server, count):
    """The server's disconnect records once there are `count` (its handler notices a close
    on its own thread, possibly after the next request was answered)."""
    wait_until(term, lambda: len(server.disconnects) >= count, f"{count} disconnect(s)")
    return server.disconnects


def assert_all_valid(server):
    problems = [r.problem for r in server.requests if r.problem]
    assert problems == [], problems


def test_suggestion_cuts_a_slow_stream_and_the_next_request_carries_it(run_node, model_server):
    model_server.enqueue(slow_words("a"), text_reply("Short answer."))
    term = run_node()
    term.sendline("tell me a long story")
    term.expect_new("aw3 ")
    term.sendline("/s shorter please")
    term.expect_new(
        r"\(interrupted; suggestion sent · [\d.]+ s\)\nchanged: no files\n› /s shorter please\n"
        r"Short answer\."
    )
    (cut,) = wait_disconnects(term, model_server, 1)
    assert cut.request == 0 and cut.chunks_sent < SLOW_CHUNKS
    first, second = model_server.chat_bodies
    messages = second["messages"]
    assert messages[: len(first["messages"])] == first["messages"]
    partial, suggestion = messages[-2:]
    assert partial["role"] == "assistant" and "tool_calls" not in partial
    assert partial["content"].startswith("aw0 aw1 aw2 aw3 ")
    assert partial["content"].endswith(f"\n\n{INTERRUPTED_MARK}")
    assert suggestion == {"role": "user", "content": SUGGESTION_PREFIX + "shorter please"}
    assert INTERRUPTED_MARK in messages[0]["content"]  # the system prompt says what it means
    assert_all_valid(model_server)

    term.sendline("/history")
    term.expect_new(r"assistant \[interrupted\]: aw0 aw1 aw2 aw3 ")
    term.expect_new(r"user: \[I interrupted your previous answer\.\] shorter please")


def test_cut_in_the_middle_of_tool_call_arguments_leaves_no_trace_of_the_call(
    run_node, model_server
):
    head = {"index": 0, "id": "call_w", "type": "function"}
    items = [
        chunk({"role": "assistant", "content": "Writing the file now."}),
        chunk({"tool_calls": [{**head, "function": {"name": "write_file", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": "half.txt", '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"content": "'}}]}),
    ]
    for _ in range(SLOW_CHUNKS):
        items += [
            Delay(SLOW_S),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": "xx"}}]}),
        ]
    model_server.enqueue(SseReply([*items, chunk({}, "tool_calls")]), text_reply("Not writing."))
    term = run_node()
    term.sendline("write the file")
    term.expect_new("Writing the file now.")
    term.sendline("/s do not write anything")
    term.expect_new("Not writing.")
    (cut,) = wait_disconnects(term, model_server, 1)
    assert cut.chunks_sent >= 4  # the call's name and first argument fragments had been sent
    messages = model_server.chat_bodies[1]["messages"]
    assert messages[-2] == {
        "role": "assistant",
        "content": f"Writing the file now.\n\n{INTERRUPTED_MARK}",
    }
    wire = json.dumps(messages)
    assert "call_w" not in wire and "half.txt" not in wire and '"tool"' not in wire
    assert_all_valid(model_server)


def whole_call(call):
    """A tool-call delta carrying the whole call at once."""
    function = {"name": call["name"], "arguments": json.dumps(call["arguments"])}
    return {"index": 0, "id": call["id"], "type": "function", "function": function}


def runs_sleep(pid):
    """True while process `pid` (a node) runs a `sleep` command."""
    return bool(children_running(pid, "sleep"))


def test_late_result_of_a_running_tool_is_stale_and_not_added_to_the_new_turn(
    model_server, run_node, project
):
    write_profile(project, model_server.base_url, SLEEP_ALLOWED)
    call = {"name": "run_command", "arguments": {"argv": ["sleep", "2"]}, "id": "call_sleep"}
    model_server.enqueue(
        SseReply(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk({"tool_calls": [whole_call(call)]}),
                chunk({}, "tool_calls"),
            ]
        ),
        text_reply("Fine, skipping the wait."),
        text_reply("Next answer."),
    )
    term = run_node()
    term.sendline("wait a bit")
    wait_until(term, lambda: runs_sleep(term.child.pid), "the sleep tool to run")
    term.sendline("/s never mind")
    term.expect_new("Fine, skipping the wait.")
    term.expect_new(r"late result of an interrupted turn: run_command ok")
    term.sendline("and now?")
    term.expect_new("Next answer.")
    bodies = model_server.chat_bodies
    assert len(bodies) == 3 and not model_server.disconnects
    for body in bodies[1:]:
        answers = [m for m in body["messages"] if m["role"] == "tool"]
        assert [(m["tool_call_id"], m["content"]) for m in answers] == [
            ("call_sleep", "error: not awaited: the user interrupted the turn")
        ]
    assert bodies[1]["messages"][-1]["content"] == SUGGESTION_PREFIX + "never mind"
    assert_all_valid(model_server)
    term.sendline("/history")
    term.expect_new(r"tool \[stale\]: \$ sleep 2")


@pytest.fixture
def sleeping_peer(tmp_path):
    """A second node ("bob", `gbr-node serve`) granting run_command with `sleep` to "alice".

    Yields (alice's key file, bob's peer ID, bob's address without /p2p, bob's process).
    """
    alice, bob = Identity(tmp_path / "alice.key"), Identity(tmp_path / "bob.key")
    bob_root = tmp_path / "bob"
    bob_root.mkdir()
    grant = f'[peers.alice]\npeer_id = "{alice.peer_id}"\ntools = ["run_command"]\n'
    write_profile(bob_root, "http://127.0.0.1:9/v1", extra=SLEEP_ALLOWED + grant)
    server = ServeProcess(bob_root, tmp_path / "home", bob)
    try:
        yield alice.path, bob.peer_id, server.addr.rsplit("/p2p/", 1)[0], server.proc
    finally:
        server.kill()


def test_late_result_of_a_remote_tool_is_stale_and_not_added_to_the_new_turn(
    model_server, run_node, project, sleeping_peer
):
    alice_key, bob, addr, server = sleeping_peer
    peers = f'[peers.bob]\npeer_id = "{bob}"\naddrs = ["{addr}"]\ntools = "*"\n'
    write_profile(project, model_server.base_url, extra=peers)
    call = {"name": "bob__run_command", "arguments": {"argv": ["sleep", "2"]}, "id": "call_b"}
    model_server.enqueue(
        SseReply([chunk({"tool_calls": [whole_call(call)]}), chunk({}, "tool_calls")]),
        text_reply("Not waiting for bob."),
    )
    term = run_node("--listen", "/ip4/127.0.0.1/tcp/0", identity=alice_key)
    term.sendline("ask bob to wait")
    wait_until(term, lambda: runs_sleep(server.pid), "bob to run the sleep tool")
    term.sendline("/s never mind")
    term.expect_new("Not waiting for bob.")
    term.expect_new(r"late result of an interrupted turn: bob__run_command ok")
    bodies = model_server.chat_bodies
    assert len(bodies) == 2
    answers = [m for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in answers] == [
        ("call_b", "error: not awaited: the user interrupted the turn")
    ]
    assert_all_valid(model_server)
    term.sendline("/history")
    term.expect_new(r"tool \[stale\]: \$ sleep 2")


def test_twenty_interrupts_in_a_row_then_a_normal_answer(run_node, model_server):
    cycles = 20
    model_server.enqueue(*[slow_words(f"c{n}x") for n in range(cycles)])
    model_server.enqueue(text_reply("All done."), text_reply("Still fine."))
    term = run_node()
    term.sendline("go")
    for n in range(cycles):
        term.expect_new(f"c{n}xw1 ")
        term.sendline(f"/s again {n}")
    term.expect_new("All done.")
    term.sendline("one more")
    term.expect_new("Still fine.")
    cuts = wait_disconnects(term, model_server, cycles)
    assert sorted(d.request for d in cuts) == list(range(cycles))
    bodies = model_server.chat_bodies
    assert len(bodies) == cycles + 2
    last = bodies[-1]["messages"]
    cut = [m for m in last if m["role"] == "assistant" and INTERRUPTED_MARK in m["content"]]
    assert len(cut) == cycles
    assert last[-1]["role"] == "user" and said(last[-1]["content"]) == "one more"
    assert_all_valid(model_server)


def test_ctrl_c_stops_the_stream_and_the_agent_waits(run_node, model_server):
    model_server.enqueue(slow_words("k"), text_reply("Continuing."))
    term = run_node()
    term.sendline("talk")
    term.expect_new("kw2 ")
    term.mark()
    term.child.send("\x03")
    term.expect_new(r"\(interrupted · [\d.]+ s\)")
    wait_disconnects(term, model_server, 1)
    term.sendline("go on")
    term.expect_new("Continuing.")
    first, second = model_server.chat_bodies  # nothing was sent between the cut and "go on"
    messages = second["messages"]
    assert messages[-2]["content"].startswith("kw0 kw1 kw2 ")
    assert messages[-2]["content"].endswith(INTERRUPTED_MARK)
    assert messages[-1]["role"] == "user" and said(messages[-1]["content"]) == "go on"
    assert_all_valid(model_server)


def test_second_suggestion_cuts_the_reprompt_cleanly(run_node, model_server):
    model_server.enqueue(slow_words("p"), slow_words("q"), text_reply("Third time."))
    term = run_node()
    term.sendline("start")
    term.expect_new("pw2 ")
    term.sendline("/s first fix")
    term.expect_new("qw2 ")
    term.sendline("/s second fix")
    term.expect_new("Third time.")
    assert sorted(d.request for d in wait_disconnects(term, model_server, 2)) == [0, 1]
    tail = model_server.chat_bodies[2]["messages"][-4:]
    assert [m["role"] for m in tail] == ["assistant", "user", "assistant", "user"]
    assert tail[0]["content"].startswith("pw0 ") and tail[2]["content"].startswith("qw0 ")
    assert tail[1]["content"] == SUGGESTION_PREFIX + "first fix"
    assert tail[3]["content"] == SUGGESTION_PREFIX + "second fix"
    assert_all_valid(model_server)


@pytest.mark.parametrize("command", ["/s", "/suggestion"])
def test_suggestion_while_idle_is_sent_as_a_plain_prompt(run_node, model_server, command):
    model_server.enqueue(text_reply("Hello."))
    term = run_node()
    term.sendline(f"{command} hi there")
    term.expect_new("Hello.")
    (body,) = model_server.chat_bodies
    assert said(body["messages"][-1]["content"]) == "hi there"
    assert not model_server.disconnects
