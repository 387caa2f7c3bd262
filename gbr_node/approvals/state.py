"""Approval events and the state derived from them [pure] (EVD-AI-01, EVD-DEV-01/02).

The approval log (`log.py`) stores only events; an approval's state is the
fold of its events through one transition table, `TRANSITIONS`:

    (no state)  PendingApproval  -> pending
    pending     Approved|Edited  -> approved    Rejected -> rejected
    approved    Approved|Edited  -> approved    (a forced re-approval after a
                                                 conflict, issue 6 "Conflicts")
    approved    Rejected         -> rejected    Applied  -> applied
    approved    Failed           -> failed
    applied     Checked          -> applied     (the write check's outcome, issue 17)

Any other pair raises `InvalidDecision`: the writer checks each new event
against the same table under the database's write lock, so the stored log
never holds a sequence this module would refuse. No I/O here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gbr_node.errors import GbrError

Status = Literal["pending", "approved", "rejected", "applied", "failed"]
SETTLED: frozenset[str] = frozenset({"rejected", "applied", "failed"})


class UnknownApproval(GbrError):
    """No approval with that id is in the log. Attribute: `approval_id`."""

    def __init__(self, approval_id: int) -> None:
        self.approval_id = approval_id
        super().__init__(f"no approval #{approval_id} in the log")


class InvalidDecision(GbrError):
    """An event does not fit the approval's state (see `TRANSITIONS`), e.g.
    approving an approval that was already rejected. Attributes:
    `approval_id`, `status` (current status, or None if unknown), `kind`."""

    def __init__(self, approval_id: int, status: str | None, kind: str, why: str = "") -> None:
        self.approval_id = approval_id
        self.status = status
        self.kind = kind
        state = f"is {status}" if status else "does not exist"
        super().__init__(f"approval #{approval_id} {state}: cannot record {kind}{why}")


@dataclass(frozen=True, kw_only=True)
class Event:
    """Fields every event has. `seq`: position in the log (1, 2, ...; 0 until
    stored). `at`: Unix time in seconds when it was recorded."""

    approval_id: int
    at: float
    seq: int = 0


@dataclass(frozen=True, kw_only=True)
class PendingApproval(Event):
    """A change to a protected path was asked for and not performed (EVD-AI-01).

    `requester`: "local" or the peer ID; `requester_alias`: the peer's alias
    or None. `tool`, `path` (root-relative POSIX), `absolute`: from
    `ApprovalRequired`. `content`: proposed text, None for deletes and moves
    (a move's destination is `detail["destination"]`). `base_hash`: the
    path's fingerprint when asked (`apply.fingerprint`), None if absent.
    """

    requester: str
    requester_alias: str | None
    tool: str
    path: str
    absolute: str
    content: str | None
    detail: Mapping[str, Any] = field(default_factory=dict)
    base_hash: str | None


@dataclass(frozen=True, kw_only=True)
class Approved(Event):
    """The operator `by` approved; `base_hash` is the path's fingerprint when
    they did. With `forced` it replaces the request-time fingerprint: the
    change is approved against the content the path has now (issue 6,
    "Conflicts"); otherwise it is informative only."""

    by: str
    forced: bool = False
    base_hash: str | None = None


@dataclass(frozen=True, kw_only=True)
class Edited(Approved):
    """The operator `by` approved `content` in place of the proposed text
    (EVD-DEV-02); `forced`/`base_hash` as for `Approved`."""

    content: str


@dataclass(frozen=True, kw_only=True)
class Rejected(Event):
    """The operator `by` refused; `reason` is passed on to the requester, or None."""

    by: str
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class Applied(Event):
    """The change is on disk; `by` names the process that made it. `note`: what
    format on save did to an approved write, for the requester ("" if nothing);
    `checking`: a write check runs now and its `Checked` event follows (issue 17)."""

    by: str
    note: str = ""
    checking: bool = False


@dataclass(frozen=True, kw_only=True)
class Checked(Event):
    """The write check after an applied write ended (UNW-AI-01): `note` tells the
    requester its outcome (new errors as short lines); `by` as for `Applied`."""

    by: str
    note: str


@dataclass(frozen=True, kw_only=True)
class Failed(Event):
    """Applying the change failed for good; `error` says why (shown to the requester)."""

    by: str
    error: str


KINDS: dict[str, type[Event]] = {
    cls.__name__: cls
    for cls in (PendingApproval, Approved, Edited, Rejected, Applied, Checked, Failed)
}
_BASE_FIELDS = frozenset(f.name for f in dataclasses.fields(Event))

# (status before, event kind) -> status after; None is "no such approval yet".
TRANSITIONS: dict[tuple[str | None, str], Status] = {
    (None, "PendingApproval"): "pending",
    ("pending", "Approved"): "approved",
    ("pending", "Edited"): "approved",
    ("pending", "Rejected"): "rejected",
    ("approved", "Approved"): "approved",
    ("approved", "Edited"): "approved",
    ("approved", "Rejected"): "rejected",
    ("approved", "Applied"): "applied",
    ("approved", "Failed"): "failed",
    ("applied", "Checked"): "applied",
}


@dataclass(frozen=True, kw_only=True)
class Approval:
    """The derived state of one approval.

    `proposed`: the content as requested; `content`: what is (or was) to be
    written, the edited text after an `Edited` event; None for deletes and
    moves. `request_hash`: fingerprint at request time; `base_hash`: the one
    applying checks against (differs after a forced approval). `decided_by`
    / `decided_at` (seconds): last Approved/Edited/Rejected. `reason`: of a
    rejection; `error`: of a failure; `settled_at`: when it became applied,
    failed or rejected. `last_seq`: seq of its latest event. `format_note` /
    `check_note`: what format on save and the write check said of an applied
    write ("" if nothing, or not yet).
    """

    id: int
    status: Status
    requester: str
    requester_alias: str | None
    tool: str
    path: str
    absolute: str
    proposed: str | None
    content: str | None
    detail: Mapping[str, Any]
    request_hash: str | None
    base_hash: str | None
    requested_at: float
    edited: bool = False
    decided_by: str | None = None
    decided_at: float | None = None
    reason: str | None = None
    error: str | None = None
    settled_at: float | None = None
    last_seq: int = 0
    format_note: str = ""
    check_note: str = ""

    @property
    def settled(self) -> bool:
        """True once rejected, applied or failed: nothing more can happen."""
        return self.status in SETTLED


def transition(approval: Approval | None, event: Event) -> Approval:
    """The state after `event`. Raises InvalidDecision when `TRANSITIONS` has
    no entry for (status, kind), when the event's approval id differs, or for
    an `Edited` event on a delete or move (nothing to edit)."""
    kind = type(event).__name__
    status = approval.status if approval else None
    after = TRANSITIONS.get((status, kind))
    if after is None or (approval is not None and approval.id != event.approval_id):
        raise InvalidDecision(event.approval_id, status, kind)
    if isinstance(event, PendingApproval):
        return Approval(
            id=event.approval_id,
            status=after,
            requester=event.requester,
            requester_alias=event.requester_alias,
            tool=event.tool,
            path=event.path,
            absolute=event.absolute,
            proposed=event.content,
            content=event.content,
            detail=dict(event.detail),
            request_hash=event.base_hash,
            base_hash=event.base_hash,
            requested_at=event.at,
            last_seq=event.seq,
        )
    assert approval is not None  # guaranteed by TRANSITIONS
    changes: dict[str, Any] = {"status": after, "last_seq": event.seq}
    if isinstance(event, Approved):
        changes.update(decided_by=event.by, decided_at=event.at)
        if event.forced:
            changes["base_hash"] = event.base_hash
        if isinstance(event, Edited):
            if approval.proposed is None:
                raise InvalidDecision(event.approval_id, status, kind, ": nothing to edit")
            changes.update(content=event.content, edited=True)
    elif isinstance(event, Rejected):
        changes.update(decided_by=event.by, decided_at=event.at, reason=event.reason)
    elif isinstance(event, Failed):
        changes["error"] = event.error
    elif isinstance(event, Applied):
        changes["format_note"] = event.note
    elif isinstance(event, Checked):
        changes["check_note"] = event.note
        return dataclasses.replace(approval, **changes)
    if after in SETTLED:
        changes["settled_at"] = event.at
    return dataclasses.replace(approval, **changes)


def derive(events: Iterable[Event]) -> dict[int, Approval]:
    """Fold `events` (in log order) into approvals keyed by id. Raises
    InvalidDecision on a sequence `TRANSITIONS` does not allow."""
    approvals: dict[int, Approval] = {}
    for event in events:
        approvals[event.approval_id] = transition(approvals.get(event.approval_id), event)
    return approvals


def encode(event: Event) -> tuple[str, str]:
    """(kind, JSON body) of `event` for storage; the body omits the common fields."""
    body = {
        f.name: getattr(event, f.name)
        for f in dataclasses.fields(event)
        if f.name not in _BASE_FIELDS
    }
    return type(event).__name__, json.dumps(body, ensure_ascii=False, sort_keys=True, default=dict)


def decode(seq: int, approval_id: int, kind: str, at: float, body: str) -> Event:
    """The event stored as (seq, approval_id, kind, at, JSON body); the inverse
    of `encode`. Raises ValueError for an unknown kind or a malformed body."""
    cls = KINDS.get(kind)
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}")
    try:
        return cls(seq=seq, approval_id=approval_id, at=at, **json.loads(body))
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"malformed {kind} event #{seq}: {exc}") from exc


def outcome_text(approval: Approval) -> str:
    """One sentence telling the requester how a settled approval ended, fit
    for a tool result (EVD-DEV-02: after an edit it says the edited text was
    written). Raises ValueError if the approval is not settled."""
    what = f"{approval.tool} on {approval.path} (approval #{approval.id})"
    if approval.status == "applied":
        notes = "".join(f"\n{n}" for n in (approval.format_note, approval.check_note) if n)
        if approval.edited:
            return f"{what} was approved with edits by the operator; written content:\n" + (
                (approval.content or "") + notes
            )
        return f"{what} was approved and applied." + notes
    if approval.status == "rejected":
        return f"{what} was rejected by the operator" + (
            f": {approval.reason}" if approval.reason else "."
        )
    if approval.status == "failed":
        return f"{what} was approved but applying it failed: {approval.error}"
    raise ValueError(f"approval #{approval.id} is {approval.status}, not settled")
