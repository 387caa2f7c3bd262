"""Applying approved changes exactly once (issue 6, "Telling" and "Conflicts").

`apply` performs an approved write, delete or move and records `Applied` or
`Failed`, all while holding the log's write lock (`BEGIN IMMEDIATE`): that
lock is the claim. Two processes applying the same id take turns; the second
finds the `Applied`/`Failed` event and does nothing (`Settled(now=False)`).

Crash safety: if the process dies after the change reached the disk but
before `Applied` was committed, SQLite rolls the transaction back and the
lock dies with the process. The approval is still `approved`, and the next
`apply` first checks whether the change is already on disk (the file's
SHA-256 equals that of the content to write; a deleted path is gone; a moved
source is gone and the destination has the source's fingerprint): if so it
records `Applied` without touching the disk again. A crash before the change
reached the disk leaves the path as it was, so the next `apply` performs it.
The disk thus changes at most once, and `Applied` is recorded exactly once.

Nothing is written unless the approval is `approved`, i.e. an `Approved` or
`Edited` event is in the log (EVD-DEV-01/02). If the path's fingerprint
differs from the one the approval was made against, nothing is written and a
`Conflict` is returned; `approve_and_apply(force=True)` re-approves against
the current content.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from gbr_node.approvals.review import unified_diff
from gbr_node.approvals.state import Applied, Approval, Failed, InvalidDecision
from gbr_node.errors import SecurityViolation, ToolError
from gbr_node.sandbox import Sandbox

if TYPE_CHECKING:
    from gbr_node.approvals.log import ApprovalLog

MOVED_ELSEWHERE = "the path resolves elsewhere than when the change was requested"


@dataclass(frozen=True)
class Settled:
    """The approval is final: `approval.status` is applied, failed or rejected.
    `now` is True if this call recorded it, False if it already was."""

    approval: Approval
    now: bool = False


@dataclass(frozen=True)
class Conflict:
    """Nothing was written: the path changed since the approval's base.

    `expected_hash` / `current_hash`: fingerprints (None = absent);
    `diff`: unified diff lines from the current content to the content that
    would be written (empty for moves, and for binary files or folders).
    """

    approval: Approval
    expected_hash: str | None
    current_hash: str | None
    diff: list[str]


ApplyOutcome = Settled | Conflict


def fingerprint(path: str | os.PathLike[str]) -> str | None:
    """Fingerprint of what is at `path` now, without following a final symlink.

    A regular file: the hex SHA-256 of its bytes. A symlink: "link:" + SHA-256
    of its target text. A folder: "tree:" + SHA-256 over its sorted entries'
    relative names and fingerprints. None when nothing is there. Raises
    ToolError when it cannot be read.
    """
    try:
        if os.path.islink(path):
            return "link:" + hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()
        if os.path.isdir(path):
            digest = hashlib.sha256()
            for entry in sorted(os.listdir(path)):
                digest.update(f"{entry}\0{fingerprint(os.path.join(path, entry))}\n".encode())
            return "tree:" + digest.hexdigest()
        digest = hashlib.sha256()
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 16), b""):
                digest.update(block)
        return digest.hexdigest()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ToolError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from exc


def text_hash(text: str) -> str:
    """`fingerprint` of a file holding `text` in UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _entry_path(sandbox: Sandbox, relative: str, *, follow: bool) -> Path:
    """The filesystem entry for root-relative `relative`: resolved through
    symlinks when `follow`, else the final symlink itself (as the move and
    delete tools act on it). Raises SecurityViolation outside the root."""
    where = sandbox.resolve(relative)
    name = PurePosixPath(relative).name
    if follow or name in ("", ".", ".."):
        return where.path
    parent = sandbox.resolve(str(PurePosixPath(relative).parent))
    link = parent.path / name
    return link if link.is_symlink() else where.path


def current_hash(approval: Approval, sandbox: Sandbox) -> str | None:
    """Fingerprint now of the approval's path (a move's source). Raises
    SecurityViolation if it no longer resolves to the requested absolute path,
    ToolError if unreadable."""
    return fingerprint(_checked(approval, sandbox, approval.path))


def find_conflict(approval: Approval, sandbox: Sandbox) -> Conflict | None:
    """A `Conflict` if the path's fingerprint differs from `approval.base_hash`, else None."""
    now = current_hash(approval, sandbox)
    if now == approval.base_hash:
        return None
    return Conflict(approval, approval.base_hash, now, pending_diff(approval, sandbox))


def pending_diff(approval: Approval, sandbox: Sandbox) -> list[str]:
    """Unified diff lines from the path's current content to what applying
    would leave there (all lines removed for a delete); empty for a move, a
    folder, a link or a binary file. Raises as `current_hash`."""
    if approval.tool == "move_path":
        return []
    path = _checked(approval, sandbox, approval.path)
    return unified_diff(_text_or_none(path), approval.content, approval.path)


def apply(log: ApprovalLog, approval_id: int, sandbox: Sandbox, *, by: str) -> ApplyOutcome:
    """Perform approved change `approval_id` under `sandbox`, at most once, and
    record `Applied` (or `Failed` when the sandbox refuses or the OS fails:
    the ToolError/SecurityViolation message becomes the event's error).

    Returns `Settled(now=True)` when this call recorded the outcome,
    `Settled(now=False)` when it was already settled (applied, failed or
    rejected), `Conflict` when the path changed since the approval (nothing
    written or recorded). Raises
    UnknownApproval, InvalidDecision if still pending, ApprovalLogError.
    Blocking: holds the log's write lock while the disk changes.
    """
    with log.transaction() as tx:
        approval = tx.approval(approval_id)
        if approval.settled:
            return Settled(approval)
        if approval.status != "approved":
            raise InvalidDecision(approval_id, approval.status, "Applied", ": decide it first")
        try:
            if not _already_done(approval, sandbox):
                conflict = find_conflict(approval, sandbox)
                if conflict is not None:
                    return conflict
                _perform(approval, sandbox)
        except (ToolError, SecurityViolation) as exc:
            failed = Failed(approval_id=approval_id, at=time.time(), by=by, error=str(exc))
            return Settled(tx.append(failed, approval), now=True)
        applied = Applied(approval_id=approval_id, at=time.time(), by=by)
        return Settled(tx.append(applied, approval), now=True)


def approve_and_apply(
    log: ApprovalLog,
    approval_id: int,
    sandbox: Sandbox,
    *,
    by: str,
    force: bool = False,
    content: str | None = None,
) -> ApplyOutcome:
    """The operator's "approve" (or "edit", when `content` is given): check for
    a conflict and record `Approved`/`Edited` (one transaction, so a racing
    applier's write is never mistaken for a conflict), then `apply`.

    On a conflict without `force`, nothing is recorded and the `Conflict` is
    returned (the approval stays as it was); with `force` the current
    fingerprint becomes the base (issue 6, "Conflicts"). A settled approval
    is returned as `Settled`, so two terminals approving the same id both
    learn the one outcome. Raises UnknownApproval, InvalidDecision (an edit of
    a delete or move), ApprovalLogError; SecurityViolation/ToolError if the
    path cannot be checked.
    """
    with log.transaction() as tx:
        approval = tx.approval(approval_id)
        if approval.settled:
            return Settled(approval)
        now = current_hash(approval, sandbox)
        if now != approval.base_hash and not force and not _already_done(approval, sandbox):
            return Conflict(approval, approval.base_hash, now, pending_diff(approval, sandbox))
        tx.decide(approval, by=by, force=force, current_hash=now, content=content)
    return apply(log, approval_id, sandbox, by=by)


def _checked(approval: Approval, sandbox: Sandbox, relative: str) -> Path:
    """The entry for `relative`; for the approval's own path it must still be
    the absolute path recorded at request time."""
    path = _entry_path(sandbox, relative, follow=approval.tool not in ("move_path", "delete_path"))
    if relative == approval.path and str(path) != approval.absolute:
        raise SecurityViolation(MOVED_ELSEWHERE, relative)
    return path


def _destination(approval: Approval) -> str:
    destination = approval.detail.get("destination")
    if not isinstance(destination, str):
        raise ToolError(f"approval #{approval.id} is a move without a destination")
    return destination


def _already_done(approval: Approval, sandbox: Sandbox) -> bool:
    """True if the change is on disk already (a crash after the change and
    before `Applied` was committed, or someone made the same change)."""
    path = _checked(approval, sandbox, approval.path)
    if approval.tool == "delete_path":
        return not os.path.lexists(path)
    if approval.tool == "move_path":
        destination = _checked(approval, sandbox, _destination(approval))
        return not os.path.lexists(path) and fingerprint(destination) == approval.base_hash
    return approval.content is not None and fingerprint(path) == text_hash(approval.content)


def _perform(approval: Approval, sandbox: Sandbox) -> None:
    """Make the change. Raises ToolError (OS failure, existing move
    destination) or SecurityViolation (a symlink planted on the way)."""
    path = _checked(approval, sandbox, approval.path)
    try:
        if approval.tool == "move_path":
            destination = _checked(approval, sandbox, _destination(approval))
            if os.path.lexists(destination):
                raise ToolError(f"{_destination(approval)} already exists; nothing was moved")
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.rename(path, destination)
        elif approval.tool == "delete_path":
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                os.unlink(path)
        elif approval.content is not None:
            sandbox.write_atomic(path, approval.content.encode("utf-8"))
        else:
            raise ToolError(f"approval #{approval.id}: {approval.tool} has no content to write")
    except OSError as exc:
        raise ToolError(f"cannot apply {approval.tool} on {approval.path}: {exc}") from exc


def _text_or_none(path: Path) -> str | None:
    """The UTF-8 text of the file at `path`; "" when absent; None for folders,
    links, binary or unreadable files."""
    if not os.path.lexists(path):
        return ""
    if path.is_symlink() or not path.is_file():
        return None
    try:
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
