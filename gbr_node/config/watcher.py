"""Hot reload of the active environment profile (ADR-0012a): the polling task.

`ProfileWatcher` polls the metadata of every file the active profile came
from (`LoadedProfile.source_files`: `.gbr_envs/NAME.toml` and its
`system_prompt_file`, if any) every `poll_interval_s` seconds, with plain
`os.stat` (no inotify or other native dependency). The decisions (did a
file change, which keys changed, report a failure now or not) are the pure
functions of `config.changes`; this module does the I/O around them.

On a change it reloads the profile in a worker thread and sends on its
channel, to the node:

- `UpdateEnv(system_prompt, changed, snapshot=new LoadedProfile, loosened)`
  when the new profile is valid and differs in effect (`changed` names the
  top-level keys, `loosened` every way the new rules allow more). A save
  that leaves the effective profile as it was (`touch`, an edited comment)
  sends nothing.
- `ProfileRejected(file, line, key, message)` when it is broken (syntax,
  unknown key, wrong type, missing root or prompt file) or the profile file
  was deleted. A failure waits one more poll before it is reported (a file
  caught half-written is usually whole by then) and each distinct failure
  is reported once. The previous profile stays in force; nothing crashes.

A new profile takes effect only once it has held still (issue 12, GBR-FAIL-01):
its files are read by the load, and read again `HOLD_S` (500 ms) later, and
it is applied only when both reads are equal and no file's metadata moved in
between. An in-place save caught between the writer's two writes can parse
as a valid profile with keys missing; held for 500 ms, it is seen whole at a
later poll instead. A load that changes nothing in effect needs no hold, and
a broken one changes nothing anyway (an empty file is a broken profile, see
`config.validate`). The `UpdateEnv` says when the new rules are looser
(`config.loosen`), so that the announcement can say so.

Every file is observed *before* the load that its fingerprint vouches for,
so a save racing a reload is seen at the next poll. A file the last
observation did not cover (at start, after a switch, or a newly referenced
prompt file) is unknown: the next poll reloads once to confirm, and sends
nothing when the profile is the same.
"""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn, TypeVar

import trio

from gbr_node.config.changes import (
    FileStamp,
    Fingerprint,
    ReloadGate,
    Verdict,
    compare,
    content_digest,
    fingerprint,
    needs_hash,
    profile_changes,
)
from gbr_node.config.events import ProfileRejected, UpdateEnv
from gbr_node.config.loader import LoadedProfile, load_profile, read_source
from gbr_node.config.loosen import loosenings
from gbr_node.errors import ProfileError


@dataclass(frozen=True)
class WatcherStatistics:
    """Counters since the watcher was made: polls done, files hashed, profiles loaded."""

    polls: int
    hashes: int
    loads: int


Outcome = UpdateEnv | ProfileRejected | None
_O = TypeVar("_O", bound=Outcome)

HOLD_S = 0.5
"""Seconds a new profile's files must hold still, read equal at both ends, before
it takes effect: editors' two-step saves (truncate, write; write, rename) are
over well within it, and a file caught between two writes may parse yet be
none of what the person saved."""

RELOAD_ATTEMPTS = 4
"""Holds `/env reload` waits through while the profile is still being written."""


class ProfileWatcher:
    """Keeps one profile of one project in force and reports its changes (ADR-0012a).

    `current` is the profile the node runs with now (its name and project
    folder say what to watch); messages go to `send`. `poll_interval_s`
    (seconds, > 0) fixes the interval; when None the active profile's
    `[watch] poll_interval_s` is used, so a reload may change it.

    Raises ValueError when `poll_interval_s` is not a positive number. Sending
    on a closed channel raises trio's ClosedResourceError or
    BrokenResourceError from whichever method was sending.
    """

    def __init__(
        self,
        current: LoadedProfile,
        send: trio.MemorySendChannel[UpdateEnv | ProfileRejected],
        *,
        poll_interval_s: float | None = None,
    ) -> None:
        if poll_interval_s is not None and not poll_interval_s > 0:
            raise ValueError(f"poll_interval_s must be a positive number, got {poll_interval_s!r}")
        self._active = current
        self._send = send
        self._interval = poll_interval_s
        self._fingerprints: dict[pathlib.Path, Fingerprint] = {}
        self._gate = ReloadGate()
        self._unsettled = False
        self._lock = trio.Lock()
        self._polls = self._hashes = self._loads = 0

    @property
    def active(self) -> LoadedProfile:
        """The profile in force: the last valid one loaded or switched to."""
        return self._active

    @property
    def poll_interval_s(self) -> float:
        """Seconds between polls: the fixed interval, else the active profile's."""
        return self._interval or self._active.profile.watch.poll_interval_s

    def statistics(self) -> WatcherStatistics:
        """Counters of work done so far."""
        return WatcherStatistics(self._polls, self._hashes, self._loads)

    async def run(
        self,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,  # type: ignore[name-defined]  # stale trio-typing stubs (see pyproject)
    ) -> NoReturn:
        """Poll until cancelled. The first poll (which reloads once to confirm
        `current` is still what is on disk) is done before `task_status.started()`,
        so any save made after `nursery.start(watcher.run)` returns is seen."""
        await self.poll_once()
        task_status.started()
        while True:
            await trio.sleep(self.poll_interval_s)
            await self.poll_once()

    async def poll_once(self) -> Outcome:
        """One poll, as `run` does it: stat the watched files, hash only those
        the rule of `config.changes` asks for, reload only when something
        changed or the last reload failed. Returns what was sent, or None.

        Cancellation leaves the watcher as before the poll: the change is seen again."""
        async with self._lock:
            return await self._check(force=False)

    async def check_now(self) -> Outcome:
        """Reload now, changed files or not (`/env reload`). A failure is sent at
        once, even if it was reported before. A save caught while it is being
        written is read again, up to `RELOAD_ATTEMPTS` holds, so that a reload
        asked for during a save applies it. Returns what was sent, or None when
        the profile on disk is in effect the one in force (or was still being
        written after those attempts: the next poll takes it)."""
        async with self._lock:
            for _ in range(RELOAD_ATTEMPTS):
                self._unsettled = False
                outcome = await self._check(force=True)
                if not self._unsettled:
                    return outcome
            return None

    async def switch(self, name: str) -> UpdateEnv | ProfileRejected:
        """Load profile `name` of the same project and put it in force (`/env use NAME`).

        Sends (and returns) `UpdateEnv`, even when no key differs, since the
        active profile's name changed; or `ProfileRejected` when `name` is
        invalid, missing or broken, and the active profile stays as it was."""
        async with self._lock:
            outcome = await self._load(name)
            if isinstance(outcome, LoadedProfile) and not await self._held_still(outcome):
                outcome = ProfileError(
                    "the profile changed while it was read (a save in progress?); "
                    "nothing was switched, try again",
                    file=str(outcome.file),
                )
            if isinstance(outcome, ProfileError):
                return await self._apply(
                    _rejection(outcome), self._active, self._fingerprints, self._gate
                )
            update = self._update(outcome, profile_changes(self._active, outcome))
            return await self._apply(update, outcome, {}, ReloadGate())

    async def _check(self, *, force: bool) -> Outcome:
        observed = await self._observe(self._active.source_files)
        self._polls += 1
        verdict = compare(self._fingerprints, observed)
        if verdict is Verdict.UNCHANGED and not force and not self._gate.retrying:
            self._fingerprints = observed
            return None
        outcome = await self._load(self._active.name)
        if isinstance(outcome, LoadedProfile):
            changed = profile_changes(self._active, outcome)
            # after a reported breakage, a fixed file is news even with nothing changed
            if not changed and self._gate.reported is None:
                return await self._apply(None, outcome, observed, ReloadGate())
            if not await self._held_still(outcome):
                self._unsettled = True
                return None  # still being written: the next poll reads it again
            update = self._update(outcome, changed)
            return await self._apply(update, outcome, observed, ReloadGate())
        rejection = _rejection(outcome)
        profile_file = self._active.file
        missing = profile_file in observed and observed[profile_file].stamp is None
        if missing and rejection.file == str(profile_file):
            rejection = ProfileRejected(
                str(profile_file),
                None,
                None,
                f"the profile file is missing (deleted or moved away); profile "
                f"{self._active.name!r} stays in force as last loaded until the file is back",
            )
        key = (rejection, tuple(fp.digest for fp in observed.values()))
        gate, report = self._gate.after_failure(key, force=force)
        return await self._apply(rejection if report else None, self._active, observed, gate)

    async def _apply(
        self,
        message: _O,
        active: LoadedProfile,
        fingerprints: dict[pathlib.Path, Fingerprint],
        gate: ReloadGate,
    ) -> _O:
        """Commit the decided state, then send `message`; a send that is cancelled or
        fails puts the previous state back, so the next poll decides again."""
        previous = self._active, self._fingerprints, self._gate
        self._active, self._fingerprints, self._gate = active, fingerprints, gate
        if message is not None:
            try:
                await self._send.send(message)
            except BaseException:
                self._active, self._fingerprints, self._gate = previous
                raise
        return message

    def _update(self, loaded: LoadedProfile, changed: tuple[str, ...]) -> UpdateEnv:
        loosened = loosenings(self._active, loaded)
        return UpdateEnv(loaded.system_prompt, changed, snapshot=loaded, loosened=loosened)

    async def _held_still(self, loaded: LoadedProfile) -> bool:
        """True when the files `loaded` was read from keep their metadata for HOLD_S
        seconds and then still hold the bytes the load read (a second read)."""
        files = loaded.source_files
        stamps = [_stamp(path) for path in files]
        await trio.sleep(HOLD_S)
        digests = await trio.to_thread.run_sync(_digests, files)
        self._hashes += len(files)
        still = [_stamp(path) for path in files] == stamps
        return still and tuple(digests[path] for path in files) == loaded.source_digests

    async def _observe(self, paths: Sequence[pathlib.Path]) -> dict[pathlib.Path, Fingerprint]:
        """Fingerprints of `paths`: stat each on the event loop (one syscall per
        file and poll, the idle cost; a worker thread per poll would cost more
        than the stat), read and hash in a worker thread only the files the
        rule of `config.changes` asks for."""
        now_ns = time.time_ns()
        stamps = {path: _stamp(path) for path in paths}
        to_hash = [p for p, stamp in stamps.items() if needs_hash(self._fingerprints.get(p), stamp)]
        digests = {p: fp.digest for p, fp in self._fingerprints.items() if p not in to_hash}
        if to_hash:
            digests.update(await trio.to_thread.run_sync(_digests, to_hash))
            self._hashes += len(to_hash)
        return {
            path: fingerprint(stamp, digests.get(path) if stamp is not None else None, now_ns)
            for path, stamp in stamps.items()
        }

    async def _load(self, name: str) -> LoadedProfile | ProfileError:
        self._loads += 1
        project_dir = self._active.project_spelling  # keeps the root's symlinked spellings
        try:
            return await trio.to_thread.run_sync(load_profile, project_dir, name)
        except ProfileError as exc:
            return exc


def _rejection(error: ProfileError) -> ProfileRejected:
    return ProfileRejected(error.file, error.line, error.key, error.message)


def _stamp(path: pathlib.Path) -> FileStamp | None:
    try:
        return FileStamp.of(os.stat(path))
    except OSError:
        return None


def _digests(paths: Sequence[pathlib.Path]) -> dict[pathlib.Path, bytes | None]:
    return {path: _digest(path) for path in paths}


def _digest(path: pathlib.Path) -> bytes | None:
    """BLAKE2b-128 of the file's bytes, or None when it cannot be read (or is no
    regular file: a FIFO must not block the poll)."""
    try:
        return content_digest(read_source(path))
    except OSError:
        return None
