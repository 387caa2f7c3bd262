"""Human approval of protected writes (EVD-AI-01, EVD-DEV-01/02; issue 6).

`state` derives approvals from events [pure]; `log` keeps the events in
SQLite; `apply` performs approved changes exactly once; `review` shows diffs
and runs `$EDITOR`; `cli` is `gbr-node approvals ...` (`parser` its arguments).

The names below load their module on first use (PEP 562), so building the
command line's parser loads none of them (issue 35).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_WHERE = {
    "apply": (
        "ApplyOutcome",
        "Conflict",
        "Settled",
        "approve_and_apply",
        "current_hash",
        "find_conflict",
        "fingerprint",
        "pending_diff",
    ),
    "log": ("ApprovalLog", "ApprovalLogError", "default_path"),
    "state": ("Approval", "Event", "InvalidDecision", "UnknownApproval", "derive", "outcome_text"),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}
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


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
