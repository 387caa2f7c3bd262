"""The checkpoint service: the store of the profile in force, `/undo` and
`/checkpoints` (GBR-UNDO-01), and what each turn changed (GBR-TRUTH-01).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

import trio

from gbr_node.checkpoints.store import CheckpointStore, default_path, take_back
from gbr_node.config.loader import LoadedProfile
from gbr_node.errors import GbrError
from gbr_node.sandbox import Sandbox
from gbr_node.slash import Command

log = logging.getLogger("gbr_node")


class CheckpointService:
    """The checkpoint store (`store`) and the person's way back through it.

    `sandbox` gives the sandbox in force; `turn_running` says whether the agent's
    turn runs now (then `/undo` waits); `tell_model` adds a note to the model's
    history (a no-op without an agent).
    """

    commands = (
        Command("undo", "[N]", "take back the files the last (N) turns changed"),
        Command("checkpoints", "", "recent turns and peers' calls with the files each changed"),
    )

    def __init__(
        self,
        sandbox: Callable[[], Sandbox],
        turn_running: Callable[[], bool] = lambda: False,
        tell_model: Callable[[str], None] = lambda note: None,
    ) -> None:
        self._sandbox = sandbox
        self.turn_running = turn_running
        self.tell_model = tell_model
        self._for: tuple[object, ...] | None = None
        self._store: CheckpointStore | None = None

    @property
    def store(self) -> CheckpointStore:
        """The store of the profile in force; RuntimeError before the first profile."""
        if self._store is None:
            raise RuntimeError("the checkpoints have no profile yet")
        return self._store

    def apply_profile(self, loaded: LoadedProfile) -> None:
        """Open the store of `loaded`'s project and root, unless it is open already."""
        if self._for != (loaded.project_dir, loaded.root):
            if self._store is not None:
                self._store.close()
            self._for = (loaded.project_dir, loaded.root)
            self._store = CheckpointStore(default_path(loaded.project_dir), loaded.root)

    def changed_by_turn(self, turn: str) -> list[str] | None:
        """The files the agent's turn `turn` (its `TURN` id) changed, from the checkpoints
        (GBR-TRUTH-01: what the turn's end says, never the model's words); None when
        the store cannot be read."""
        try:
            return self.store.changed_by(f"turn {turn}")
        except sqlite3.Error as exc:
            log.warning("cannot read the checkpoints: %s", exc)
            return None

    async def command(self, name: str, args: str) -> str:
        """`/undo [N] [--force]`: take back the last N turns (GBR-UNDO-01), one line per
        path, and tell the model's history which of its changes were taken back;
        `/checkpoints`: the recent groups. The person's only: never a tool."""
        words = args.split()
        force = "--force" in words
        words = [w for w in words if w != "--force"]
        store = self.store
        if name == "checkpoints":
            groups = await trio.to_thread.run_sync(store.groups)
            return "\n".join(g.line() for g in groups) or "no checkpoints yet"
        if len(words) > 1 or (words and not words[0].isdigit()) or (words and words[0] == "0"):
            raise GbrError("usage: /undo [N] [--force]")
        turns = int(words[0]) if words else 1
        if self.turn_running():
            raise GbrError("a turn is running: wait for it to end (or Ctrl-C it), then /undo")
        sandbox = self._sandbox()
        lines = await trio.to_thread.run_sync(
            lambda: take_back(store, sandbox, turns=turns, force=force)
        )
        if lines:
            note = (
                "[the person undid your changes of the last "
                f"{'turn' if turns == 1 else f'{turns} turns'}: {'; '.join(lines)}. "
                "Read the files again before building on them.]"
            )
            self.tell_model(note)
        return "\n".join(lines) or "nothing to change: the files are as before"

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
