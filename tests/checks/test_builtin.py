"""The built-in parse check, pure (GBR-TRUTH-01): which files it knows, what it says, and
that a file which did not parse before a write is never blamed on it."""

import pytest

from gbr_node.checks.builtin import Breakage, breakage, kind_of, parse_error

GOOD = {
    "python": "def area(w, h):\n    return w * h\n",
    "json": '{"port": 9090}\n',
    "toml": "[server]\nport = 9090\n",
    "ini": "[server]\nport = 9090\n",
}
BAD = {
    "python": ("def area(w, h:\n    return w * h\n", "line 1: '(' was never closed"),
    "json": ('{"port": 9090,}\n', "line 1: Expecting property name"),
    "toml": ("[server]\nport = \n", "line 2: Invalid value"),
    "ini": ("port = 9090\n", "line 1: a [section] header must come first"),
}
SUFFIX = {"python": "py", "json": "json", "toml": "toml", "ini": "ini"}


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_each_kind_parses_good_text_and_names_the_line_of_bad_text(kind):
    assert parse_error(kind, GOOD[kind]) is None
    text, said = BAD[kind]
    error = parse_error(kind, text)
    assert error is not None and error.startswith(said)


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_a_change_that_breaks_a_file_that_parsed_is_a_breakage(kind):
    path = f"conf/app.{SUFFIX[kind]}"
    found = breakage(path, GOOD[kind], BAD[kind][0])
    assert isinstance(found, Breakage) and found.kind == kind and not found.new
    assert found.text.startswith(f"{path} no longer parses: {BAD[kind][1]}")
    assert breakage(path, None, BAD[kind][0]).text.startswith(f"{path} does not parse: ")


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_legacy_breakage_is_not_blamed_on_the_write(kind):
    path = f"app.{SUFFIX[kind]}"
    assert breakage(path, BAD[kind][0], BAD[kind][0] + "\n") is None
    assert breakage(path, "\x00", BAD[kind][0]) is None  # unreadable before: not blamed
    assert breakage(path, BAD[kind][0], GOOD[kind]) is None


def test_other_files_are_not_judged_and_python_warnings_are_not_errors():
    assert kind_of("README.md") is None and kind_of(".json") is None
    assert kind_of("A/B.PY") == "python" and kind_of("x.pyi") == "python"
    assert breakage("notes.txt", "ok", "{{{") is None
    assert parse_error("python", 'pattern = "\\d+"\n') is None
    assert parse_error("python", "return 1\n") == "line 1: 'return' outside function"
