"""The screen's state, pure: agent actions in, scrollback text and live rows out (GBR-TERM-01)."""

from __future__ import annotations

from gbr_node.agent.machine import Show
from gbr_node.agent.messages import ToolExecutionFeedback
from gbr_node.llm.events import ToolCall
from gbr_node.repl.usage import Tally, UsageMeter, session_report, turn_summary
from gbr_node.repl.view import View

WIDTH = 40


def live(color: bool = False) -> View:
    return View(color=color, live=True)


def feed(view: View, *shows: Show, now: float = 0.0, width: int = WIDTH) -> str:
    return "".join(view.show(show, width, now) for show in shows)


def call(call_id: str, seconds: str) -> ToolCall:
    return ToolCall(call_id, "run_command", {"argv": ["sleep", seconds]}, "")


def done(call_id: str, elapsed_s: float = 1.0) -> ToolExecutionFeedback:
    result = {"content": [{"type": "text", "text": ""}], "isError": False}
    return ToolExecutionFeedback(1, call_id, "run_command", result=result, elapsed_s=elapsed_s)


def test_a_notice_that_arrives_mid_answer_waits_for_the_end_of_it():
    view = live()
    out = feed(view, Show("prompt", "hi"), Show("waiting"), Show("text", "first half of a "))
    out += view.notice("profile default reloaded: system_prompt", WIDTH)
    assert "reloaded" not in out
    assert view.tray_rows(80) == [("warn", "» profile default reloaded: system_prompt")]
    out += feed(view, Show("text", "sentence."), Show("turn_end", data={"summary": "1.0 s"}))
    after = "(1.0 s)\nprofile default reloaded: system_prompt\n"
    assert out == "› hi\nfirst half of a sentence.\n" + after
    assert view.tray_rows(WIDTH) == []


def test_the_live_rows_are_the_part_of_the_answer_not_yet_written():
    view = live()
    out = feed(view, Show("text", "one two three four five six seven eight nine ten eleven"))
    assert out == "one two three four five six seven eight\n"
    assert view.answer_rows(WIDTH, 5) == [("", "nine ten eleven")]
    assert view.answer_rows(20, 5) == [("", "nine ten eleven")]


def test_the_status_says_waiting_with_seconds_then_streaming_then_idle():
    view = live()
    assert view.status_rows(WIDTH, 0)[0][1].startswith("idle")
    feed(view, Show("waiting"), now=10.0)
    assert "waiting for the model · 2 s" in view.status_rows(80, 12.4)[0][1]
    assert view.busy
    feed(view, Show("text", "x"), now=13.0)
    assert "streaming" in view.status_rows(80, 13.5)[0][1]
    feed(view, Show("turn_end"))
    assert not view.busy and view.status_rows(80, 14)[0][1].startswith("idle")
    view.pending_approvals = (2, 3, 4)  # #2: a peer's; the status line is the agent's
    assert view.status_rows(80, 14)[0][1].startswith("idle")
    view.waiting_approvals = (3, 4)
    assert view.status_rows(80, 14) == [
        ("warn", "● waiting for approval #3, #4 · /approve 3 · /reject 3 · /edit 3")
    ]


def test_running_tools_each_have_a_row_with_elapsed_time_and_end_in_the_models_order():
    view = live()
    out = feed(view, Show("tool_start", data={"call": call("a", "2")}), now=0.0)
    out += feed(view, Show("tool_start", data={"call": call("b", "1")}), now=0.1)
    rows = [text for _, text in view.status_rows(80, 1.25)]
    assert rows[0].endswith('running run_command argv=["sleep", "2"] · 1.2 s')
    assert rows[1].endswith('running run_command argv=["sleep", "1"] · 1.1 s')
    out += feed(view, Show("tool_end", data={"feedback": done("b")}), width=80)
    assert out == ""  # b ended first: its line waits in its row until a's is written
    assert view.status_rows(80, 1.3)[1][1].startswith("✓ run_command")
    out += feed(view, Show("tool_end", data={"feedback": done("a", 2.0)}), width=80)
    assert out.splitlines() == [
        '✓ run_command argv=["sleep", "2"] 2000 ms',
        '✓ run_command argv=["sleep", "1"] 1000 ms',
    ]


def test_a_queued_message_is_listed_then_drawn_as_its_own_prompt():
    view = live()
    feed(view, Show("prompt", "one"), Show("text", "answer"))
    feed(view, Show("queued", "two", {"position": 1}))
    assert view.tray_rows(WIDTH) == [("dim", "queued (1): two")]
    out = feed(view, Show("turn_end"), Show("prompt", "two"))
    assert out == "answer\n› two\n" and view.tray_rows(WIDTH) == []


def test_a_pipe_gets_the_answer_as_it_streams_and_notices_after_it():
    view = View(color=False, live=False)
    assert feed(view, Show("text", "half ")) == "half "
    assert view.notice("approval #1 requested", WIDTH) == ""
    assert feed(view, Show("text", "done"), Show("turn_end")) == "done\napproval #1 requested\n"


def test_model_text_cannot_reach_the_terminal_as_escapes():
    for view in (live(color=True), View(color=True, live=False)):
        out = feed(view, Show("text", "evil \x1b[2J here\n"), Show("turn_end"))
        assert "\x1b[2J" not in out and "␛[2J" in out


def test_the_usage_line_counts_tokens_time_and_tool_calls_of_a_turn():
    meter = UsageMeter()
    shows = [
        Show("waiting"),
        Show("tool_start", data={"call": call("a", "1")}),
        Show("usage", data={"usage": {"prompt_tokens": 1200, "completion_tokens": 30}}),
        Show("waiting"),
        Show("text", "ok"),
        Show("usage", data={"usage": {"prompt_tokens": 34, "completion_tokens": 26}}),
    ]
    for n, show in enumerate(shows):
        assert meter.observe(show, float(n)) is None
    summary = meter.observe(Show("turn_end"), 3.4)
    assert summary == "1,234 tokens in · 56 out · 3.4 s · 1 tool call"
    report = session_report(meter.session, "gpt-x", (1.0, 2.0))
    assert "1 turn, 2 model requests, 1 tool call" in report
    assert "cost: $0.0013 (gpt-x at $1 in / 2 out per million tokens)" in report
    assert "no prices in the profile" in session_report(meter.session, "gpt-x", (None, None))


def test_a_turn_that_failed_at_once_has_no_usage_line_and_unreported_tokens_are_said_so():
    assert turn_summary(Tally(inferences=1, seconds=0.01)) == ""
    partly = Tally(tokens_in=5, tokens_out=1, reported=1, inferences=2, streamed=True, seconds=1)
    assert turn_summary(partly) == "5 tokens in · 1 out (some not reported) · 1.0 s"


def test_an_interrupted_turn_stops_showing_its_running_tools():
    view = live()
    feed(view, Show("tool_start", data={"call": call("a", "9")}))
    feed(view, Show("tool_start", data={"call": call("b", "1")}))
    feed(view, Show("tool_end", data={"feedback": done("b")}), width=80)
    out = feed(view, Show("turn_end", "interrupted"), width=80)
    assert out.splitlines() == ['✓ run_command argv=["sleep", "1"] 1000 ms', "(interrupted)"]
    assert not view.busy and view.status_rows(80, 5)[0][1].startswith("idle")


def test_a_tool_line_escapes_what_the_model_or_a_peer_wrote_and_fits_its_width():
    from gbr_node.repl.render import status_line
    from gbr_node.textcells import plain

    feedback = ToolExecutionFeedback(
        1, "c", "read_file", error="peer said \x1b]0;owned\x07 " + "very long " * 30, peer="bob"
    )
    line = status_line(feedback, {"path": "a\x1b[2Jb " + "deep/" * 40}, width=80)
    assert "\x1b]" not in line and "\x1b[2J" not in line
    shown = plain(line)
    assert len(shown) <= 80 and shown.startswith("✗ read_file @bob path=a␛[2Jb")
    assert shown.endswith("…") and "peer said ␛]0;owned␇" in shown


def test_an_answer_is_laid_out_at_its_narrowest_width_and_the_next_at_the_full_one():
    view = live()
    assert view.layout_width(60) == 60  # no answer: the terminal's width
    feed(view, Show("text", "one two "), width=view.layout_width(40))
    assert [view.layout_width(w) for w in (60, 200, 30, 80)] == [40, 40, 30, 30]
    feed(view, Show("turn_end"), width=view.layout_width(80))
    assert view.layout_width(80) == 80
