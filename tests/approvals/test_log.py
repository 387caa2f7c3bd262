"""The SQLite approval log and applying decisions, in one process
(EVD-AI-01, EVD-DEV-01/02; issue 6 "The log", "Conflicts")."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from gbr_node.approvals import (
    ApprovalLog,
    ApprovalLogError,
    Conflict,
    InvalidDecision,
    Settled,
    UnknownApproval,
    approve_and_apply,
    default_path,
    fingerprint,
)
from gbr_node.approvals.apply import apply, text_hash
from gbr_node.errors import SecurityViolation
from gbr_node.sandbox import Sandbox

from .conftest import ORIGINAL, Ask, assert_every_apply_was_decided, stored_events

NEW = '[project]\nname = "demo"\nversion = "2"\n'


def test_a_protected_write_is_logged_pending_and_the_file_is_untouched(
    project: Path, log: ApprovalLog, ask: Ask
) -> None:
    approval_id = ask(
        "write_file", requester="12D3KooWPeer", alias="bob", path="pyproject.toml", content=NEW
    )
    approval = log.get(approval_id)
    assert (approval.id, approval.status, approval.tool) == (1, "pending", "write_file")
    assert (approval.requester, approval.requester_alias) == ("12D3KooWPeer", "bob")
    assert (approval.path, approval.absolute) == ("pyproject.toml", str(project / "pyproject.toml"))
    assert approval.proposed == NEW
    assert approval.request_hash == text_hash(ORIGINAL)
    assert (project / "pyproject.toml").read_text() == ORIGINAL
    assert [kind for _, _, kind in stored_events(project)] == ["PendingApproval"]


def test_ids_count_up_and_list_filters_by_status(log: ApprovalLog, ask: Ask) -> None:
    first = ask("write_file", path="pyproject.toml", content="a")
    second = ask("write_file", path="config/app.toml", content="b")
    log.reject(first, None, by="op")
    assert (first, second) == (1, 2)
    assert [a.id for a in log.list()] == [1, 2]
    assert [a.id for a in log.list("pending")] == [2]
    assert [a.id for a in log.list("rejected")] == [1]


def test_a_new_file_under_a_protected_folder_has_no_base_hash(log: ApprovalLog, ask: Ask) -> None:
    approval_id = ask("write_file", path="config/app.toml", content="x = 1\n")
    assert log.get(approval_id).base_hash is None


def test_approve_applies_once_and_records_applied(
    project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    approval_id = ask("write_file", path="pyproject.toml", content=NEW)
    outcome = approve_and_apply(log, approval_id, sandbox, by="op")
    assert isinstance(outcome, Settled) and outcome.now
    assert outcome.approval.status == "applied"
    assert (project / "pyproject.toml").read_text() == NEW
    again = approve_and_apply(log, approval_id, sandbox, by="op")
    assert again == Settled(log.get(approval_id), now=False)
    kinds = [kind for _, _, kind in stored_events(project)]
    assert kinds == ["PendingApproval", "Approved", "Applied"]
    assert_every_apply_was_decided(project)


def test_applying_a_pending_approval_is_refused_and_writes_nothing(
    project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    approval_id = ask("write_file", path="pyproject.toml", content=NEW)
    with pytest.raises(InvalidDecision, match="is pending"):
        apply(log, approval_id, sandbox, by="op")
    assert (project / "pyproject.toml").read_text() == ORIGINAL
    assert [kind for _, _, kind in stored_events(project)] == ["PendingApproval"]


def test_reject_records_the_reason_and_leaves_the_file_untouched(
    project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    approval_id = ask("write_file", path="pyproject.toml", content=NEW)
    log.reject(approval_id, "keep the old name", by="op")
    approval = log.get(approval_id)
    assert (approval.status, approval.reason, approval.decided_by) == (
        "rejected",
        "keep the old name",
        "op",
    )
    assert approve_and_apply(log, approval_id, sandbox, by="op") == Settled(approval, now=False)
    with pytest.raises(InvalidDecision):
        log.reject(approval_id, "again", by="op")
    assert (project / "pyproject.toml").read_text() == ORIGINAL
    assert_every_apply_was_decided(project)


def test_a_changed_file_is_a_conflict_and_force_applies_over_it(
    project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    approval_id = ask("write_file", path="pyproject.toml", content=NEW)
    (project / "pyproject.toml").write_text("changed meanwhile\n")
    outcome = approve_and_apply(log, approval_id, sandbox, by="op")
    assert isinstance(outcome, Conflict)
    assert outcome.expected_hash == text_hash(ORIGINAL)
    assert outcome.current_hash == text_hash("changed meanwhile\n")
    assert "-changed meanwhile" in outcome.diff and '+version = "2"' in outcome.diff
    assert log.get(approval_id).status == "pending"
    assert (project / "pyproject.toml").read_text() == "changed meanwhile\n"

    forced = approve_and_apply(log, approval_id, sandbox, by="op", force=True)
    assert isinstance(forced, Settled) and forced.approval.status == "applied"
    assert forced.approval.base_hash == text_hash("changed meanwhile\n")
    assert (project / "pyproject.toml").read_text() == NEW
    assert_every_apply_was_decided(project)


def test_a_change_after_approval_is_caught_when_applying(
    project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    approval_id = ask("write_file", path="pyproject.toml", content=NEW)
    log.approve(approval_id, by="op", current_hash=text_hash(ORIGINAL))
    (project / "pyproject.toml").write_text("changed after the approval\n")
    assert isinstance(apply(log, approval_id, sandbox, by="node"), Conflict)
    assert log.get(approval_id).status == "approved"
    log.reject(approval_id, "stale", by="op")
    assert (project / "pyproject.toml").read_text() == "changed after the approval\n"
    assert "Applied" not in [kind for _, _, kind in stored_events(project)]


def test_an_edit_is_what_gets_written(
    project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    approval_id = ask("edit_file", path="pyproject.toml", old_string="demo", new_string="x")
    outcome = approve_and_apply(log, approval_id, sandbox, by="op", content="edited = true\n")
    assert isinstance(outcome, Settled) and outcome.approval.edited
    assert outcome.approval.proposed == '[project]\nname = "x"\n'
    assert (project / "pyproject.toml").read_text() == "edited = true\n"
    assert [kind for _, _, kind in stored_events(project)][1:] == ["Edited", "Applied"]


def test_a_protected_delete_and_move_apply_after_approval(
    project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    (project / "config").mkdir()
    (project / "config" / "a.toml").write_text("a\n")
    moved = ask("move_path", source="pyproject.toml", destination="old.toml")
    deleted = ask("delete_path", path="config")
    with pytest.raises(InvalidDecision, match="nothing to edit"):
        log.edit(deleted, "text", by="op")
    assert approve_and_apply(log, moved, sandbox, by="op").approval.status == "applied"
    assert approve_and_apply(log, deleted, sandbox, by="op").approval.status == "applied"
    assert (project / "old.toml").read_text() == ORIGINAL
    assert not (project / "pyproject.toml").exists() and not (project / "config").exists()
    assert_every_apply_was_decided(project)


def test_a_move_onto_an_existing_destination_fails_and_says_so(
    project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    approval_id = ask("move_path", source="pyproject.toml", destination="old.toml")
    (project / "old.toml").write_text("in the way\n")
    outcome = approve_and_apply(log, approval_id, sandbox, by="op")
    assert outcome.approval.status == "failed"
    assert "already exists" in (outcome.approval.error or "")
    assert (project / "pyproject.toml").read_text() == ORIGINAL


def test_a_change_already_on_disk_is_recorded_without_writing_again(
    project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    """The state a crash between the write and the Applied commit leaves."""
    approval_id = ask("write_file", path="pyproject.toml", content=NEW)
    log.approve(approval_id, by="op", current_hash=text_hash(ORIGINAL))
    (project / "pyproject.toml").write_text(NEW)
    inode = os.stat(project / "pyproject.toml").st_ino
    outcome = apply(log, approval_id, sandbox, by="node")
    assert isinstance(outcome, Settled) and outcome.approval.status == "applied"
    assert os.stat(project / "pyproject.toml").st_ino == inode  # not replaced again


def test_a_symlink_planted_at_the_path_fails_the_apply_and_writes_nothing_outside(
    tmp_path: Path, project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("outside\n")
    approval_id = ask("write_file", path="config/app.toml", content="x\n")
    (project / "config").mkdir()
    (project / "config" / "app.toml").symlink_to(outside)
    with pytest.raises(SecurityViolation):
        approve_and_apply(log, approval_id, sandbox, by="op", force=True)
    log.approve(approval_id, by="op")
    outcome = apply(log, approval_id, sandbox, by="node")
    assert isinstance(outcome, Settled) and outcome.approval.status == "failed"
    assert "outside the allowed root" in (outcome.approval.error or "")
    assert outside.read_text() == "outside\n"
    assert "Applied" not in [kind for _, _, kind in stored_events(project)]


def test_pending_approvals_survive_reopening(project: Path, ask: Ask, log: ApprovalLog) -> None:
    ask("write_file", path="pyproject.toml", content=NEW)
    log.close()
    with ApprovalLog(default_path(project)) as reopened:
        assert [(a.id, a.status, a.content) for a in reopened.list()] == [(1, "pending", NEW)]


def test_events_since_returns_only_newer_events_in_order(log: ApprovalLog, ask: Ask) -> None:
    approval_id = ask("write_file", path="pyproject.toml", content=NEW)
    [first] = log.events_since(0)
    log.reject(approval_id, "no", by="op")
    later = log.events_since(first.seq)
    assert [type(e).__name__ for e in later] == ["Rejected"]
    assert later[0].seq > first.seq and log.events_since(later[0].seq) == []


def test_the_stored_log_refuses_updates_and_deletes(project: Path, ask: Ask) -> None:
    ask("write_file", path="pyproject.toml", content=NEW)
    with sqlite3.connect(default_path(project)) as conn:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE events SET kind = 'Approved'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("DELETE FROM events")


def test_unknown_ids_and_unusable_files_raise_gbr_errors(tmp_path: Path, log: ApprovalLog) -> None:
    with pytest.raises(UnknownApproval):
        log.get(42)
    with pytest.raises(UnknownApproval):
        log.approve(42, by="op")
    (tmp_path / "not-a-db").write_text("this is not sqlite" * 100)
    with pytest.raises(ApprovalLogError):
        ApprovalLog(tmp_path / "not-a-db")


def test_fingerprint_tells_files_folders_links_and_absence_apart(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    (tmp_path / "l").symlink_to("f")
    prints = [fingerprint(tmp_path / name) for name in ("f", "d", "l", "missing")]
    assert prints[0] == text_hash("x")
    assert str(prints[1]).startswith("tree:") and str(prints[2]).startswith("link:")
    assert prints[3] is None
    (tmp_path / "d" / "inner").write_text("y")
    assert fingerprint(tmp_path / "d") != prints[1]
