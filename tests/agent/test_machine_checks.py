"""The write-check part of the agent's state machine (UNW-AI-01 / STD-DEV-01), message by
message: baseline before the writes, CHECKING after them, retries per turn, stale results."""

import json

from gbr_node.agent.machine import (
    AgentMachine,
    CancelCheck,
    RunCheck,
    RunTool,
    Show,
    StartInference,
    State,
    TakeBaseline,
)
from gbr_node.agent.messages import (
    CheckDone,
    Interrupt,
    OracleDone,
    ToolExecutionFeedback,
    UserPrompt,
)
from gbr_node.agent.session import Session
from gbr_node.checks.diagnostics import Diagnostic
from gbr_node.checks.plan import CheckSpec, CheckTarget
from gbr_node.checks.verdict import Verdict
from gbr_node.llm.events import ToolCall
from tests.support.chat_rules import chat_request_problem

SPEC = CheckSpec("ruff", ("**/*.py",), per_file=True, max_retries=2)
ERROR = Diagnostic("app.py:1:8: invalid-syntax: Expected `)`", "k", "app.py", 1)


def make(specs=(SPEC,)):
    return AgentMachine(Session("be brief"), lambda: [], checks=lambda: specs)


def only(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def write(call_id, path="app.py"):
    args = {"path": path, "content": "x"}
    return ToolCall(call_id, "write_file", args, json.dumps(args))


def written(pid, call_id):
    result = {"content": [{"type": "text", "text": "created"}], "isError": False}
    return ToolExecutionFeedback(pid, call_id, "write_file", result=result)


def answer_with_write(m, pid, call_id):
    return m.handle(OracleDone(pid, "", (write(call_id),), "tool_calls"))


def start(m, text="write app.py"):
    return only(m.handle(UserPrompt(text)), StartInference)[0].prompt.prompt_id


def test_the_baseline_comes_before_the_writes_and_once_per_turn():
    m = make()
    pid = start(m)
    actions = answer_with_write(m, pid, "c1")
    assert isinstance(actions[0], TakeBaseline)
    assert actions[0].targets == (CheckTarget("ruff", "app.py"),)
    assert only(actions, RunTool)
    (check,) = only(m.handle(written(pid, "c1")), RunCheck)
    assert m.state is State.CHECKING and check.targets == (CheckTarget("ruff", "app.py"),)
    pid2 = only(m.handle(CheckDone(pid, (Verdict("ruff", (ERROR,)),))), StartInference)[0]
    again = answer_with_write(m, pid2.prompt.prompt_id, "c2")
    assert not only(again, TakeBaseline)  # same turn, same file: the first baseline counts


def test_new_errors_go_to_the_model_on_the_tool_result_and_it_is_asked_again():
    m = make()
    pid = start(m)
    answer_with_write(m, pid, "c1")
    m.handle(written(pid, "c1"))
    actions = m.handle(CheckDone(pid, (Verdict("ruff", (ERROR,)),)))
    assert Show("check", "check ruff: 1 new error -> retry 1/2") in actions
    (again,) = only(actions, StartInference)
    tool = [x for x in again.prompt.messages if x["role"] == "tool"][-1]
    assert tool["content"].startswith("created\n[check ruff: 1 new error after this change")
    assert ERROR.text in tool["content"]
    assert chat_request_problem({"model": "m", "messages": list(again.prompt.messages)}) is None


def test_the_turn_stops_after_max_retries_and_says_so():
    m = make()
    pid = start(m)
    for n in range(3):
        answer_with_write(m, pid, f"c{n}")
        m.handle(written(pid, f"c{n}"))
        actions = m.handle(CheckDone(pid, (Verdict("ruff", (ERROR,)),)))
        started = only(actions, StartInference)
        if n < 2:
            pid = started[0].prompt.prompt_id
    assert not started and m.state is State.IDLE
    closing = (
        "check ruff still failing: 1 error in app.py — /check shows it, /undo takes the turn back"
    )
    assert Show("check", closing) in actions
    assert "still fails after 2 retries" in m.session.request_messages()[-1]["content"]


def test_a_new_turn_gets_its_retries_back():
    m = make()
    for _ in range(2):
        pid = start(m)
        answer_with_write(m, pid, "c")
        m.handle(written(pid, "c"))
        actions = m.handle(CheckDone(pid, (Verdict("ruff", (ERROR,)),)))
        assert Show("check", "check ruff: 1 new error -> retry 1/2") in actions
        m.handle(Interrupt())


def test_ok_after_a_retry_and_old_errors_are_said_on_the_status_line():
    m = make()
    pid = start(m)
    answer_with_write(m, pid, "c1")
    m.handle(written(pid, "c1"))
    pid = only(m.handle(CheckDone(pid, (Verdict("ruff", (ERROR,)),))), StartInference)[0]
    pid = pid.prompt.prompt_id
    answer_with_write(m, pid, "c2")
    m.handle(written(pid, "c2"))
    actions = m.handle(CheckDone(pid, (Verdict("ruff", before=1),)))
    line = "check ruff ok (after 1 retry; 1 error was there before this turn)"
    assert Show("check", line) in actions


def test_a_failed_write_or_an_uncovered_file_runs_no_check():
    m = make()
    pid = start(m)
    answer_with_write(m, pid, "c1")
    failed = ToolExecutionFeedback(pid, "c1", "write_file", error="disk full")
    assert not only(m.handle(failed), RunCheck)
    m2 = make()
    pid = start(m2)
    actions = m2.handle(OracleDone(pid, "", (write("c1", "notes.txt"),), "tool_calls"))
    assert not only(actions, TakeBaseline)
    assert not only(m2.handle(written(pid, "c1")), RunCheck)


def test_interrupt_during_a_check_cancels_it_and_keeps_a_valid_history():
    m = make()
    pid = start(m)
    answer_with_write(m, pid, "c1")
    m.handle(written(pid, "c1"))
    actions = m.handle(Interrupt())
    assert CancelCheck(pid) in actions and m.state is State.IDLE
    assert m.session.request_messages()[-1]["role"] == "tool"
    late = m.handle(CheckDone(pid, (Verdict("ruff", (ERROR,)),)))
    assert [a.kind for a in late] == ["stale"]  # a result for an older prompt
    body = {"model": "m", "messages": m.session.request_messages()}
    assert chat_request_problem(body) is None


def test_a_prompt_during_a_check_is_queued():
    m = make()
    pid = start(m)
    answer_with_write(m, pid, "c1")
    m.handle(written(pid, "c1"))
    assert [a.kind for a in m.handle(UserPrompt("and then?"))] == ["queued"]
    assert m.state is State.CHECKING


def broken_write(pid, call_id, path="app.py", kind="python"):
    """A write_file result that left `path` unparsable (tools.files, checks.builtin)."""
    parse = {"status": "broken", "kind": kind, "path": path, "error": "line 1: invalid syntax"}
    result = {
        "content": [{"type": "text", "text": f"{path} no longer parses: line 1: invalid syntax"}],
        "isError": True,
        "structuredContent": {"parse": parse},
    }
    return ToolExecutionFeedback(pid, call_id, "write_file", result=result)


def test_a_write_that_breaks_a_file_is_retried_silently_then_the_turn_closes_with_one_line():
    """GBR-TRUTH-01: the built-in parse check counts like a check set: one status line per
    retry, the same call repeated is not a runaway, and the cap ends the turn with the
    closing line naming the file and /undo."""
    m = make(specs=())
    pid = start(m)
    lines = []
    for n in range(4):
        m.handle(OracleDone(pid, "", (write("c"),), "tool_calls"))
        actions = m.handle(broken_write(pid, "c"))
        lines += [a.text for a in actions if isinstance(a, Show) and a.kind == "check"]
        started = only(actions, StartInference)
        if n < 3:
            (first,) = started
            pid = first.prompt.prompt_id
    assert not started and m.state is State.IDLE
    assert lines == [
        "check python: app.py does not parse -> retry 1/3",
        "check python: app.py does not parse -> retry 2/3",
        "check python: app.py does not parse -> retry 3/3",
        "check python still failing: 1 error in app.py — /undo takes the turn back",
    ]
    last = m.session.request_messages()[-1]["content"]
    assert last.startswith("error: app.py no longer parses") and "still does not parse" in last


def test_a_broken_write_still_counts_as_a_change_for_the_configured_checks():
    """GBR-TRUTH-01: the file was written, so `[checks.NAME]` add to the built-in check."""
    m = make()
    pid = start(m)
    answer_with_write(m, pid, "c1")
    actions = m.handle(broken_write(pid, "c1"))
    assert Show("check", "check python: app.py does not parse -> retry 1/3") in actions
    (check,) = only(actions, RunCheck)
    assert check.targets == (CheckTarget("ruff", "app.py"),)
