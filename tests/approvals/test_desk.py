"""The node's approval desk: pending results, and `approval_status` per requester."""

from __future__ import annotations

import contextvars

import trio

from gbr_node.approvals import ApprovalLog, default_path
from gbr_node.approvals.desk import ApprovalDesk
from gbr_node.config.profile import ToolsConfig
from gbr_node.tools import build_registry
from gbr_node.tools.registry import CALLER

NEW = '[project]\nname = "demo"\nversion = "2"\n'


def make(project, sandbox):
    settled = []

    async def on_settled(approval):
        settled.append(approval)

    log = ApprovalLog(default_path(project))
    desk = ApprovalDesk(log, lambda: sandbox, lambda approval: None, on_settled)
    registry = build_registry(
        ToolsConfig(), sandbox, on_approval=desk.on_approval, extra=[desk.status_tool()]
    )
    return desk, registry, settled


def call_as(caller, registry, name, arguments):
    def run():
        CALLER.set(caller)
        return registry.call(name, arguments)

    return contextvars.copy_context().run(run)


def test_protected_write_is_pending_and_records_the_peer_that_asked(project, sandbox):
    desk, registry, _ = make(project, sandbox)
    peer = ("12D3KooWpeer", "bob")
    result = call_as(peer, registry, "write_file", {"path": "pyproject.toml", "content": NEW})
    assert result.structured["status"] == "pending_approval"
    approval = desk.log.get(result.structured["approval_id"])
    assert (approval.requester, approval.requester_alias) == peer
    assert (project / "pyproject.toml").read_text() != NEW


def test_approval_status_shows_a_peer_only_its_own_requests(project, sandbox):
    desk, registry, _ = make(project, sandbox)
    mine = call_as(
        ("peer-a", "a"), registry, "write_file", {"path": "pyproject.toml", "content": NEW}
    )
    number = mine.structured["approval_id"]
    waiting = call_as(("peer-a", "a"), registry, "approval_status", {"approval_id": number})
    assert "still waiting" in waiting.content[0]["text"]
    other = call_as(("peer-b", "b"), registry, "approval_status", {"approval_id": number})
    assert other.is_error and "no approval" in other.content[0]["text"]
    desk.log.reject(number, "not now", by="test")
    told = call_as(("peer-a", "a"), registry, "approval_status", {"approval_id": number})
    assert "rejected" in told.content[0]["text"] and "not now" in told.content[0]["text"]


async def test_desk_applies_a_decision_made_elsewhere_and_reports_it_once(project, sandbox):
    desk, registry, settled = make(project, sandbox)
    pending = registry.call("write_file", {"path": "pyproject.toml", "content": NEW})
    number = pending.structured["approval_id"]
    async with trio.open_nursery() as nursery:
        await nursery.start(desk.run)
        other = ApprovalLog(default_path(project))  # another process's connection
        other.approve(number, by="other terminal")
        with trio.fail_after(10):
            while not settled:
                await trio.sleep(0.05)
        await desk.poll_once()
        nursery.cancel_scope.cancel()
    assert (project / "pyproject.toml").read_text() == NEW
    assert [a.status for a in settled] == ["applied"]
