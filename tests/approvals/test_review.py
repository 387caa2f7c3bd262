"""The diff the operator reads and the `$EDITOR` round trip (EVD-DEV-01/02)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from gbr_node.approvals.review import (
    colour_diff,
    edit_in_editor,
    editor_command,
    unified_diff,
)
from gbr_node.errors import ToolError

UPPERCASE = (
    "import pathlib, sys\np = pathlib.Path(sys.argv[-1])\np.write_text(p.read_text().upper())\n"
)
FAIL_AFTER_WRITING = (
    "import pathlib, sys\npathlib.Path(sys.argv[-1]).write_text('junk')\nsys.exit(3)\n"
)
LEAVE_ALONE = "import sys\n"
APPEND_ARGUMENT = (
    "import pathlib, sys\n"
    "p = pathlib.Path(sys.argv[-1])\n"
    "p.write_text(p.read_text() + sys.argv[1])\n"
)


def editor(tmp_path: Path, body: str, *arguments: str) -> str:
    """An $EDITOR value running a Python script with `body` and `arguments`."""
    script = tmp_path / "editor.py"
    script.write_text(body)
    return shlex.join([sys.executable, str(script), *arguments])


def test_diff_shows_removed_and_added_lines_with_file_headers() -> None:
    lines = unified_diff("a\nb\n", "a\nc\n", "pyproject.toml")
    assert lines[:2] == ["--- a/pyproject.toml", "+++ b/pyproject.toml"]
    assert "-b" in lines and "+c" in lines and " a" in lines


def test_diff_of_a_new_file_adds_every_line_and_of_a_delete_removes_them() -> None:
    assert [x for x in unified_diff("", "x\ny\n", "f") if x[:1] == "+"][1:] == ["+x", "+y"]
    assert [x for x in unified_diff("x\n", None, "f") if x[:1] == "-"][1:] == ["-x"]
    assert unified_diff(None, "x", "f") == []


def test_colour_diff_paints_additions_green_and_removals_red_only_when_asked() -> None:
    lines = unified_diff("old\n", "new\n", "f")
    painted = colour_diff(lines)
    assert "\x1b[32m+new\x1b[0m" in painted and "\x1b[31m-old\x1b[0m" in painted
    assert colour_diff(lines, colour=False) == "\n".join(lines)


def test_the_editor_s_changes_are_returned(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EDITOR", editor(tmp_path, UPPERCASE))
    assert edit_in_editor("name = 'demo'\n", suffix=".toml") == "NAME = 'DEMO'\n"


def test_editor_arguments_from_the_variable_are_passed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EDITOR", editor(tmp_path, APPEND_ARGUMENT, "tail text"))
    assert edit_in_editor("head ") == "head tail text"


@pytest.mark.parametrize("body", [FAIL_AFTER_WRITING, LEAVE_ALONE])
def test_an_editor_that_fails_or_changes_nothing_gives_none(
    tmp_path: Path, monkeypatch, body: str
) -> None:
    monkeypatch.setenv("EDITOR", editor(tmp_path, body))
    assert edit_in_editor("original\n") is None


def test_without_editor_nano_then_vi_is_used(tmp_path: Path) -> None:
    for name in ("nano", "vi"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    assert editor_command({"PATH": str(tmp_path)}) == [str(tmp_path / "nano")]
    (tmp_path / "nano").unlink()
    assert editor_command({"PATH": str(tmp_path), "EDITOR": ""}) == [str(tmp_path / "vi")]
    (tmp_path / "vi").unlink()
    with pytest.raises(ToolError, match="no editor"):
        editor_command({"PATH": str(tmp_path)})


def test_an_editor_that_cannot_start_is_a_tool_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EDITOR", str(tmp_path / "no-such-editor"))
    with pytest.raises(ToolError, match="cannot start editor"):
        edit_in_editor("x")


def test_a_diff_shows_escape_sequences_of_the_content_instead_of_sending_them():
    from gbr_node.approvals.review import colour_diff, unified_diff

    lines = unified_diff("a\n", "a\n\x1b[2J\x1b]0;pwned\x07\n", "x.txt")
    for colour in (True, False):
        shown = colour_diff(lines, colour=colour)
        assert "\x1b[2J" not in shown and "\x1b]" not in shown
        assert "+␛[2J␛]0;pwned␇" in shown.replace("\x1b[32m", "").replace("\x1b[0m", "")
