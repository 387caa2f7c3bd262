"""Fixtures for the approval tests: a real project folder with a profile, a
sandbox over it, a real SQLite log in it, and the real tool registry whose
protected writes land in that log."""

from __future__ import annotations

import argparse
import io
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gbr_node.approvals import ApprovalLog, default_path, fingerprint
from gbr_node.approvals.cli import add_parser, main
from gbr_node.config.profile import ToolsConfig
from gbr_node.errors import ApprovalRequired
from gbr_node.sandbox import Sandbox
from gbr_node.tools import build_registry
from gbr_node.tools.base import ToolResult

PROTECTED = ("pyproject.toml", "config/**")
PROFILE = 'protected_files = ["pyproject.toml", "config/**"]\n'
ORIGINAL = '[project]\nname = "demo"\n'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder: `.gbr_envs/default.toml` protecting PROTECTED, and a
    `pyproject.toml` holding ORIGINAL."""
    folder = (tmp_path / "project").resolve()
    (folder / ".gbr_envs").mkdir(parents=True)
    (folder / ".gbr_envs" / "default.toml").write_text(PROFILE)
    (folder / "pyproject.toml").write_text(ORIGINAL)
    return folder


@pytest.fixture
def sandbox(project: Path) -> Sandbox:
    return Sandbox(project, PROTECTED)


@pytest.fixture
def log(project: Path) -> Iterator[ApprovalLog]:
    opened = ApprovalLog(default_path(project))
    yield opened
    opened.close()


Ask = Callable[..., int]


@pytest.fixture
def ask(log: ApprovalLog, sandbox: Sandbox) -> Ask:
    """`ask(tool, requester="local", alias=None, **arguments) -> approval id`:
    calls the real tool, which must hit a protected path; the approval
    handler records the request the way the node does (EVD-AI-01)."""

    def ask(tool: str, *, requester: str = "local", alias: str | None = None, **arguments) -> int:
        def on_approval(exc: ApprovalRequired) -> ToolResult:
            approval_id = log.request(exc, requester, alias, fingerprint(exc.absolute))
            structured = {"status": "pending_approval", "approval_id": approval_id}
            return ToolResult.text("pending", structured=structured)

        registry = build_registry(ToolsConfig(), sandbox, on_approval=on_approval)
        result = registry.call(tool, arguments)
        assert result.structured and result.structured["status"] == "pending_approval", result
        return result.structured["approval_id"]

    return ask


def parse(project: Path, *argv: str) -> argparse.Namespace:
    """The Namespace `gbr-node --project P approvals ARGV...` gives."""
    root = argparse.ArgumentParser(prog="gbr-node")
    root.add_argument("--project")
    root.add_argument("--env")
    add_parser(root.add_subparsers(dest="command"))
    return root.parse_args(["--project", str(project), "approvals", *argv])


def run_cli(project: Path, sandbox: Sandbox, *argv: str) -> tuple[int, str]:
    """Run `approvals ARGV...` in this process; (exit status, printed text)."""
    out = io.StringIO()
    status = main(project, lambda: sandbox, parse(project, *argv), out=out)
    return status, out.getvalue()


def stored_events(project: Path) -> list[tuple[int, int, str]]:
    """(seq, approval id, kind) of every event, read straight from the database."""
    with sqlite3.connect(default_path(project)) as conn:
        return conn.execute("SELECT seq, approval_id, kind FROM events ORDER BY seq").fetchall()


def assert_every_apply_was_decided(project: Path) -> None:
    """Never written to a protected path without an Approved/Edited event
    (issue 6): every Applied event follows a decision for the same id, and
    each id is applied at most once."""
    decided: set[int] = set()
    applied: list[int] = []
    for _, approval_id, kind in stored_events(project):
        if kind in ("Approved", "Edited"):
            decided.add(approval_id)
        elif kind == "Applied":
            assert approval_id in decided, f"approval #{approval_id} applied without a decision"
            applied.append(approval_id)
    assert len(applied) == len(set(applied)), f"applied more than once: {applied}"
