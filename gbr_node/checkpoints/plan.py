"""What a checkpoint holds and what an undo does [pure] (GBR-UNDO-01).

A `State` is what one root-relative path held at a moment: a regular file's
content (its SHA-256, hex) and mode, or absent. An `Entry` is one path of one
checkpoint group (a turn of the local agent, a peer's call, a command-line or
MCP call, an undo): its state before the group's first change of it, and, once
the change is done (`settled`), its state after the group's last change.

`undo_plan(entries, current)` decides an undo of groups (newest first) without
touching anything: the state each path goes back to (the oldest group's prior
state), the line said for it, and the paths changed again since (conflicts: an
undo stops before any change unless forced). `excluded(relative)` says which
paths are never checkpointed nor restored; `to_evict` picks groups to drop when
the store is over its size or age limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

PRIVATE_TOP = (".gbr", ".gbr_envs")
"""Top-level folders of the node's own state: never checkpointed nor restored (GBR-PRIV-01)."""
PRIVATE_ANY = ".git"
"""A folder name never checkpointed at any depth (git keeps its own history)."""


@dataclass(frozen=True)
class State:
    """One path's state: `sha256` (hex) and `mode` (permission bits, 0o7777) of a
    regular file, or both None: absent."""

    sha256: str | None = None
    mode: int | None = None

    @property
    def absent(self) -> bool:
        """True when the path held no file."""
        return self.sha256 is None


ABSENT = State()


@dataclass(frozen=True)
class Entry:
    """Path `path` in group `group`: `prior` before the group changed it, `after` its
    state after the group's last change (None when not `settled`: the node stopped
    between the checkpoint and the end of the change)."""

    group: int
    path: str
    prior: State
    after: State | None


@dataclass(frozen=True)
class Step:
    """One path of an undo: make it `target`; `said` is the line for the person
    (`restored app.py`, `removed stray.txt`, `recreated old.txt`)."""

    path: str
    target: State
    said: str


@dataclass(frozen=True)
class UndoPlan:
    """An undo decided: its `steps` in path order, and the `conflicts` (paths changed
    since the checkpoint: their state now is not the one the group left)."""

    steps: tuple[Step, ...]
    conflicts: tuple[str, ...]


def excluded(relative: str) -> bool:
    """True for a root-relative POSIX path that is never checkpointed nor restored:
    under `.gbr/` or `.gbr_envs/`, inside any `.git/`, or not inside the root."""
    names = relative.split("/")
    return (
        not relative
        or relative.startswith("/")
        or ".." in names
        or names[0] in PRIVATE_TOP
        or PRIVATE_ANY in names
    )


def undo_plan(entries: Sequence[Entry], current: Mapping[str, State]) -> UndoPlan:
    """The undo of the groups whose `entries` are given, newest group first.

    Each path goes back to the prior state of the oldest group that changed it;
    it conflicts when its `current` state is not the `after` state of the newest
    group that changed it (a path whose change never settled does not conflict).
    A path already in its target state gets no step. Never raises.
    """
    newest: dict[str, Entry] = {}
    oldest: dict[str, Entry] = {}
    for entry in entries:
        newest.setdefault(entry.path, entry)
        oldest[entry.path] = entry
    steps = []
    conflicts = []
    for path in sorted(newest):
        now = current.get(path, ABSENT)
        after = newest[path].after
        if after is not None and after != now:
            conflicts.append(path)
        target = oldest[path].prior
        if target == now:
            continue
        if target.absent:
            said = f"removed {path}"
        elif now.absent:
            said = f"recreated {path}"
        else:
            said = f"restored {path}"
        steps.append(Step(path, target, said))
    return UndoPlan(tuple(steps), tuple(conflicts))


def to_evict(
    groups: Sequence[tuple[int, float, int]], now: float, max_bytes: int, max_age_s: float
) -> list[int]:
    """The groups to drop, oldest first: `groups` are (id, created in seconds since the
    epoch, bytes of the blobs only it holds), oldest first. Groups older than
    `max_age_s` go, then the oldest until the rest fit in `max_bytes`; the newest
    group is never dropped."""
    dropped: list[int] = []
    total = sum(size for _, _, size in groups)
    for group, created, size in groups[:-1]:
        if now - created <= max_age_s and total <= max_bytes:
            break
        dropped.append(group)
        total -= size
    return dropped


@dataclass(frozen=True)
class Owner:
    """Whom a change is for: `kind` "turn" (a turn of the local agent), "peer" (one
    inbound call of a trusted peer), "call" (a `gbr-node tool` or MCP client's call,
    an approved write) or "undo"; `label` is what the person sees (a turn's id, the
    peer's alias); `key` is unique per group (a turn's tool calls share it)."""

    kind: str
    label: str
    key: str
