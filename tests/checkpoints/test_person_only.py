"""Undo is the person's only (GBR-UNDO-01, GBR-PRIV-01): no tool is named like undo or
checkpoint, whatever the profile enables, for the agent, over MCP or in a peer's grant;
and the checkpoint store (`.gbr/checkpoints.db`, its blobs) is refused to every tool for
every caller, so no one can take changes back, or forge what undo would restore, by
writing it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gbr_node.checkpoints.store import CheckpointStore, default_path
from gbr_node.config.loader import build_sandbox, load_profile
from gbr_node.config.profile import ToolsConfig
from gbr_node.errors import SecurityViolation
from gbr_node.sandbox.caller import CALLER
from gbr_node.tools import build_registry
from gbr_node.tools.base import TURN

UNDOING = re.compile(r"undo|checkpoint|rewind|restore|take_?back|revert", re.I)
CALLERS = [("local", None), ("cli", None), ("mcp", None), ("12D3KooWpeer", "bob")]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = (tmp_path / "project").resolve()
    (folder / ".gbr_envs").mkdir(parents=True)
    (folder / ".gbr_envs" / "default.toml").write_text(
        'system_prompt = "x"\n[tools.run_command]\nallow = ["cat", "rm", "cp"]\n'
    )
    return folder


def test_no_tool_of_any_registry_is_named_like_undo(project: Path) -> None:
    """Every tool the node can offer (all enabled, the approval status tools too)."""
    from gbr_node.approvals import ApprovalLog
    from gbr_node.approvals import default_path as approvals_path
    from gbr_node.approvals.desk import ApprovalDesk

    sandbox = build_sandbox(load_profile(project))
    with ApprovalLog(approvals_path(project)) as log:
        desk = ApprovalDesk(log, lambda: sandbox)
        registry = build_registry(ToolsConfig(), sandbox, extra=desk.status_tools(ToolsConfig()))
    names = registry.names()
    assert {"write_file", "run_command", "approval_status"} <= set(names)
    assert not [n for n in names if UNDOING.search(n)], names


def store_with_a_change(project: Path) -> tuple[CheckpointStore, list[str]]:
    """A real store holding one turn's change of notes.txt; returns it and the store's
    files, root-relative."""
    sandbox = build_sandbox(load_profile(project))
    (project / "notes.txt").write_text("before\n")
    store = CheckpointStore(default_path(project), project)
    registry = build_registry(ToolsConfig(), sandbox, checkpoints=store)
    token = TURN.set("t1")
    try:
        registry.call("write_file", {"path": "notes.txt", "content": "after\n"})
    finally:
        TURN.reset(token)
    kept = [
        p.relative_to(project).as_posix()
        for p in (project / ".gbr").rglob("*")
        if p.is_file() and "checkpoints" in p.as_posix()
    ]
    assert any("/blobs/" in k for k in kept) and ".gbr/checkpoints.db" in kept, kept
    return store, kept


@pytest.mark.parametrize("caller", CALLERS, ids=[c[0] for c in CALLERS])
def test_the_checkpoint_store_is_refused_to_every_tool_for_every_caller(
    project: Path, caller: tuple[str, str | None]
) -> None:
    """GBR-PRIV-01: read, write, edit, delete, move, search, list and run_command of the
    database and a blob are refused; the store is unchanged and still undoes."""
    store, kept = store_with_a_change(project)
    sandbox = build_sandbox(load_profile(project))
    registry = build_registry(ToolsConfig(), sandbox, search_path="/usr/bin:/bin")
    before = {k: (project / k).read_bytes() for k in kept}
    token = CALLER.set(caller)
    try:
        for path in [".gbr/checkpoints.db", next(k for k in kept if "/blobs/" in k)]:
            attempts: list[tuple[str, dict[str, Any]]] = [
                ("read_file", {"path": path}),
                ("write_file", {"path": path, "content": "forged"}),
                ("edit_file", {"path": path, "old_string": "a", "new_string": "b"}),
                ("delete_path", {"path": path}),
                ("move_path", {"source": path, "destination": "stolen"}),
                ("move_path", {"source": "notes.txt", "destination": path}),
                ("search_text", {"pattern": "before", "path": path}),
                ("list_dir", {"path": str(Path(path).parent)}),
                ("run_command", {"argv": ["cat", path]}),
                ("run_command", {"argv": ["rm", path]}),
                ("run_command", {"argv": ["cp", "notes.txt", path]}),
            ]
            for tool, arguments in attempts:
                with pytest.raises(SecurityViolation):
                    registry.call(tool, arguments)
        found = registry.call("search_text", {"pattern": "before"}).content[0]["text"]
        assert "checkpoints" not in found
    finally:
        CALLER.reset(token)
    assert {k: (project / k).read_bytes() for k in kept} == before

    def write(relative: str, data: bytes) -> None:
        (project / relative).write_bytes(data)

    assert store.undo(store.select(), write) == ["restored notes.txt"]
    store.close()
