"""The root lock: changes share it, a git run holds it alone (issue 12, `tools.rootlock`)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from gbr_node.errors import ToolError
from gbr_node.tools.rootlock import RootLock, root_lock


def test_changes_run_together_and_git_waits_for_them_then_runs_alone() -> None:
    lock = RootLock()
    order: list[str] = []
    with lock.shared(), lock.shared():  # two changes at once
        waiter = threading.Thread(target=lambda: _exclusive(lock, order))
        waiter.start()
        time.sleep(0.05)  # git is waiting
        assert order == []
        late = threading.Thread(target=lambda: _shared(lock, order))
        late.start()  # a change asked for while git waits comes after it
        order.append("changes done")
    waiter.join(5)
    late.join(5)
    assert order == ["changes done", "git", "late change"]


def _exclusive(lock: RootLock, order: list[str]) -> None:
    with lock.exclusive(5):
        order.append("git")


def _shared(lock: RootLock, order: list[str]) -> None:
    with lock.shared():
        order.append("late change")


def test_git_gives_up_with_a_clear_error_when_changes_go_on() -> None:
    lock = RootLock()
    with (
        lock.shared(),
        pytest.raises(ToolError, match="still ran after 0.05 s"),
        lock.exclusive(0.05),
    ):
        pass
    with lock.exclusive(0.05):  # nothing is left held
        pass


def test_one_lock_per_root_for_every_registry() -> None:
    assert root_lock(Path("/a")) is root_lock(Path("/a"))
    assert root_lock(Path("/a")) is not root_lock(Path("/b"))
