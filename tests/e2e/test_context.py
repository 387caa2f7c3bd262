"""GBR-CTX-01 through the real REPL: no session dies of a full context window.

The test model server acts out llama.cpp with a 4,096-token window: it
reports `n_ctx` at `/props`, counts each request's tokens with its own
tokenizer (not the node's estimate) and answers 400 `context_length_exceeded`
to a request that does not fit.
"""

from __future__ import annotations

import re
import signal
import time

import pytest

from tests.e2e.conftest import spawn_node, write_profile
from tests.e2e.terminal import Terminal
from tests.support.model_server import ModelServer, context_exceeded_body
from tests.support.replies import ErrorReply, text_reply, tool_call_reply
from tests.support.said import said

pytestmark = pytest.mark.slow

WINDOW = 4096
TURNS = 40
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\r")


@pytest.fixture
def small_server():
    with ModelServer(model="test-model", context_tokens=WINDOW) as server:
        yield server


@pytest.fixture
def small_project(tmp_path, small_server):
    root = tmp_path / "project"
    root.mkdir()
    write_profile(root, small_server.base_url)
    lines = [f"line {n:04}: the quick brown fox jumps over the lazy dog again" for n in range(400)]
    (root / "big.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


class Recorder:
    """Everything a terminal printed, escape codes removed (the screen keeps 200 rows only)."""

    def __init__(self, term: Terminal) -> None:
        self.parts: list[str] = []
        feed = term._stream.feed

        def tee(data: str) -> None:
            self.parts.append(data)
            feed(data)

        term._stream.feed = tee  # type: ignore[method-assign]  # tee what the screen is fed

    def since(self, start: int) -> str:
        return ANSI.sub("", "".join(self.parts[start:]))

    def wait(self, term: Terminal, start: int, pattern: str, timeout_s: float = 20.0) -> str:
        """Pump `term` until `pattern` shows in what it printed since part `start`."""
        deadline = time.monotonic() + timeout_s
        while not re.search(pattern, self.since(start)):
            if time.monotonic() > deadline or term.eof:
                raise AssertionError(f"{pattern!r} not printed:\n{self.since(start)[-3000:]}")
            term.pump()
        return self.since(start)


def start(project, *args: str) -> Terminal:
    term = Terminal(spawn_node(project, "run", *args))
    term.expect("/help for commands")
    return term


def turn(term: Terminal, n: int, reply: str) -> None:
    term.sendline(f"turn {n:02}: read big.txt and sum it up")
    term.expect_new(re.escape(reply))


def script_turns(server: ModelServer, first: int, last: int) -> None:
    for n in range(first, last + 1):
        if n % 10 == 0:
            call = tool_call_reply("write_file", {"path": f"notes{n}.txt", "content": f"n={n}"})
        else:
            call = tool_call_reply("read_file", {"path": "big.txt"})
        server.enqueue(call, text_reply(f"answer {n:02} done"))


def test_forty_turns_with_big_tool_results_never_overflow_a_4096_token_window(
    small_project, small_server
):
    script_turns(small_server, 1, TURNS)
    term = start(small_project)
    record = Recorder(term)
    try:
        term.expect(r"context window 4096 tokens \(llama\.cpp /props of the model server\)")
        for n in range(1, TURNS + 1):
            turn(term, n, f"answer {n:02} done")
        shown = record.since(0)
        assert "error" not in shown.lower()
        assert small_server.overflows == 0
        assert re.search(r"context \d+% full: compacted \d+ old turns", shown)
        bodies = small_server.chat_bodies
        assert len(bodies) == 2 * TURNS
        last = bodies[-1]
        assert last["messages"][0]["role"] == "system"
        note = last["messages"][0]["content"]
        # What must not be forgotten: files changed, the person's first request.
        assert "notes10.txt" in note and "notes30.txt" in note
        assert "turn 01: read big.txt" in note
        assert said(last["messages"][-3]["content"]) == "turn 40: read big.txt and sum it up"
        # A big tool result is cut with a note on how to read on.
        tool = bodies[-3]["messages"][-1]
        assert tool["role"] == "tool" and "call read_file with offset=" in tool["content"]

        mark = len(record.parts)
        term.sendline("/history")
        history = record.wait(term, mark, r"assistant: answer 40 done")
        for n in range(1, TURNS + 1):
            assert f"user: turn {n:02}: read big.txt" in history, n
        term.child.kill(signal.SIGKILL)
        term.child.wait()

        again = start(small_project, "--resume")
        record = Recorder(again)
        again.expect(r"resumed the last session \(\d+ messages\)")
        small_server.enqueue(text_reply("answer 41 after resume"))
        again.sendline("turn 41: what did we do?")
        again.expect_new("answer 41 after resume")
        resumed = small_server.chat_bodies[-1]
        assert said(resumed["messages"][-1]["content"]) == "turn 41: what did we do?"
        assert len(resumed["messages"]) < 4 * TURNS  # still compacted after the restart
        mark = len(record.parts)
        again.sendline("/history")
        history = record.wait(again, mark, r"assistant: answer 41 after resume")
        assert "user: turn 01: read big.txt" in history
        assert "user: turn 41: what did we do?" in history
        assert small_server.overflows == 0
        again.child.terminate(force=True)
    finally:
        term.child.terminate(force=True)


def test_a_server_that_says_context_exceeded_anyway_gets_one_compaction_and_one_retry(
    small_project, small_server
):
    script_turns(small_server, 1, 3)
    small_server.enqueue(
        ErrorReply(400, context_exceeded_body(5000, WINDOW)), text_reply("fine after compacting")
    )
    term = start(small_project)
    try:
        for n in range(1, 4):
            turn(term, n, f"answer {n:02} done")
        term.sendline("turn 04: and now?")
        term.expect_new("fine after compacting")
        failed, retried = small_server.chat_bodies[-2:]
        assert said(retried["messages"][-1]["content"]) == "turn 04: and now?"
        assert len(retried["messages"]) < len(failed["messages"])
        assert "earlier turns" in retried["messages"][0]["content"]
        assert "error" not in term.text().lower()
        term.expect(r"context \d+% full: compacted \d+ old turns?")
    finally:
        term.child.terminate(force=True)


def test_a_second_context_error_in_a_row_is_one_clear_error_and_no_loop(
    small_project, small_server
):
    overflow = ErrorReply(400, context_exceeded_body(5000, WINDOW))
    small_server.enqueue(overflow, overflow, text_reply("next turn works"))
    term = start(small_project)
    try:
        term.sendline("hello")
        term.expect_new(r"error: the conversation does not fit the model's context window")
        term.expect_new(r"/clear")
        assert len(small_server.chat_bodies) == 2
        term.sendline("hello again")
        term.expect_new("next turn works")
    finally:
        term.child.terminate(force=True)


def test_compact_by_hand_says_what_it_did(run_node, model_server, project):
    (project / "small.txt").write_text("a small file\n", encoding="utf-8")
    for n in range(1, 4):
        model_server.enqueue(
            tool_call_reply("read_file", {"path": "small.txt"}), text_reply(f"answer {n:02} done")
        )
    term = run_node()
    for n in range(1, 4):
        turn(term, n, f"answer {n:02} done")
    term.sendline("/compact")
    term.expect_new(r"context \d+% full: compacted 2 old turns")
    model_server.enqueue(text_reply("after compact"))
    term.sendline("go on")
    term.expect_new("after compact")
    sent = model_server.chat_bodies[-1]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "assistant", "user"]
    assert "2 earlier turns" in sent[0]["content"]
    assert "turn 01: read big.txt" in sent[0]["content"]


def test_the_same_failing_call_three_times_stops_the_turn(run_node, model_server):
    missing = tool_call_reply("read_file", {"path": "missing.txt"})
    model_server.enqueue(missing, missing, missing, text_reply("next turn"))
    term = run_node()
    term.sendline("read missing.txt")
    term.expect_new(r"stopped: read_file failed 3 times with the same arguments and error")
    assert len(model_server.chat_bodies) == 3
    term.sendline("what happened?")
    term.expect_new("next turn")
    sent = model_server.chat_bodies[-1]["messages"]
    assert "[stopped: this same call failed 3 times" in sent[-2]["content"]
    assert said(sent[-1]["content"]) == "what happened?"
