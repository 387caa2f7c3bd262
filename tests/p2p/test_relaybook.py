"""RelayBook (gbr_node/p2p/relaybook.py): what a relay holds for others and who gives way
(issue 23, GBR-DOS-01). Pure: times are numbers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gbr_node.p2p.relaybook import (
    NO_RESERVATION,
    PERMISSION_DENIED,
    RESOURCE_LIMIT_EXCEEDED,
    HopLimits,
    RelayBook,
)

LIMITS = HopLimits(max_reservations=2, max_circuits=3, circuits_per_peer=2, reservation_s=10)


@pytest.mark.parametrize(
    ("serves_any", "trusted", "refused"),
    [
        (False, True, None),
        (False, False, PERMISSION_DENIED),
        (True, False, None),
        (True, True, None),
    ],
)
def test_who_may_reserve_and_open_circuits(serves_any, trusted, refused) -> None:
    book = RelayBook(LIMITS, serves_any=serves_any)
    assert book.reserve("b", True, 0).refused is None
    assert book.reserve("s", trusted, 0).refused == refused
    assert book.open_circuit(1, "s", "b", trusted, 0).refused == refused


def test_a_reservation_lasts_its_time_and_is_renewed_by_a_new_request() -> None:
    book = RelayBook(LIMITS)
    book.reserve("b", True, 0)
    assert book.expires_at("b") == 10
    assert book.holds("b", 9.9) and not book.holds("b", 10)
    book.reserve("b", True, 8)
    assert book.expires_at("b") == 18
    assert book.open_circuit(1, "a", "b", True, 17).refused is None
    assert book.open_circuit(2, "a", "b", True, 18).refused == NO_RESERVATION


@pytest.mark.parametrize(
    ("newcomer_trusted", "holders_trusted", "refused", "evicted"),
    [
        (True, (False, False), None, "s1"),  # the oldest stranger gives way
        (True, (True, False), None, "s2"),  # a trusted holder never does
        (True, (True, True), RESOURCE_LIMIT_EXCEEDED, None),
        (False, (False, False), RESOURCE_LIMIT_EXCEEDED, None),  # strangers never evict
        (False, (True, True), RESOURCE_LIMIT_EXCEEDED, None),
    ],
)
def test_a_full_relay_makes_room_for_trusted_peers_only(
    newcomer_trusted, holders_trusted, refused, evicted
) -> None:
    book = RelayBook(LIMITS, serves_any=True)
    for number, trusted in enumerate(holders_trusted, start=1):
        book.reserve(f"s{number}" if not trusted else f"t{number}", trusted, number)
    decision = book.reserve("new", newcomer_trusted, 5)
    assert (decision.refused, decision.evict) == (refused, evicted)
    assert book.statistics()[0] == 2
    if evicted:
        assert book.expires_at(evicted) is None


def test_circuits_are_bounded_in_all_and_per_source_and_strangers_give_way() -> None:
    book = RelayBook(LIMITS, serves_any=True)
    book.reserve("b", True, 0)
    assert book.open_circuit(1, "s", "b", False, 1).refused is None
    assert book.open_circuit(2, "s", "b", False, 2).refused is None
    assert book.open_circuit(3, "s", "b", False, 3).refused == RESOURCE_LIMIT_EXCEEDED  # per peer
    assert book.open_circuit(3, "u", "b", False, 3).refused is None
    assert book.open_circuit(4, "v", "b", False, 4).refused == RESOURCE_LIMIT_EXCEEDED  # in all
    decision = book.open_circuit(4, "a", "b", True, 4)
    assert (decision.refused, decision.evict) == (None, 1)  # the oldest stranger's
    book.close_circuit(2)
    assert book.statistics() == (1, 2)
    assert book.holds("s", 100) is False and book.holds("a", 100)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["reserve", "open", "close"]),
            st.sampled_from("abcdefgh"),
            st.sampled_from("abcdefgh"),
            st.booleans(),
            st.integers(0, 9),
        ),
        max_size=120,
    )
)
def test_whatever_is_asked_the_book_stays_within_its_limits(requests) -> None:
    book = RelayBook(LIMITS, serves_any=True)
    for now, (kind, peer, other, trusted, key) in enumerate(requests):
        if kind == "reserve":
            book.reserve(peer, trusted, now)
        elif kind == "open":
            book.open_circuit(key, peer, other, trusted, now)
        else:
            book.close_circuit(key)
        reservations, circuits = book.statistics()
        assert reservations <= LIMITS.max_reservations
        assert circuits <= LIMITS.max_circuits


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="HopLimits.max_circuits must be > 0"):
        HopLimits(max_circuits=0)
