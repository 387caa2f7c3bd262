"""GBR-PRIV-01: what a requester can make the approval log hold is bounded.

Per requester, at most MAX_PENDING_PER_REQUESTER pending approvals and
MAX_PROPOSED_BYTES per proposed content; past them a request is refused with a
JSON-RPC error and nothing is logged. Decided approvals are compacted after an
age; the newest id survives so ids are never reused.
"""

from __future__ import annotations

import time

import pytest

from gbr_node.approvals.desk import MAX_PENDING_PER_REQUESTER, MAX_PROPOSED_BYTES, ApprovalDesk
from gbr_node.approvals.log import ApprovalLog
from gbr_node.config.profile import ToolsConfig
from gbr_node.errors import RpcError
from gbr_node.rpc import codes
from gbr_node.sandbox import Sandbox
from gbr_node.sandbox.caller import CALLER
from gbr_node.tools.registry import build_registry


@pytest.fixture
def world(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\n")
    sandbox = Sandbox(root, ["pyproject.toml"])
    log = ApprovalLog(tmp_path / "approvals.db")
    desk = ApprovalDesk(log, lambda: sandbox)
    registry = build_registry(ToolsConfig(), sandbox, on_approval=desk.on_approval)
    yield registry, log
    log.close()


def _as(peer: tuple[str, str | None]):
    return CALLER.set(peer)


def test_an_approval_flood_is_refused_past_the_per_requester_bound(world) -> None:
    registry, log = world
    token = _as(("12D3KooWflood", "mallory"))
    try:
        for n in range(MAX_PENDING_PER_REQUESTER):
            result = registry.call("write_file", {"path": "pyproject.toml", "content": f"{n}\n"})
            assert result.structured["status"] == "pending_approval"
        with pytest.raises(RpcError) as refused:
            registry.call("write_file", {"path": "pyproject.toml", "content": "more\n"})
        assert refused.value.code == codes.BUSY and "already wait" in refused.value.message
    finally:
        CALLER.reset(token)
    assert len(log.list("pending")) == MAX_PENDING_PER_REQUESTER
    # another requester still gets its slot: one flood does not lock the others out
    assert (
        registry.call("write_file", {"path": "pyproject.toml", "content": "mine\n"}).structured[
            "status"
        ]
        == "pending_approval"
    )
    log.reject(1, "no", by="test")
    token = _as(("12D3KooWflood", "mallory"))
    try:  # a decided one frees a slot
        registry.call("write_file", {"path": "pyproject.toml", "content": "again\n"})
    finally:
        CALLER.reset(token)


@pytest.mark.parametrize("size", [MAX_PROPOSED_BYTES + 1, 1024 * 1024])
def test_a_proposed_content_over_the_cap_is_refused_and_nothing_logged(world, size) -> None:
    registry, log = world
    with pytest.raises(RpcError) as refused:
        registry.call("write_file", {"path": "pyproject.toml", "content": "x" * size})
    assert refused.value.code == codes.TOO_LARGE
    assert log.list() == []


def test_decided_approvals_are_compacted_after_their_age_and_ids_never_repeat(world) -> None:
    registry, log = world
    for n in range(4):
        registry.call("write_file", {"path": "pyproject.toml", "content": f"{n}\n"})
    for n in (1, 2, 3, 4):
        log.reject(n, None, by="test")
    assert log.compact(3600.0) == 0  # all decided just now
    assert log.compact(0.0, now=time.time() + 10) == 3  # #4, the newest, stays
    assert [a.id for a in log.list()] == [4]
    result = registry.call("write_file", {"path": "pyproject.toml", "content": "next\n"})
    assert result.structured["approval_id"] == 5
    with pytest.raises(Exception, match="append-only"):
        log._conn.execute("DELETE FROM events")  # the guard is back
