"""OSC 7501 program status, pure: the sequence and when the view reports it (issue 34)."""

from __future__ import annotations

import base64

import pytest

from gbr_node.agent.machine import Show
from gbr_node.repl.status import report
from gbr_node.repl.view import View


def test_a_report_is_osc_7501_with_colon_joined_pairs_and_st():
    assert report("working") == "\x1b]7501;state=working:app=gbr-node\x1b\\"
    assert report("clear") == "\x1b]7501;state=clear\x1b\\"


def test_blocked_carries_its_kind_and_a_one_line_base64_message():
    sequence = report("blocked", kind="permission", msg="approval #2\x1b[31m waits")
    body = sequence.removeprefix("\x1b]7501;").removesuffix("\x1b\\")
    pairs = dict(pair.split("=", 1) for pair in body.split(":"))
    assert pairs["state"] == "blocked" and pairs["kind"] == "permission"
    assert base64.b64decode(pairs["msg"]).decode() == "approval #2 [31m waits"


def test_a_long_message_is_cut_to_2048_bytes_on_a_character_boundary():
    body = report("done", msg="é" * 2000).removesuffix("\x1b\\")
    msg = base64.b64decode(body.split("msg=", 1)[1])
    assert len(msg) == 2048 and msg.decode() == "é" * 1024


@pytest.mark.parametrize("state, kind", [("busy", None), ("done", "permission")])
def test_a_report_refuses_what_the_protocol_does_not_know(state, kind):
    with pytest.raises(ValueError, match="state|kind"):
        report(state, kind=kind)


def reports(view: View, *shows: Show) -> list[str]:
    """The states reported after each of `shows` (as `Screen` asks after each change)."""
    out = []
    for show in shows:
        view.show(show, 80, 0.0)
        sequence = view.status_report()
        if sequence:
            out.append(sequence.split("state=", 1)[1].split(":")[0].rstrip("\x1b\\"))
    return out


def test_a_turn_reports_working_once_then_done():
    view = View(color=False, live=True, program_status=True)
    assert view.status_report() == ""  # nothing happened yet: nothing to say
    states = reports(
        view, Show("prompt", "hi"), Show("waiting"), Show("text", "a"), Show("turn_end")
    )
    assert states == ["working", "done"]


def test_a_waiting_approval_outranks_working_and_done_follows_its_decision():
    view = View(color=False, live=True, program_status=True)
    assert reports(view, Show("prompt", "bump it"), Show("waiting")) == ["working"]
    view.waiting_approvals = (1,)
    assert "state=blocked:kind=permission" in view.status_report()
    assert reports(view, Show("turn_end")) == []  # still blocked: the approval waits
    view.waiting_approvals = ()
    assert view.status_report() == report("done")
    view.close(80)
    assert view.status_report() == ""  # done stands after the session


def test_closing_mid_turn_clears_and_no_status_means_no_bytes():
    view = View(color=False, live=True, program_status=True)
    reports(view, Show("waiting"))
    view.close(80)
    assert view.status_report() == report("clear")
    quiet = View(color=False, live=True)
    assert reports(quiet, Show("waiting"), Show("turn_end")) == []
