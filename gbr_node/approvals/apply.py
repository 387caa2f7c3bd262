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

Format and check on approval (UBQ-DEV-02, UNW-AI-01; issue 17): a protected
write's content is formatted only once approved, like any write (`checks`:
the profile's `CheckRunner`): the formatter runs on the approved (or edited)
content, when the file is new or was formatted before; the check's baseline
is taken then, before the write. Both run before the log's write lock is
taken (`prepare`). `Applied` says what the formatter did (`note`) and, when a
check covers the file, `checking`; the check runs once `Applied` is committed
and its outcome is recorded as `Checked`, which the running node passes on to
the requester. A crash after writing formatted text is recognised on the next
`apply` by the formatted text's fingerprint.

Checkpoints (GBR-UNDO-01): with a `checkpoints` store, the prior state of the
paths an approved (or edited) change touches is kept before the disk changes,
in the group of whoever asked (`owner_of`): the agent's turn when the request
recorded it, else one group per approval labelled by the peer's alias, or
"command" / "MCP client". The group's key is the approval's id, so an `apply`
repeated after a crash keeps the first prior state.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from gbr_node.approvals.review import unified_diff
from gbr_node.approvals.state import Applied, Approval, Checked, Failed, InvalidDecision
from gbr_node.checkpoints.plan import Owner
from gbr_node.checkpoints.store import CheckpointStore, keeping
from gbr_node.checks.plan import FormatOutcome
from gbr_node.checks.verdict import Verdict, format_note
from gbr_node.errors import SecurityViolation, ToolError
from gbr_node.sandbox import Sandbox
from gbr_node.sandbox.caller import CLI, LOCAL, MCP

if TYPE_CHECKING:
    from gbr_node.approvals.log import ApprovalLog
    from gbr_node.tools.files import SaveChecks

MOVED_ELSEWHERE = "the path resolves elsewhere than when the change was requested"
TEXT_TOOLS = ("write_file", "edit_file")


@dataclass(frozen=True)
class Settled:
    """The approval is final: `approval.status` is applied, failed or rejected.
    `now` is True if this call recorded it, False if it already was. For a
    write this call applied: `formatted`, what format on save did (None: no
    formatter ran), and `verdicts`, the write check's (empty: none ran)."""

    approval: Approval
    now: bool = False
    formatted: FormatOutcome | None = None
    verdicts: tuple[Verdict, ...] = ()


@dataclass(frozen=True)
class Prepared:
    """Format and baseline of an approved write, made before the write lock.

    `seen`: the path's fingerprint they were made against; `content`: the
    approved text they are for; `formatted`: the formatter's outcome; `fresh`:
    `seen` was the base to apply against (else `formatted` only serves to
    recognise a crash after a formatted write); `after`: runs the check once
    written and judges it against the baseline (None: no check covers it).
    """

    seen: str | None
    content: str
    formatted: FormatOutcome
    fresh: bool
    after: Callable[[], Sequence[Verdict]] | None


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


def prepare(
    approval: Approval,
    sandbox: Sandbox,
    checks: SaveChecks | None,
    *,
    content: str | None = None,
    base: str | None | bool = False,
) -> Prepared | None:
    """Format `content` (default: the approval's) as the file it will replace
    allows, and take the check's baseline (issue 17). `base`: the fingerprint
    it will be applied against (default: the approval's `base_hash`). None for
    a delete or move, without checks, or when the file holds that text
    already. Blocking (runs the formatter and the baseline check); raises as
    `current_hash`."""
    text = approval.content if content is None else content
    if checks is None or approval.tool not in TEXT_TOOLS or text is None:
        return None
    path = _checked(approval, sandbox, approval.path)
    seen = fingerprint(path)
    if seen == text_hash(text):
        return None
    expected = approval.base_hash if base is False else base
    if seen != expected:
        return Prepared(seen, text, checks.format(approval.path, None, text), False, None)
    before = None
    if seen is not None:
        # a file that is not text (None) is never formatted: NUL is no formatter's output
        before = _text_or_none(path)
        before = "\x00" if before is None else before
    formatted = checks.format(approval.path, before, text)
    return Prepared(seen, text, formatted, True, checks.peer_check(approval.path))


def apply(
    log: ApprovalLog,
    approval_id: int,
    sandbox: Sandbox,
    *,
    by: str,
    checks: SaveChecks | None = None,
    prepared: Prepared | None = None,
    checkpoints: CheckpointStore | None = None,
) -> ApplyOutcome:
    """Perform approved change `approval_id` under `sandbox`, at most once, and
    record `Applied` (or `Failed` when the sandbox refuses or the OS fails:
    the ToolError/SecurityViolation message becomes the event's error).

    With `checks` a write is formatted and checked (see the module's text):
    `prepared` is `prepare`'s work when the caller did it already, else it is
    done here. With `checkpoints`, the paths' prior state is kept first
    (`owner_of`, GBR-UNDO-01). Returns `Settled(now=True)` when this call recorded the
    outcome, `Settled(now=False)` when it was already settled (applied, failed
    or rejected), `Conflict` when the path changed since the approval (nothing
    written or recorded). Raises UnknownApproval, InvalidDecision if still
    pending, ApprovalLogError. Blocking: holds the log's write lock while the
    disk changes, and runs the check after.
    """
    if prepared is None and checks is not None:
        current = log.get(approval_id)
        if current.status == "approved":
            prepared = prepare(current, sandbox, checks)
    with log.transaction() as tx:
        approval = tx.approval(approval_id)
        if approval.settled:
            return Settled(approval)
        if approval.status != "approved":
            raise InvalidDecision(approval_id, approval.status, "Applied", ": decide it first")
        usable = prepared if prepared and prepared.content == approval.content else None
        formatted = after = None
        try:
            done_as = usable.formatted.content if usable else None
            if not _already_done(approval, sandbox, done_as):
                conflict = find_conflict(approval, sandbox)
                if conflict is not None:
                    return conflict
                if usable and usable.fresh and usable.seen == approval.base_hash:
                    formatted, after = usable.formatted, usable.after
                text = formatted.content if formatted else None
                owner = functools.partial(owner_of, approval)
                with keeping(checkpoints, owner, _changed_paths(approval)):
                    _perform(approval, sandbox, text)
        except (ToolError, SecurityViolation) as exc:
            failed = Failed(approval_id=approval_id, at=time.time(), by=by, error=str(exc))
            return Settled(tx.append(failed, approval), now=True)
        note = format_note(formatted, approval.content or "") if formatted else ""
        applied = Applied(
            approval_id=approval_id, at=time.time(), by=by, note=note, checking=after is not None
        )
        settled = tx.append(applied, approval)
    if after is None:
        return Settled(settled, now=True, formatted=formatted)
    verdicts = tuple(after())
    checked = Checked(
        approval_id=approval_id, at=time.time(), by=by, note="\n".join(v.note() for v in verdicts)
    )
    with log.transaction() as tx:
        settled = tx.append(checked, tx.approval(approval_id))
    return Settled(settled, now=True, formatted=formatted, verdicts=verdicts)


def approve_and_apply(
    log: ApprovalLog,
    approval_id: int,
    sandbox: Sandbox,
    *,
    by: str,
    force: bool = False,
    content: str | None = None,
    checks: SaveChecks | None = None,
    checkpoints: CheckpointStore | None = None,
) -> ApplyOutcome:
    """The operator's "approve" (or "edit", when `content` is given): check for
    a conflict and record `Approved`/`Edited` (one transaction, so a racing
    applier's write is never mistaken for a conflict), then `apply`.

    With `checks`, the approved text is formatted and its baseline taken
    before the decision is recorded (so the node, which applies decisions it
    sees, rarely races this call to it). On a conflict without `force`,
    nothing is recorded and the `Conflict` is returned (the approval stays as
    it was); with `force` the current fingerprint becomes the base (issue 6,
    "Conflicts"). A settled approval is returned as `Settled`, so two
    terminals approving the same id both learn the one outcome. Raises
    UnknownApproval, InvalidDecision (an edit of a delete or move),
    ApprovalLogError; SecurityViolation/ToolError if the path cannot be checked.
    `checkpoints` as for `apply`.
    """
    prepared = None
    if checks is not None:
        pending = log.get(approval_id)
        if not pending.settled:
            base = current_hash(pending, sandbox) if force else pending.base_hash
            prepared = prepare(pending, sandbox, checks, content=content, base=base)
    with log.transaction() as tx:
        approval = tx.approval(approval_id)
        if approval.settled:
            return Settled(approval)
        now = current_hash(approval, sandbox)
        if now != approval.base_hash and not force and not _already_done(approval, sandbox):
            return Conflict(approval, approval.base_hash, now, pending_diff(approval, sandbox))
        tx.decide(approval, by=by, force=force, current_hash=now, content=content)
    return apply(
        log,
        approval_id,
        sandbox,
        by=by,
        checks=checks,
        prepared=prepared,
        checkpoints=checkpoints,
    )


def owner_of(approval: Approval) -> Owner:
    """The checkpoint group an approved change of `approval` belongs to (GBR-UNDO-01):
    the local agent's turn (`detail["turn"]`, recorded when it asked), else the
    requester's own group for this approval: a peer (by alias, so `gbr-node undo
    --peer ALIAS` takes it back), the command line, an MCP client."""
    turn = approval.detail.get("turn")
    if approval.requester == LOCAL and isinstance(turn, str) and turn:
        return Owner("turn", turn, f"turn {turn}")
    key = f"approval {approval.id}"
    if approval.requester == MCP:
        return Owner("call", "MCP client", key)
    if approval.requester in (CLI, LOCAL):
        return Owner("call", "command", key)
    return Owner("peer", approval.requester_alias or approval.requester, key)


def _changed_paths(approval: Approval) -> list[str]:
    if approval.tool == "move_path":
        return [approval.path, _destination(approval)]
    return [approval.path]


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


def _already_done(approval: Approval, sandbox: Sandbox, formatted: str | None = None) -> bool:
    """True if the change is on disk already (a crash after the change and
    before `Applied` was committed, or someone made the same change): for a
    write, the file holds its content, or its `formatted` text."""
    path = _checked(approval, sandbox, approval.path)
    if approval.tool == "delete_path":
        return not os.path.lexists(path)
    if approval.tool == "move_path":
        destination = _checked(approval, sandbox, _destination(approval))
        return not os.path.lexists(path) and fingerprint(destination) == approval.base_hash
    if approval.content is None:
        return False
    written = {text_hash(text) for text in (approval.content, formatted) if text is not None}
    return fingerprint(path) in written


def _perform(approval: Approval, sandbox: Sandbox, text: str | None = None) -> None:
    """Make the change (a write writes `text`, by default the approved content).
    Raises ToolError (OS failure, existing move destination) or
    SecurityViolation (a symlink planted on the way)."""
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
            sandbox.write_atomic(path, (approval.content if text is None else text).encode("utf-8"))
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
