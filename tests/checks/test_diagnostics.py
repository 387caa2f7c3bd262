"""Parsing check output into errors and telling the turn's new errors from old ones
(UNW-AI-01): a table of real compilers' output formats."""

import pytest

from gbr_node.checks.diagnostics import (
    REPORT_MAX_CHARS,
    Diagnostic,
    diagnostics_text,
    failure_diagnostics,
    new_diagnostics,
    parse_diagnostics,
)

FORMATS = [
    ("ruff", "app.py:3:5: F821 Undefined name `x`\n", "app.py", 3),
    (
        "flake8/mypy",
        "pkg/m.py:12: error: Name 'y' is not defined  [name-defined]\n",
        "pkg/m.py",
        12,
    ),
    ("gcc", "src/a.c:7:2: error: expected ';' before '}' token\n", "src/a.c", 7),
    ("cargo short", "src/main.rs:4:9: error[E0425]: cannot find value `z`\n", "src/main.rs", 4),
    ("go", "./main.go:10:2: undefined: foo\n", "./main.go", 10),
    ("tsc", "src/app.ts(5,3): error TS2304: Cannot find name 'q'.\n", "src/app.ts", 5),
    (
        "rustc long",
        "error[E0425]: cannot find value `z` in this scope\n --> src/main.rs:4:9\n  |\n",
        "src/main.rs",
        4,
    ),
    (
        "gleam",
        "error: Unknown variable\n  ┌─ src/app.gleam:3:10\n  │\n3 │   io.println(nme)\n",
        "src/app.gleam",
        3,
    ),
    (
        "py_compile",
        '  File "app.py", line 2\n    def f(:\n          ^\nSyntaxError: invalid syntax\n',
        "app.py",
        2,
    ),
    ("colours", "\x1b[1mapp.py\x1b[0m:3:5: \x1b[31mF821\x1b[0m Undefined name\n", "app.py", 3),
]


@pytest.mark.parametrize(("tool", "output", "path", "line"), FORMATS, ids=[f[0] for f in FORMATS])
def test_each_compilers_errors_have_their_file_and_line(tool, output, path, line):
    (found,) = parse_diagnostics(output)
    assert (found.path, found.line) == (path, line)
    assert "\x1b" not in found.text and found.text


def test_a_traceback_becomes_one_line_with_the_last_frames_place_and_the_exception():
    output = (
        "Traceback (most recent call last):\n"
        '  File "<string>", line 1, in <module>\n'
        '  File "/usr/lib/python3.12/ast.py", line 52, in parse\n'
        "    return compile(source, filename, mode, flags,\n"
        '  File "app.py", line 1\n'
        "    def f(:\n"
        "          ^\n"
        "SyntaxError: invalid syntax\n"
    )
    (found,) = parse_diagnostics(output)
    assert found.text == "app.py:1: SyntaxError: invalid syntax"
    assert "Traceback" not in diagnostics_text([found])


def test_a_failing_check_that_names_no_place_counts_as_one_error():
    (found,) = failure_diagnostics("something went wrong\n  badly\n")
    assert found.text == "something went wrong badly"
    assert failure_diagnostics("")[0].text == "(the check failed without any output)"


def diag(text, path="a.py", line=1, message=None):
    return parse_diagnostics(f"{path}:{line}:1: {message or text}\n")[0]


def test_errors_that_only_moved_are_not_new_and_a_second_alike_one_is():
    before = [diag("", line=3, message="F821 Undefined name `x`")]
    after = [
        diag("", line=8, message="F821 Undefined name `x`"),  # lines were added above
        diag("", line=20, message="F821 Undefined name `x`"),
    ]
    assert new_diagnostics(before, after) == [after[1]]


def test_same_message_in_another_file_is_new():
    before = [diag("", path="a.py", message="E1 bad")]
    after = [diag("", path="b.py", message="E1 bad")]
    assert new_diagnostics(before, after) == after


def test_the_report_is_cut_at_a_line_boundary_and_says_how_many_were_left_out():
    many = [Diagnostic(f"a.py:{n}:1: E{n} " + "x" * 80, f"k{n}", "a.py", n) for n in range(100)]
    text = diagnostics_text(many)
    assert len(text) <= REPORT_MAX_CHARS
    assert text.splitlines()[-1].startswith("[... ") and "more errors]" in text
