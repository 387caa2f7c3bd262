"""The REPL's visible state and input through a real pseudo-terminal (GBR-TERM-01).

Status line (waiting for the model with elapsed seconds, streaming, each
running tool with its elapsed time replaced by its ok/error line, waiting
for approval, idle), markdown rendered in a terminal and plain elsewhere,
multi-line input, history across sessions, Tab completion, queued messages
drawn as `› message` when they run, the usage line and `/usage`.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from tests.e2e.conftest import node_env, spawn_node, write_profile
from tests.e2e.terminal import Terminal
from tests.support.replies import Answer, Delay, SseReply, text_reply, tool_call_reply
from tests.support.said import said

CHUNK = {"object": "chat.completion.chunk"}
SLEEPS = '[tools.run_command]\nallow = ["sleep"]\n'
MARKDOWN = "# Plan\n\nHere is **bold** text.\n\n- apples\n- pears\n\n```python\nx = 1\n```\n"


def chunk(delta, finish=None):
    return {**CHUNK, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def start(project, *args, color=False, rows=30, cols=100, env=None) -> Terminal:
    environment = {"TERM": "xterm-256color", **(env or {})}
    child = spawn_node(project, "run", *args, env=environment, dimensions=(rows, cols), color=color)
    term = Terminal(child, rows=rows, cols=cols)
    term.expect("/help for commands")
    return term


def on_screen(term: Terminal, pattern: str, timeout_s: float = 20.0) -> re.Match:
    """Wait until `pattern` is on the visible screen (the live part is redrawn there)."""
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout_s
    while not (match := regex.search(term.text())):
        if time.monotonic() > deadline:
            raise AssertionError(f"{pattern!r} not on screen:\n{term.text()}")
        term.pump(0.02)
    return match


def test_the_status_counts_the_wait_for_the_first_token_then_streams_then_is_idle(
    project, model_server
):
    slow_start = SseReply(
        [chunk({"role": "assistant", "content": ""}), Delay(5.0)]
        + [item for n in range(20) for item in (chunk({"content": f"w{n} "}), Delay(0.1))]
        + [chunk({}, "stop")]
    )
    model_server.enqueue(slow_start)
    term = start(project)
    try:
        on_screen(term, r"idle · /help · Ctrl-D leaves\n›")  # the status, over the input line
        term.sendline("hello")
        # the elapsed seconds count up while no token came (whichever second a
        # loaded machine draws first, a later one follows)
        first = on_screen(term, r"waiting for the model · ([1-3]) s · Ctrl-C stops").group(1)
        on_screen(term, rf"waiting for the model · [{int(first) + 1}-9] s · Ctrl-C stops")
        on_screen(term, r"streaming · Ctrl-C stops")
        term.expect(r"w19\n\(\d+\.\d s\)")  # this server reports no token usage
        on_screen(term, r"idle · /help")
        assert "waiting for the model" not in term.transcript().split("\n")[-1]
    finally:
        term.child.terminate(force=True)


def test_running_tools_show_live_elapsed_time_then_their_outcome_in_the_models_order(
    project, model_server
):
    write_profile(project, model_server.base_url, extra=SLEEPS)
    calls = [
        {"name": "run_command", "arguments": {"argv": ["sleep", "3"]}, "id": "slow"},
        {"name": "run_command", "arguments": {"argv": ["sleep", "0.5"]}, "id": "fast"},
    ]
    model_server.enqueue(Answer(tool_calls=calls), text_reply("both done"))
    term = start(project)
    try:
        term.sendline("sleep twice")
        slow = r"running run_command argv=\[\"sleep\", \"3\"\] · "
        first = on_screen(term, slow + r"(\d\.\d) s").group(1)
        assert float(first) < 2.0  # shown from its start, not at its end
        on_screen(term, slow + rf"(?!{re.escape(first)} )\d\.\d s")  # and counting
        # the fast one ended first: its line stands in its row, under the slow one
        on_screen(term, slow + r".*\n✓ run_command")
        term.expect(r"both done\n\(\d+ tokens in · \d+ out · [\d.]+ s · 2 tool calls\)")
        text = term.transcript()
        assert "running run_command" not in text  # replaced, never left in the scrollback
        slow_end = text.index('✓ run_command argv=["sleep", "3"]')
        fast_end = text.index('✓ run_command argv=["sleep", "0.5"]')
        assert slow_end < fast_end < text.index("both done")
    finally:
        term.child.terminate(force=True)


def asked_for_approval(project, model_server, then: str) -> Terminal:
    """`run` whose model asked to write the protected pyproject.toml (approval #1)
    and answers `then` once told the outcome."""
    (project / "pyproject.toml").write_text("[project]\n")
    model_server.enqueue(
        tool_call_reply("write_file", {"path": "pyproject.toml", "content": "x = 1\n"}),
        text_reply("asked"),
        text_reply(then),
    )
    term = start(project)
    term.sendline("write it")
    term.expect("asked")
    return term


def test_a_pending_approval_is_the_status_until_decided_and_its_id_completes(project, model_server):
    term = asked_for_approval(project, model_server, "thanks")
    try:
        on_screen(term, r"● waiting for approval #1 · /approve 1 · /reject 1 · /edit 1")
        term.child.send("/appro\t")
        on_screen(term, r"tab: /approvals  /approve")
        term.child.send("e\t\t")
        on_screen(term, r"› /approve 1$")
        term.child.send("\r")
        term.expect("thanks")
        on_screen(term, r"idle · /help")
        assert (project / "pyproject.toml").read_text() == "x = 1\n"
    finally:
        term.child.terminate(force=True)


def test_a_rejection_from_another_terminal_shows_its_reason(project, model_server):
    term = asked_for_approval(project, model_server, "ok, not done")
    try:
        rejected = subprocess.run(
            [sys.executable, "-m", "gbr_node", "approvals", "reject", "1", "--reason", "not now"],
            cwd=project,
            env=node_env(project.parent / "home"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert rejected.returncode == 0, rejected.stdout + rejected.stderr
        term.expect("approval #1 rejected: not now")
        term.expect("ok, not done")
    finally:
        term.child.terminate(force=True)


def markdown_turn(project, model_server, **terminal) -> str:
    """The transcript after one turn whose answer is MARKDOWN."""
    model_server.enqueue(text_reply(MARKDOWN, pieces=12, delay_s=0.02))
    term = start(project, **terminal)
    try:
        term.sendline("plan")
        term.expect(r"\(\d+ tokens in")
        return term.transcript()
    finally:
        term.child.terminate(force=True)


def test_markdown_is_rendered_in_a_colour_terminal(project, model_server):
    text = markdown_turn(project, model_server, color=True)
    assert re.search(r"^ +Plan$", text, re.M)  # a heading, centred
    assert "Here is bold text." in text and "**" not in text
    assert re.search(r"^ • apples\n • pears$", text, re.M)
    assert "```" not in text and re.search(r"^ *x = 1$", text, re.M)


@pytest.mark.parametrize("terminal", [{"color": False}, {"color": True, "env": {"TERM": "dumb"}}])
def test_markdown_stays_as_written_without_colour_and_on_a_dumb_terminal(
    project, model_server, terminal
):
    assert MARKDOWN.strip() in markdown_turn(project, model_server, **terminal)


def test_markdown_stays_as_written_in_a_pipe(project, model_server):
    model_server.enqueue(text_reply(MARKDOWN, pieces=12))
    env = node_env(project.parent / "home")
    env.pop("NO_COLOR")
    piped = subprocess.run(
        [sys.executable, "-m", "gbr_node", "run"],
        cwd=project,
        env=env,
        input="plan\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"› plan\n{MARKDOWN}(" in piped.stdout, piped.stdout
    assert "\x1b" not in piped.stdout


def test_alt_enter_and_a_bracketed_paste_make_one_message_of_several_lines(project, model_server):
    model_server.enqueue(text_reply("answer-one"), text_reply("answer-two"))
    term = start(project)
    try:
        term.child.send("line one\x1b\rline two")
        on_screen(term, r"› line one\n  line two")
        term.child.send("\r")
        term.expect("answer-one")
        term.child.send("\x1b[200~pasted a\npasted b\npasted c\x1b[201~")
        on_screen(term, r"› pasted a\n  pasted b\n  pasted c")
        term.child.send("\r")
        term.expect("answer-two")
        first, second = model_server.chat_bodies
        assert said(first["messages"][-1]["content"]) == "line one\nline two"
        assert said(second["messages"][-1]["content"]) == "pasted a\npasted b\npasted c"
    finally:
        term.child.terminate(force=True)


def test_the_input_history_is_kept_across_sessions(project, model_server):
    model_server.enqueue(text_reply("noted"))
    term = start(project)
    try:
        term.sendline("remember this line")
        term.expect("noted")
        term.sendline("/quit")
        term.child.wait()
    finally:
        term.child.terminate(force=True)
    history = project.parent / "home" / ".local" / "state" / "gbr-node" / "history"
    assert "remember this line" in history.read_text()
    again = start(project)
    try:
        # The history is read at the input's first draw: Up works once it is drawn.
        on_screen(again, r"idle · /help · Ctrl-D leaves\n›")
        again.child.send("\x1b[A")  # Up: the newest line
        on_screen(again, r"› /quit$")
        again.child.send("\x1b[A")  # Up: the one before
        on_screen(again, r"› remember this line$")
    finally:
        again.child.terminate(force=True)


def test_tab_completes_commands_and_peer_aliases(project, model_server):
    peer = '[peers.bobby]\npeer_id = "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"\n'
    write_profile(project, model_server.base_url, extra=peer)
    term = start(project)
    try:
        term.child.send("/us\t.")
        on_screen(term, r"› /usage \.")  # completed, and a space after it
        term.child.send("\x15/dial b\t.")  # Ctrl-U clears the line first
        on_screen(term, r"› /dial bobby \.")
    finally:
        term.child.terminate(force=True)


def test_a_message_typed_while_busy_is_queued_and_drawn_as_its_own_prompt(project, model_server):
    model_server.enqueue(
        text_reply("first answer " * 60, pieces=60, delay_s=0.05), text_reply("second answer")
    )
    term = start(project)
    try:
        term.sendline("first question")
        on_screen(term, r"first answer")
        term.sendline("second question")
        on_screen(term, r"queued \(1\): second question")
        term.expect(r"› second question\nsecond answer")
        text = term.transcript()
        assert text.index("first answer") < text.index("› second question")
        assert "queued (1)" not in term.text()
    finally:
        term.child.terminate(force=True)


def test_each_turn_ends_with_its_usage_and_usage_prices_the_session(project, model_server):
    prices = "[model]\ninput_price_per_mtok = 1000\noutput_price_per_mtok = 2000\n"
    profile = write_profile(project, model_server.base_url)
    profile.write_text(profile.read_text().replace("[model]\n", prices))
    model_server.enqueue(text_reply("hi"), text_reply("again"))
    term = start(project)
    try:
        term.sendline("one")
        term.expect_new(r"hi\n\(10 tokens in · 5 out · \d+\.\d s\)")
        term.sendline("two")
        term.expect_new(r"again\n\(10 tokens in · 5 out")
        term.sendline("/usage")
        term.expect_new(r"this session: 2 turns, 2 model requests, 0 tool calls")
        term.expect_new(r"20 tokens in · 10 out")
        term.expect_new(r"cost: \$0\.0400 \(test-model at \$1000 in / 2000 out per million")
    finally:
        term.child.terminate(force=True)
