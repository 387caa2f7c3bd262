"""Human approval of protected writes (EVD-AI-01, EVD-DEV-01/02; issue 6).

`state` derives approvals from events [pure]; `log` keeps the events in
SQLite; `apply` performs approved changes exactly once; `review` shows diffs
and runs `$EDITOR`; `cli` is `gbr-node approvals ...`.
"""

from gbr_node.approvals.apply import (
    ApplyOutcome,
    Conflict,
    Settled,
    approve_and_apply,
    current_hash,
    find_conflict,
    fingerprint,
    pending_diff,
)
from gbr_node.approvals.log import ApprovalLog, ApprovalLogError, default_path
from gbr_node.approvals.state import (
    Approval,
    Event,
    InvalidDecision,
    UnknownApproval,
    derive,
    outcome_text,
)

__all__ = [
    "ApplyOutcome",
    "Approval",
    "ApprovalLog",
    "ApprovalLogError",
    "Conflict",
    "Event",
    "InvalidDecision",
    "Settled",
    "UnknownApproval",
    "approve_and_apply",
    "current_hash",
    "default_path",
    "derive",
    "find_conflict",
    "fingerprint",
    "outcome_text",
    "pending_diff",
]
