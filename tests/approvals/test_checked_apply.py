"""Approved writes go through format on save and the write check when applied (issue 17),
with the real `CheckRunner` (ruff) and a real SQLite log."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path

import pytest
import trio

from gbr_node.approvals import ApprovalLog, Settled, approve_and_apply, default_path
from gbr_node.approvals import desk as desk_module
from gbr_node.approvals.apply import apply
from gbr_node.approvals.desk import ApprovalDesk
from gbr_node.approvals.log import _SCHEMA, _TABLE
from gbr_node.approvals.state import Applied, outcome_text
from gbr_node.config.profile import Profile
from gbr_node.sandbox import Sandbox
from gbr_node.tools.checkrunner import CheckRunner

RUFF = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
UGLY = "import os\nx=1\n"
FORMATTED = "import os\n\nx = 1\n"


@pytest.fixture
def python_sandbox(project: Path) -> Sandbox:
    return Sandbox(project, ("pyproject.toml", "config/**", "app.py"))


@pytest.fixture
def checks(project: Path, python_sandbox: Sandbox) -> CheckRunner:
    ruff = {
        "files": ["**/*.py"],
        "formatter": [RUFF, "format", "--stdin-filename", "{path}", "-"],
        "check": [RUFF, "check", "--quiet", "--no-cache", "--output-format", "concise", "{path}"],
    }
    profile = Profile.model_validate({"checks": {"ruff": ruff}})
    path = os.environ.get("PATH", os.defpath)
    return CheckRunner(profile.checks, python_sandbox, profile.tools.run_command, path)


def request_write(log: ApprovalLog, sandbox: Sandbox, content: str) -> int:
    from gbr_node.approvals import fingerprint
    from gbr_node.errors import ApprovalRequired

    where = sandbox.resolve("app.py")
    exc = ApprovalRequired("write_file", "app.py", str(where.path), content=content)
    return log.request(exc, "local", None, fingerprint(where.path))


def test_approve_formats_the_approved_text_checks_it_and_records_both(
    project, log, python_sandbox, checks
):
    number = request_write(log, python_sandbox, UGLY)
    outcome = approve_and_apply(log, number, python_sandbox, by="test", checks=checks)
    assert isinstance(outcome, Settled) and outcome.approval.status == "applied"
    assert (project / "app.py").read_text() == FORMATTED
    assert outcome.formatted is not None and outcome.formatted.status == "formatted"
    assert [v.summary()["new_errors"] for v in outcome.verdicts] == [1]
    told = outcome_text(log.get(number))
    assert "[reformatted by formatter ruff" in told
    assert "[check ruff: 1 new error after this change; fix it:]" in told
    assert "app.py:1:8: F401" in told
    kinds = [
        k for (k,) in sqlite3.connect(default_path(project)).execute("SELECT kind FROM events")
    ]
    assert kinds == ["PendingApproval", "Approved", "Applied", "Checked"]


def test_a_crash_after_a_formatted_write_is_recognised_and_applied_once(
    project, log, python_sandbox, checks
):
    number = request_write(log, python_sandbox, UGLY)
    log.approve(number, by="test")
    (project / "app.py").write_text(FORMATTED)  # on disk, then the process died
    outcome = apply(log, number, python_sandbox, by="node", checks=checks)
    assert isinstance(outcome, Settled) and outcome.now
    assert outcome.approval.status == "applied"
    assert (project / "app.py").read_text() == FORMATTED


def test_a_version_1_log_is_rebuilt_keeping_its_rows_and_then_takes_checked(tmp_path):
    path = tmp_path / "approvals.db"
    with sqlite3.connect(path) as conn:
        conn.execute(_TABLE.format(name="events").replace(", 'Checked'", ""))
        conn.execute(
            "INSERT INTO events (approval_id, kind, at, body) VALUES (1, 'Rejected', 1.0, ?)",
            ('{"by": "x"}',),
        )
        conn.execute("PRAGMA user_version = 1")
    with ApprovalLog(path) as log:
        assert [(e.seq, type(e).__name__) for e in log.events_since(0)] == [(1, "Rejected")]
    with sqlite3.connect(path) as conn:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        assert version == 2
        conn.execute(
            "INSERT INTO events (approval_id, kind, at, body) VALUES (2, 'Checked', 2, '{}')"
        )
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("DELETE FROM events")
    assert len(_SCHEMA) == 7


async def test_the_desk_tells_the_requester_once_the_check_is_in(
    project, log, python_sandbox, checks
):
    told = []

    async def on_settled(approval):
        told.append(approval)

    desk = ApprovalDesk(log, lambda: python_sandbox, on_settled=on_settled)
    number = request_write(log, python_sandbox, UGLY)
    approve_and_apply(log, number, python_sandbox, by="test", checks=checks)
    await desk.poll_once()
    assert len(told) == 1 and "check ruff: 1 new error" in outcome_text(told[0])


async def test_the_desk_stops_waiting_for_a_check_that_never_reports(
    project, log, python_sandbox, monkeypatch
):
    told = []

    async def on_settled(approval):
        told.append(approval)

    monkeypatch.setattr(desk_module, "CHECK_REPORT_WAIT_S", 0.3)
    desk = ApprovalDesk(log, lambda: python_sandbox, on_settled=on_settled)
    number = request_write(log, python_sandbox, FORMATTED)
    log.approve(number, by="test")
    with log.transaction() as tx:  # applied, then the applying process died mid-check
        tx.append(
            Applied(approval_id=number, at=time.time(), by="cli", checking=True),
            tx.approval(number),
        )
    await desk.poll_once()
    assert told == []
    await trio.sleep(0.4)
    await desk.poll_once()
    assert [a.id for a in told] == [number]
