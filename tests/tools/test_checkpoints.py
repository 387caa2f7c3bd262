"""Checkpoints and undo over real files and a real SQLite store (GBR-UNDO-01): the tools
keep the prior state of every path before changing it; an undo takes a turn, a peer's
call or a command back exactly, stops on conflicts, and can itself be undone."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from gbr_node.checkpoints.plan import Owner
from gbr_node.checkpoints.store import CheckpointStore, UndoConflict, default_path
from gbr_node.config.profile import ToolsConfig
from gbr_node.sandbox import Sandbox
from gbr_node.tools import build_registry
from gbr_node.tools.base import CALLER, TURN
from tests.tools.helpers import make_program


@pytest.fixture
def store(root):
    kept = CheckpointStore(default_path(root), root)
    yield kept
    kept.close()


MUTATE = (
    "echo new > made.txt; echo changed > keep.txt; rm -f gone.txt; "
    "for d in .gbr_envs .git .gbr; do [ -d $d ] && echo x > $d/junk; done; echo x > a.txt"
)


@pytest.fixture
def registry(root, store, bin_dir):
    make_program(bin_dir, "mutate", MUTATE)
    tools = ToolsConfig.model_validate({"run_command": {"allow": ["mutate"], "confine": "off"}})
    path = f"{bin_dir}:/usr/bin:/bin"
    return build_registry(tools, Sandbox(root), search_path=path, checkpoints=store)


def in_turn(turn, call):
    token = TURN.set(turn)
    try:
        return call()
    finally:
        TURN.reset(token)


def undo(store, root, force=False, **select):
    sandbox = Sandbox(root)
    write = lambda rel, data: sandbox.write_atomic(root / rel, data)  # noqa: E731
    return store.undo(store.select(**select), write, force=force)


def files(root):
    found = {}
    for folder, names, names_files in os.walk(root):
        names[:] = [n for n in names if n != ".gbr"]
        for name in names_files:
            path = os.path.join(folder, name)
            info = os.stat(path)
            data = Path(path).read_bytes()
            found[os.path.relpath(path, root)] = (data, info.st_mode & 0o7777)
    return found


def test_a_turn_that_edits_two_creates_one_and_deletes_one_is_undone_exactly(registry, store, root):
    """GBR-UNDO-01: bytes and modes come back; one line per path."""
    (root / "app.py").write_bytes(b"x = 1\n")
    (root / "b.txt").write_bytes(b"bee\n")
    os.chmod(root / "b.txt", 0o600)
    (root / "old.txt").write_bytes(b"old\n")
    before = files(root)

    def turn():
        assert not registry.call("write_file", {"path": "app.py", "content": "x = 2\n"}).is_error
        args = {"path": "b.txt", "old_string": "bee", "new_string": "wasp"}
        assert not registry.call("edit_file", args).is_error
        assert not registry.call("write_file", {"path": "stray.txt", "content": "s"}).is_error
        assert not registry.call("delete_path", {"path": "old.txt"}).is_error

    in_turn("t1", turn)
    assert files(root) != before
    lines = undo(store, root)
    assert lines == ["restored app.py", "restored b.txt", "recreated old.txt", "removed stray.txt"]
    assert files(root) == before


def test_undo_2_takes_back_two_turns_and_undo_of_undo_redoes(registry, store, root):
    (root / "a.txt").write_text("0")
    in_turn("t1", lambda: registry.call("write_file", {"path": "a.txt", "content": "1"}))
    in_turn("t2", lambda: registry.call("write_file", {"path": "a.txt", "content": "2"}))
    assert undo(store, root, turns=2) == ["restored a.txt"]
    assert (root / "a.txt").read_text() == "0"
    assert undo(store, root) == ["restored a.txt"]  # the undo was the last "turn"
    assert (root / "a.txt").read_text() == "2"


def test_a_conflict_stops_the_undo_before_any_change_and_force_goes_ahead(registry, store, root):
    in_turn("t1", lambda: registry.call("write_file", {"path": "a.txt", "content": "agent"}))
    in_turn("t1", lambda: registry.call("write_file", {"path": "b.txt", "content": "agent"}))
    (root / "b.txt").write_text("person")  # changed again since
    with pytest.raises(UndoConflict, match="b.txt") as caught:
        undo(store, root)
    assert caught.value.paths == ("b.txt",)
    assert (root / "a.txt").read_text() == "agent"  # nothing touched
    assert undo(store, root, force=True) == ["removed a.txt", "removed b.txt"]
    assert not (root / "a.txt").exists() and not (root / "b.txt").exists()


def test_a_peers_call_is_undone_by_its_alias(registry, store, root):
    (root / "a.txt").write_text("mine")
    token = CALLER.set(("12D3KooWpeer", "bob"))
    try:
        registry.call("write_file", {"path": "a.txt", "content": "bob's"})
    finally:
        CALLER.reset(token)
    [group] = [g for g in store.groups() if g.kind == "peer"]
    assert group.label == "bob" and group.paths == ("a.txt",)
    assert undo(store, root, peer="bob") == ["restored a.txt"]
    assert (root / "a.txt").read_text() == "mine"


def test_run_command_changes_are_undone(registry, store, root):
    (root / "keep.txt").write_text("keep")
    (root / "gone.txt").write_text("gone")
    result = in_turn("t1", lambda: registry.call("run_command", {"argv": ["mutate"]}))
    assert not result.is_error, result
    assert undo(store, root) == [
        "removed a.txt",
        "recreated gone.txt",
        "restored keep.txt",
        "removed made.txt",
    ]
    assert (root / "keep.txt").read_text() == "keep" and (root / "gone.txt").read_text() == "gone"
    assert not (root / "made.txt").exists()


def test_nothing_of_gbr_or_gbr_envs_or_git_is_checkpointed(registry, store, root):
    (root / ".gbr_envs").mkdir()
    (root / ".git").mkdir()
    in_turn("t1", lambda: registry.call("run_command", {"argv": ["mutate"]}))
    paths = {p for g in store.groups() for p in g.paths}
    assert paths == {"a.txt", "keep.txt", "made.txt"}
    assert (root / ".git" / "junk").exists() and (root / ".gbr_envs" / "junk").exists()
    db = sqlite3.connect(default_path(root))
    assert not db.execute("SELECT path FROM entries WHERE path LIKE '.%'").fetchall()


def test_the_prior_state_is_kept_before_the_change(store, root):
    """A kill -9 between the checkpoint and the change: the row and blob are committed
    by `begin` alone, so undo restores the prior state without a conflict check."""
    (root / "a.txt").write_text("before")
    store.begin(Owner("turn", "t1", "turn t1"), ["a.txt"])
    (root / "a.txt").write_text("half-written")  # the change, never settled
    other = CheckpointStore(default_path(root), root)  # a new process's view
    assert undo(other, root) == ["restored a.txt"]
    assert (root / "a.txt").read_text() == "before"


def test_the_storage_limit_evicts_the_oldest_groups_never_the_newest(root):
    store = CheckpointStore(default_path(root), root, max_bytes=3000)
    for n in range(4):
        (root / f"f{n}.bin").write_bytes(bytes([n]) * 1000)
        with store.changing(Owner("turn", f"t{n}", f"turn t{n}"), [f"f{n}.bin"]):
            (root / f"f{n}.bin").write_bytes(b"new")
    labels = [g.label for g in store.groups()]
    assert labels[0] == "t3" and "t0" not in labels
    assert len(labels) < 4
