"""Approved and edited protected writes are checkpointed before they land, in the group
of whoever asked (GBR-UNDO-01): the agent's turn, a peer by alias, the command line."""

from __future__ import annotations

import contextvars
from pathlib import Path

import pytest

from gbr_node.approvals import ApprovalLog, default_path
from gbr_node.approvals.apply import approve_and_apply
from gbr_node.approvals.desk import ApprovalDesk
from gbr_node.checkpoints.store import CheckpointStore, take_back
from gbr_node.checkpoints.store import default_path as checkpoints_path
from gbr_node.config.profile import ToolsConfig
from gbr_node.sandbox import Sandbox
from gbr_node.tools import build_registry
from gbr_node.tools.base import CALLER, TURN
from tests.approvals.conftest import ORIGINAL

NEW = '[project]\nname = "demo"\nversion = "2"\n'


@pytest.fixture
def store(project: Path):
    kept = CheckpointStore(checkpoints_path(project), project)
    yield kept
    kept.close()


def ask(project: Path, sandbox: Sandbox, caller, turn=None) -> int:
    log = ApprovalLog(default_path(project))
    desk = ApprovalDesk(log, lambda: sandbox)
    registry = build_registry(ToolsConfig(), sandbox, on_approval=desk.on_approval)

    def run():
        CALLER.set(caller)
        if turn is not None:
            TURN.set(turn)
        return registry.call("write_file", {"path": "pyproject.toml", "content": NEW})

    result = contextvars.copy_context().run(run)
    log.close()
    return result.structured["approval_id"]


def approve(project, sandbox, store, number, content=None):
    with ApprovalLog(default_path(project)) as log:
        return approve_and_apply(
            log, number, sandbox, by="test", content=content, checkpoints=store
        )


def test_an_approved_write_of_the_agent_joins_its_turn_and_is_undone_with_it(
    project, sandbox, store
):
    """GBR-UNDO-01: the turn that asked owns the approved write."""
    number = ask(project, sandbox, ("local", None), turn="t-1")
    approve(project, sandbox, store, number)
    assert (project / "pyproject.toml").read_text() == NEW
    [group] = store.groups()
    assert (group.kind, group.label, group.paths) == ("turn", "t-1", ("pyproject.toml",))
    assert take_back(store, sandbox) == ["restored pyproject.toml"]
    assert (project / "pyproject.toml").read_text() == ORIGINAL


def test_an_edited_write_of_a_peer_is_undone_by_its_alias(project, sandbox, store):
    """GBR-UNDO-01, EVD-DEV-02: the edited content is what was written and what undo
    takes back; the group is the peer's."""
    number = ask(project, sandbox, ("12D3KooWbob", "bob"))
    approve(project, sandbox, store, number, content="edited = true\n")
    assert (project / "pyproject.toml").read_text() == "edited = true\n"
    [group] = store.groups()
    assert (group.kind, group.label) == ("peer", "bob")
    assert take_back(store, sandbox, peer="bob") == ["restored pyproject.toml"]
    assert (project / "pyproject.toml").read_text() == ORIGINAL


def test_a_command_lines_approved_write_is_labelled_command(project, sandbox, store):
    number = ask(project, sandbox, ("cli", None))
    approve(project, sandbox, store, number)
    [group] = store.groups()
    assert (group.kind, group.label) == ("call", "command")
    assert take_back(store, sandbox, group=group.id) == ["restored pyproject.toml"]


def test_the_desk_checkpoints_a_decision_it_applies(project, sandbox, store):
    """A decision made elsewhere and applied by the running node's desk is kept too."""
    import trio

    number = ask(project, sandbox, ("12D3KooWcarol", "carol"))
    with ApprovalLog(default_path(project)) as log:
        log.approve(number, by="test")
        desk = ApprovalDesk(log, lambda: sandbox, checkpoints=lambda: store)
        trio.run(desk.poll_once)
    assert (project / "pyproject.toml").read_text() == NEW
    assert [g.label for g in store.groups()] == ["carol"]
