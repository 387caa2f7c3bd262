"""Verdicts: only the errors a change added count, said once for the person and once for
the model (UNW-AI-01); the format-on-save note (UBQ-DEV-02)."""

from gbr_node.checks.diagnostics import parse_diagnostics
from gbr_node.checks.plan import CheckRun, CheckTarget, FormatOutcome
from gbr_node.checks.verdict import format_note, full_report, judge

T = CheckTarget("ruff", "a.py")


def failed(output):
    return CheckRun(T, "failed", "ruff check a.py", output, tuple(parse_diagnostics(output)))


def test_errors_in_the_baseline_do_not_count():
    old = "a.py:1:1: F401 `os` imported but unused\n"
    (verdict,) = judge([failed(old)], {T: failed(old)})
    assert not verdict.failing and verdict.before == 1
    assert verdict.status_line(0, 3, exhausted=False) == (
        "check ruff ok (1 error was there before this turn)"
    )


def test_a_new_error_is_failing_and_its_note_names_file_and_line():
    (verdict,) = judge([failed("a.py:4:2: E999 boom\n")], {})
    assert verdict.failing
    assert verdict.status_line(1, 3, exhausted=False) == "check ruff: 1 new error -> retry 1/3"
    assert "a.py:4:2: E999 boom" in verdict.note()
    assert verdict.summary() == {
        "check": "ruff",
        "status": "failed",
        "new_errors": 1,
        "errors": ["a.py:4:2: E999 boom"],
    }


def test_time_limit_and_not_run_are_said_and_never_block():
    timed = CheckRun(T, "timed_out", timeout_s=2.0)
    missing = CheckRun(CheckTarget("mypy"), "not_run", reason="mypy not found")
    one, two = judge([timed, missing], {})
    assert not one.failing and one.status_line(0, 3, exhausted=False) == (
        "check ruff timed out after 2 s (killed)"
    )
    assert two.status_line(0, 3, exhausted=False) == "check mypy not run: mypy not found"


def test_full_report_has_the_command_and_raw_output():
    report = full_report([failed("a.py:4:2: E999 boom\n")])
    assert report.startswith("check ruff (a.py): 1 error\n$ ruff check a.py\na.py:4:2")


def test_format_note_gives_the_changed_lines_or_says_why_not_formatted():
    given = "x=1\n" + "".join(f"y{n} = {n}\n" for n in range(50))
    formatted = given.replace("x=1", "x = 1")
    note = format_note(FormatOutcome("formatted", formatted, "ruff"), given)
    assert "reformatted by formatter ruff" in note and "+x = 1" in note and "-x=1" in note
    assert "y30" not in note  # only the changed lines, not the whole file
    small = format_note(FormatOutcome("formatted", "x = 1\n", "ruff"), "x=1\n")
    assert small.endswith("the text now in the file:]\nx = 1\n")
    skipped = FormatOutcome("skipped", given, "ruff", "the file was not formatted before")
    assert format_note(skipped, given).startswith("[not formatted by formatter ruff: the file")
    assert format_note(FormatOutcome("unchanged", given, "ruff"), given) == ""
    assert format_note(FormatOutcome("none", given), given) == ""
