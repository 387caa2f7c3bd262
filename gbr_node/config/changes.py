"""Decisions of profile hot reload (ADR-0012a) [pure]: stat results and hashes in, verdicts out.

No files are read here and nothing is awaited: `config.watcher` stats and
hashes the files and drives these functions. Three decisions live here:

1. **Did a watched file change?** A file's `Fingerprint` is its metadata
   (`FileStamp`: device, inode, size, mtime and ctime in nanoseconds) plus a
   content digest. Metadata alone is not enough: an editor can save twice
   within one timestamp tick with the same size, and `touch` changes the
   metadata but not the content. The rule (after git's "racy clean" check):

   - a file is hashed when its metadata differs from the recorded stamp, or
     when the recorded fingerprint is not yet *settled*;
   - a fingerprint is settled when, at the moment the file was observed, its
     newest timestamp (max of mtime and ctime) was at least `RACY_WINDOW_NS`
     old. Any later write then lands in a later timestamp tick and changes the
     metadata, so an unchanged stamp proves unchanged content without hashing;
   - the file changed when its digest differs (so `touch` alone is no change);
     `compare` turns two polls of the set into UNCHANGED, CHANGED or VANISHED.

   `RACY_WINDOW_NS` is 3 s: the coarsest common granularity is 2 s (FAT,
   exFAT), 1 s on ext3, HFS+ and some NFS servers, and ext4/APFS/NTFS stamps
   come from a coarse kernel clock (milliseconds); one more second covers
   clock jitter. Idle cost: one stat per file per poll, and a just-saved file
   is hashed on each poll for its first 3 s only.

2. **Which keys changed?** `profile_changes` names the top-level profile keys
   that differ between two loaded snapshots, for the REPL's one-line notice
   `profile default reloaded: system_prompt, protected_files`.

3. **Report a failed reload now, later, or never?** `ReloadGate`: a failure
   gets one more poll before it is reported (the file may be caught
   half-written), and each distinct failure is reported once, not every poll.
"""

from __future__ import annotations

import enum
import hashlib
import os
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from pathlib import PurePath

    from gbr_node.config.profile import Profile

RACY_WINDOW_NS = 3_000_000_000

P = TypeVar("P", bound=Hashable)


class Snapshot(Protocol):
    """What these decisions read of a loaded profile; `loader.LoadedProfile` is one.

    Named here rather than imported from `config.loader` so that this pure
    module depends on no module that reads files (docs/architecture.md, "Layers").
    """

    @property
    def profile(self) -> Profile:
        """The validated profile."""
        ...

    @property
    def system_prompt(self) -> str:
        """The effective system prompt (inline, or the text of `system_prompt_file`)."""
        ...

    @property
    def root(self) -> PurePath:
        """`allowed_root`, absolute and resolved."""
        ...


@dataclass(frozen=True)
class FileStamp:
    """The metadata of one file that a save changes; times in nanoseconds since the epoch."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileStamp:
        """The stamp of an `os.stat` result."""
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True)
class Fingerprint:
    """What was seen of one file at one poll.

    `stamp` is None when the file is missing (or cannot be stat'ed); `digest`
    is None when it is missing or could not be read; `settled` says whether an
    equal stamp at a later poll proves equal content (see the module doc).
    """

    stamp: FileStamp | None
    digest: bytes | None
    settled: bool


def content_digest(data: bytes) -> bytes:
    """The digest that stands for a file's bytes: BLAKE2b-128."""
    return hashlib.blake2b(data, digest_size=16).digest()


def needs_hash(previous: Fingerprint | None, stamp: FileStamp | None) -> bool:
    """True when the file's content must be hashed to know whether it changed.

    `previous` is the fingerprint recorded at the last poll (None: never seen);
    `stamp` is this poll's metadata (None: the file is missing, nothing to hash).
    """
    if stamp is None:
        return False
    return previous is None or previous.stamp != stamp or not previous.settled


def fingerprint(stamp: FileStamp | None, digest: bytes | None, now_ns: int) -> Fingerprint:
    """The fingerprint of a file observed with `stamp` and `digest`.

    `now_ns` is the wall clock (`time.time_ns()`) taken *before* the stat, so
    that "settled" never claims more than was seen.
    """
    settled = stamp is not None and now_ns - max(stamp.mtime_ns, stamp.ctime_ns) >= RACY_WINDOW_NS
    return Fingerprint(stamp, digest, settled)


class Verdict(enum.Enum):
    """Outcome of comparing two polls of the watched files."""

    UNCHANGED = "unchanged"
    CHANGED = "changed"
    VANISHED = "vanished"


def compare(previous: Mapping[P, Fingerprint], current: Mapping[P, Fingerprint]) -> Verdict:
    """Compare this poll's fingerprints (`current`, keyed by file) with the last ones.

    VANISHED when any watched file disappeared, else CHANGED when any file
    changed, else UNCHANGED. A file absent from `previous` counts as changed:
    its content is unknown, so the caller must reload to learn it. A file
    missing at both polls is unchanged; one that came back (re-created) changed.
    """
    verdict = Verdict.UNCHANGED
    for path, now in current.items():
        before = previous.get(path)
        if before is not None and before.stamp is not None and now.stamp is None:
            return Verdict.VANISHED
        if _differs(before, now):
            verdict = Verdict.CHANGED
    return verdict


def _differs(before: Fingerprint | None, now: Fingerprint) -> bool:
    if before is None or (before.stamp is None) != (now.stamp is None):
        return True
    return now.stamp is not None and before.digest != now.digest


def profile_changes(old: Snapshot, new: Snapshot) -> tuple[str, ...]:
    """Top-level profile keys whose effective value differs, in the profile's key order.

    `system_prompt` is named when the effective prompt text differs (inline or
    read from `system_prompt_file`); `system_prompt_file` when the file it names
    changed; `allowed_root` when the key or the directory it resolves to
    changed. Empty when both snapshots are in effect the same profile.
    """
    names = []
    for key in type(new.profile).model_fields:
        if key == "system_prompt":
            differs = old.system_prompt != new.system_prompt
        elif key == "allowed_root":
            differs = old.profile.allowed_root != new.profile.allowed_root or old.root != new.root
        else:
            differs = getattr(old.profile, key) != getattr(new.profile, key)
        if differs:
            names.append(key)
    return tuple(names)


@dataclass(frozen=True)
class ReloadGate:
    """When to report a failed reload (ADR-0012a: "a broken file is reported").

    An immutable value: each method returns the next gate, so the watcher can
    decide, send, and only then commit. `after_failure(key)` takes a hashable
    identity of the failure (the error and the digests of the content that
    caused it) and says whether to report it now:

    - a failure not seen on the previous poll waits one poll (a half-written
      file is usually complete by then), unless `force` (an explicit request
      such as `/env reload`, answered at once);
    - a failure equal to the last reported one is not reported again.

    A valid load starts afresh: `ReloadGate()`. While `retrying` is True the
    watcher reloads on every poll, changed files or not: the outcome may also
    depend on things it does not watch (a missing `allowed_root` or prompt
    file being created).
    """

    suspect: Hashable | None = None
    reported: Hashable | None = None

    @property
    def retrying(self) -> bool:
        """True after a failure, until the next valid load."""
        return self.suspect is not None or self.reported is not None

    def after_failure(self, key: Hashable, *, force: bool = False) -> tuple[ReloadGate, bool]:
        """The next gate after a failed reload, and True when it is to be reported now."""
        if not force:
            if key == self.reported:
                return ReloadGate(None, self.reported), False
            if self.suspect is None:
                return ReloadGate(key, self.reported), False
        return ReloadGate(None, key), True
