"""No tool changes the root while git runs there, or while an archive is
extracted (issue 12, "Commands").

`tools.git` reads a repository's effective config, then runs git with the
programs that config names switched off. A change made between the two (a
`write_file` of `sub/.git/config`, a `cp` over it, from a parallel tool call
or a peer's) would name a driver the first read never saw, which git would
then run. So a git run holds its root's lock exclusively from that read to its
end, and so does an extraction by tar or unzip from its check to its end (a
symlink out made by a parallel call after the check would lead its writes out
of the root). Every tool call that may change the root holds it shared: writes,
edits, moves and deletes, and every other command. Shared holders run
together; a waiting git run lets no new one in, so that it is not starved.

The lock is one per root folder for the whole process, so that calls made
through the registry of an older profile and of the new one exclude each
other too. It cannot stop a process that left its command's process group
(only an interpreter or a shell can do that, and such a program can run
anything anyway).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from gbr_node.errors import ToolError


class RootLock:
    """A shared/exclusive lock over one root (see the module doc). Blocking; for threads."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._sharing = 0
        self._exclusive = False
        self._waiting = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Held while a tool may change the root; waits while git runs or waits to."""
        with self._condition:
            self._condition.wait_for(lambda: not (self._exclusive or self._waiting))
            self._sharing += 1
        try:
            yield
        finally:
            with self._condition:
                self._sharing -= 1
                self._condition.notify_all()

    @contextlib.contextmanager
    def exclusive(self, timeout_s: float, program: str = "git") -> Iterator[None]:
        """Held by a git run from its config read to its end, and by an archive's
        extraction (`program`, named in the error) from its check to its end.

        Raises:
            ToolError: other tool calls still change the root after `timeout_s`
                seconds (a long command is running).
        """
        with self._condition:
            self._waiting += 1
            try:
                free = self._condition.wait_for(
                    lambda: not (self._exclusive or self._sharing), timeout_s
                )
            finally:
                self._waiting -= 1
                self._condition.notify_all()
            if not free:
                raise ToolError(
                    f"{program} waits for the tool calls changing the project to end, and they "
                    f"still ran after {timeout_s:g} s; try again when they are done"
                )
            self._exclusive = True
        try:
            yield
        finally:
            with self._condition:
                self._exclusive = False
                self._condition.notify_all()


_locks: dict[Path, RootLock] = {}
_locks_guard = threading.Lock()


def root_lock(root: Path) -> RootLock:
    """The lock of root folder `root` (resolved), the same object for every caller."""
    with _locks_guard:
        return _locks.setdefault(root, RootLock())
