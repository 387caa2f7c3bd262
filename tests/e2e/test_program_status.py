"""`gbr-node run` reports its program status to the terminal as OSC 7501: working when a
turn starts, blocked (permission) while an approval waits, done when the turn ends
(issue 34, `repl.status`); nothing with GBR_PROGRAM_STATUS=0."""

from __future__ import annotations

import re
import time

from tests.e2e.terminal import Terminal
from tests.support.replies import text_reply, tool_call_reply

OLD = '[project]\nname = "demo"\n'
NEW = '[project]\nname = "demo"\nversion = "2.0"\n'
REPORT = re.compile(r"\x1b\]7501;state=(\w+)(?::kind=(\w+))?[^\x1b\x07]*\x1b\\")


def states(term: Terminal) -> list[str]:
    """Every OSC 7501 report the node wrote so far, as `state` or `state/kind`."""
    term.pump(0.2)
    return [s + (f"/{k}" if k else "") for s, k in REPORT.findall("".join(term.raw))]


def wait_for_states(term: Terminal, want: list[str], timeout_s: float = 20.0) -> list[str]:
    """Wait until the reports so far end with `want`, not counting a `done` that another
    report followed (the approval's notice and the turn's end race, and a decided
    approval leaves nothing running until the agent takes it); returns every report."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = states(term)
        lasting = [s for i, s in enumerate(got) if s != "done" or i == len(got) - 1]
        if lasting[-len(want) :] == want:
            return got
        assert time.monotonic() < deadline, f"reported {got}, want them to end with {want}"


def test_a_turn_reports_working_then_done(model_server, run_node):
    model_server.enqueue(text_reply("Hello there."))
    term = run_node()
    assert states(term) == []  # nothing said before the first turn
    term.sendline("hi")
    term.expect_new("Hello there.")
    wait_for_states(term, ["working", "done"])


def test_an_approval_waiting_reports_blocked_until_decided(project, model_server, run_node):
    (project / "pyproject.toml").write_text(OLD)
    model_server.enqueue(
        tool_call_reply("write_file", {"path": "pyproject.toml", "content": NEW}),
        text_reply("I asked for approval."),
        text_reply("Noted the outcome."),
    )
    term = run_node()
    term.sendline("bump the version")
    term.expect_new("I asked for approval.")
    assert wait_for_states(term, ["working", "blocked/permission"])[0] == "working"
    term.sendline("/approve 1")
    term.expect_new("Noted the outcome.")
    # decided: the agent takes the outcome (working) and ends its turn (done)
    got = wait_for_states(term, ["blocked/permission", "working", "done"])
    assert got[-1] == "done" and got.count("blocked/permission") == 1


def test_gbr_program_status_0_writes_no_report(model_server, run_node):
    model_server.enqueue(text_reply("Quiet."))
    term = run_node(env={"GBR_PROGRAM_STATUS": "0"})
    term.sendline("hi")
    term.expect_new("Quiet.")
    term.pump(0.3)
    assert "\x1b]7501" not in "".join(term.raw)
