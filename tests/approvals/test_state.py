"""The approval state derived from events [pure] (EVD-AI-01, EVD-DEV-01/02)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gbr_node.approvals.state import (
    TRANSITIONS,
    Applied,
    Approved,
    Edited,
    Event,
    Failed,
    InvalidDecision,
    PendingApproval,
    Rejected,
    decode,
    derive,
    encode,
    outcome_text,
)


def pending(approval_id: int = 1, content: str | None = "new", base: str | None = "h0"):
    return PendingApproval(
        approval_id=approval_id,
        at=1.0,
        requester="12D3KooWPeer",
        requester_alias="bob",
        tool="write_file" if content is not None else "delete_path",
        path="pyproject.toml",
        absolute="/p/pyproject.toml",
        content=content,
        detail={},
        base_hash=base,
    )


APPROVE = Approved(approval_id=1, at=2.0, by="alice")
FORCE = Approved(approval_id=1, at=2.5, by="alice", forced=True, base_hash="h1")
EDIT = Edited(approval_id=1, at=3.0, by="alice", content="EDITED")
REJECT = Rejected(approval_id=1, at=4.0, by="alice", reason="no")
APPLY = Applied(approval_id=1, at=5.0, by="node")
FAIL = Failed(approval_id=1, at=6.0, by="node", error="disk full")

# events -> (status, content, base_hash, edited, reason, error)
VALID = [
    ([pending()], ("pending", "new", "h0", False, None, None)),
    ([pending(), APPROVE], ("approved", "new", "h0", False, None, None)),
    ([pending(), APPROVE, APPLY], ("applied", "new", "h0", False, None, None)),
    ([pending(), EDIT], ("approved", "EDITED", "h0", True, None, None)),
    ([pending(), EDIT, APPLY], ("applied", "EDITED", "h0", True, None, None)),
    ([pending(), REJECT], ("rejected", "new", "h0", False, "no", None)),
    ([pending(), APPROVE, REJECT], ("rejected", "new", "h0", False, "no", None)),
    ([pending(), APPROVE, FORCE], ("approved", "new", "h1", False, None, None)),
    ([pending(), APPROVE, FORCE, APPLY], ("applied", "new", "h1", False, None, None)),
    ([pending(), APPROVE, EDIT], ("approved", "EDITED", "h0", True, None, None)),
    ([pending(), APPROVE, FAIL], ("failed", "new", "h0", False, None, "disk full")),
]

INVALID = [
    [APPROVE],
    [pending(), pending()],
    [pending(), APPLY],
    [pending(), FAIL],
    [pending(), REJECT, APPROVE],
    [pending(), REJECT, REJECT],
    [pending(), APPROVE, APPLY, APPLY],
    [pending(), APPROVE, APPLY, REJECT],
    [pending(), APPROVE, FAIL, APPLY],
    [pending(content=None), EDIT],
]


@pytest.mark.parametrize(("events", "expected"), VALID)
def test_events_fold_into_the_expected_state(events: list[Event], expected: tuple) -> None:
    approval = derive(events)[1]
    got = (approval.status, approval.content, approval.base_hash, approval.edited)
    assert (*got, approval.reason, approval.error) == expected
    assert approval.proposed == "new"
    assert approval.request_hash == "h0"
    assert approval.requester_alias == "bob"


@pytest.mark.parametrize("events", INVALID)
def test_events_that_do_not_fit_the_state_raise_invalid_decision(events: list[Event]) -> None:
    with pytest.raises(InvalidDecision):
        derive(events)


def test_approvals_are_kept_apart_by_id() -> None:
    other_reject = Rejected(approval_id=2, at=4.0, by="x")
    found = derive([pending(1), pending(2), APPROVE, other_reject, APPLY])
    assert (found[1].status, found[2].status) == ("applied", "rejected")


def test_settled_states_record_when_they_settled() -> None:
    approval = derive([pending(), APPROVE, APPLY])[1]
    assert (approval.settled, approval.settled_at, approval.decided_at) == (True, 5.0, 2.0)
    assert not derive([pending(), APPROVE])[1].settled


@pytest.mark.parametrize("event", [pending(), APPROVE, FORCE, EDIT, REJECT, APPLY, FAIL])
def test_every_event_round_trips_through_its_stored_form(event: Event) -> None:
    kind, body = encode(event)
    assert decode(0, event.approval_id, kind, event.at, body) == event


def test_a_stored_row_of_unknown_kind_or_shape_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown event kind"):
        decode(1, 1, "Exploded", 0.0, "{}")
    with pytest.raises(ValueError, match="malformed"):
        decode(1, 1, "Rejected", 0.0, '{"who": "x"}')


def test_outcome_text_carries_the_edited_content_and_the_reason() -> None:
    assert "EDITED" in outcome_text(derive([pending(), EDIT, APPLY])[1])
    assert outcome_text(derive([pending(), REJECT])[1]).endswith("rejected by the operator: no")
    assert "disk full" in outcome_text(derive([pending(), APPROVE, FAIL])[1])
    with pytest.raises(ValueError):
        outcome_text(derive([pending()])[1])


DECISIONS = [APPROVE, FORCE, EDIT, REJECT, APPLY, FAIL]


@given(st.lists(st.sampled_from(DECISIONS), max_size=8))
def test_any_event_sequence_gives_a_table_state_or_invalid_decision(tail: list[Event]) -> None:
    status: str | None = "pending"
    for event in tail:
        status = TRANSITIONS.get((status, type(event).__name__)) if status else None
    if status is None:
        with pytest.raises(InvalidDecision):
            derive([pending(), *tail])
    else:
        assert derive([pending(), *tail])[1].status == status
