"""`gbr-node approvals list | show | approve | reject | edit` (EVD-DEV-01/02)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from gbr_node.approvals import ApprovalLog
from gbr_node.approvals.cli import run
from gbr_node.sandbox import Sandbox

from .conftest import ORIGINAL, Ask, assert_every_apply_was_decided, parse, run_cli, stored_events

NEW = '[project]\nname = "demo"\nversion = "2"\n'
UPPERCASE = (
    "import pathlib, sys\np = pathlib.Path(sys.argv[-1])\np.write_text(p.read_text().upper())\n"
)


def set_editor(tmp_path: Path, monkeypatch, body: str) -> None:
    script = tmp_path / "editor.py"
    script.write_text(body)
    monkeypatch.setenv("EDITOR", shlex.join([sys.executable, str(script)]))


def test_list_shows_pending_approvals_and_all_with_the_flag(
    project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    ask("write_file", requester="12D3KooWPeer", alias="bob", path="pyproject.toml", content=NEW)
    ask("write_file", path="config/a.toml", content="a")
    log.reject(2, None, by="op")
    status, text = run_cli(project, sandbox, "list")
    assert status == 0
    assert "#1" in text and "bob (12D3KooWPeer)" in text and "#2" not in text
    status, text = run_cli(project, sandbox, "list", "--all")
    assert "#2" in text and "rejected" in text


def test_list_without_a_log_says_so_and_creates_nothing(project: Path, sandbox: Sandbox) -> None:
    assert run_cli(project, sandbox, "list") == (0, "no approvals yet\n")
    assert not (project / ".gbr").exists()


def test_show_prints_the_diff_against_the_current_file(
    project: Path, sandbox: Sandbox, ask: Ask
) -> None:
    ask("write_file", path="pyproject.toml", content=NEW)
    status, text = run_cli(project, sandbox, "show", "1")
    assert status == 0
    assert "approval #1: pending" in text and '+version = "2"' in text
    assert "\x1b[" not in text  # not a terminal: no colours


def test_approve_writes_the_file_and_unknown_ids_are_usage_errors(
    project: Path, sandbox: Sandbox, ask: Ask
) -> None:
    ask("write_file", path="pyproject.toml", content=NEW)
    assert run_cli(project, sandbox, "approve", "7")[0] == 2
    status, text = run_cli(project, sandbox, "approve", "1")
    assert (status, text) == (0, "approval #1 applied: write_file pyproject.toml\n")
    assert (project / "pyproject.toml").read_text() == NEW
    assert run_cli(project, sandbox, "approve", "1") == (
        0,
        "approval #1 already applied: write_file pyproject.toml\n",
    )
    assert_every_apply_was_decided(project)


def test_approve_of_a_changed_file_reports_the_conflict_until_forced(
    project: Path, sandbox: Sandbox, ask: Ask
) -> None:
    ask("write_file", path="pyproject.toml", content=NEW)
    (project / "pyproject.toml").write_text("edited by hand\n")
    status, text = run_cli(project, sandbox, "approve", "1")
    assert status == 1
    assert "conflict" in text and "-edited by hand" in text and "--force" in text
    assert (project / "pyproject.toml").read_text() == "edited by hand\n"
    assert run_cli(project, sandbox, "approve", "1", "--force")[0] == 0
    assert (project / "pyproject.toml").read_text() == NEW


def test_reject_with_a_reason_records_it_and_touches_nothing(
    project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    ask("write_file", path="pyproject.toml", content=NEW)
    status, text = run_cli(project, sandbox, "reject", "1", "--reason", "not now")
    assert (status, text) == (0, "approval #1 rejected: not now\n")
    assert log.get(1).reason == "not now"
    assert run_cli(project, sandbox, "approve", "1") == (
        1,
        "approval #1 already rejected: not now\n",
    )
    assert (project / "pyproject.toml").read_text() == ORIGINAL


def test_edit_writes_what_the_editor_saved_and_records_edited(
    tmp_path: Path, monkeypatch, project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    set_editor(tmp_path, monkeypatch, UPPERCASE)
    ask("write_file", path="pyproject.toml", content=NEW)
    status, text = run_cli(project, sandbox, "edit", "1")
    assert (status, text) == (0, "approval #1 applied: write_file pyproject.toml\n")
    assert (project / "pyproject.toml").read_text() == NEW.upper()
    assert log.get(1).content == NEW.upper() and log.get(1).edited
    assert [kind for _, _, kind in stored_events(project)] == [
        "PendingApproval",
        "Edited",
        "Applied",
    ]


def test_an_editor_that_fails_or_changes_nothing_changes_nothing(
    tmp_path: Path, monkeypatch, project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    ask("write_file", path="pyproject.toml", content=NEW)
    for body in (
        "import pathlib, sys\npathlib.Path(sys.argv[-1]).write_text('x')\nsys.exit(1)\n",
        "pass\n",
    ):
        set_editor(tmp_path, monkeypatch, body)
        status, text = run_cli(project, sandbox, "edit", "1")
        assert (status, "made no change" in text) == (1, True)
    assert log.get(1).status == "pending"
    assert (project / "pyproject.toml").read_text() == ORIGINAL
    assert [kind for _, _, kind in stored_events(project)] == ["PendingApproval"]


def test_edit_of_a_delete_is_a_usage_error(project: Path, sandbox: Sandbox, ask: Ask) -> None:
    ask("delete_path", path="pyproject.toml")
    status, text = run_cli(project, sandbox, "edit", "1")
    assert (status, "no content to edit" in text) == (2, True)
    assert (project / "pyproject.toml").exists()


def test_run_loads_the_profile_of_the_project(project: Path, ask: Ask, capsys) -> None:
    ask("write_file", path="config/new.toml", content="fresh\n")
    assert run(parse(project, "approve", "1")) == 0
    assert (project / "config" / "new.toml").read_text() == "fresh\n"
    assert "applied" in capsys.readouterr().out
