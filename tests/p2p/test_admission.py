"""The handshake table and the connection limits, as pure logic (GBR-DOS-01)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gbr_node.p2p.admission import ConnectionLimits, Handshakes


@dataclass(eq=False)
class Entry:
    address: str
    has_spoken: bool = False


def table(total: int = 4, per_address: int = 2) -> Handshakes[Entry]:
    return Handshakes(total, per_address)


def test_newcomers_are_admitted_while_there_is_room():
    handshakes = table()
    entries = [Entry("a"), Entry("b"), Entry("a"), Entry("c")]
    assert [handshakes.admit(e) for e in entries] == [None] * 4
    assert len(handshakes) == 4 and handshakes.count("a") == 2


def test_an_address_at_its_limit_gives_way_from_its_own_slots_oldest_silent_first():
    handshakes = table(total=8, per_address=3)
    spoke, silent_old, silent_new = Entry("a", True), Entry("a"), Entry("a")
    for entry in (spoke, silent_old, silent_new):
        handshakes.admit(entry)
    other = Entry("b")
    handshakes.admit(other)
    assert handshakes.admit(Entry("a")) is silent_old
    assert handshakes.admit(Entry("a")) is silent_new
    assert handshakes.count("b") == 1  # another address is never touched


@pytest.mark.parametrize(
    ("held", "expected"),
    [
        # (address, has spoken) of each entry in arrival order; index expected to give way
        ([("a", True), ("b", False), ("c", True), ("c", True)], 1),  # the silent one
        ([("a", True), ("b", True), ("c", True), ("c", True)], 2),  # then the biggest address
        ([("a", False), ("b", False), ("c", True), ("d", False)], 0),  # then the oldest
    ],
    ids=["silent-first", "biggest-address", "oldest"],
)
def test_a_full_table_makes_room_for_a_new_address(held, expected):
    handshakes = table(total=4, per_address=2)
    entries = [Entry(address, spoke) for address, spoke in held]
    for entry in entries:
        assert handshakes.admit(entry) is None
    newcomer = Entry("z")
    assert handshakes.admit(newcomer) is entries[expected]
    assert newcomer in list(handshakes) and len(handshakes) == 4


def test_release_forgets_an_entry_once_and_ignores_strangers():
    handshakes = table()
    entry = Entry("a")
    handshakes.admit(entry)
    handshakes.release(entry)
    handshakes.release(entry)
    handshakes.release(Entry("a"))
    assert len(handshakes) == 0 and handshakes.count("a") == 0


@given(
    st.lists(
        st.tuples(st.sampled_from("abcdef"), st.booleans(), st.booleans()), min_size=1, max_size=80
    )
)
def test_limits_always_hold_and_a_speaking_peer_never_gives_way_to_silence(steps):
    """Any arrival order: within the limits, the newcomer in, and while some candidate
    is silent, no handshake that has spoken is ended for a newcomer."""
    handshakes = table(total=6, per_address=3)
    for address, spoke, leave_early in steps:
        entry = Entry(address, spoke)
        own = handshakes.count(address) >= 3
        candidates = [e for e in handshakes if e.address == address] if own else list(handshakes)
        full = own or len(handshakes) >= 6
        victim = handshakes.admit(entry)
        assert (victim is not None) == full
        if victim is not None and any(not e.has_spoken for e in candidates):
            assert not victim.has_spoken
        assert entry in list(handshakes)
        assert len(handshakes) <= 6 and all(handshakes.count(a) <= 3 for a in "abcdef")
        if leave_early:
            handshakes.release(entry)


def test_limits_refuse_nonsense_values():
    with pytest.raises(ValueError, match="max_untrusted"):
        ConnectionLimits(max_untrusted=0)
    with pytest.raises(ValueError, match="max_handshakes_per_address"):
        ConnectionLimits(max_handshakes=4, max_handshakes_per_address=5)
    assert ConnectionLimits(untrusted_grace_s=0).untrusted_grace_s == 0
