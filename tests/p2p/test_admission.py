"""The handshake table, the backoff table and the connection limits, as pure logic (GBR-DOS-01)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gbr_node.p2p.admission import Backoff, ConnectionLimits, Handshakes


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
    with pytest.raises(ValueError, match="backoff_s"):
        ConnectionLimits(backoff_s=20, max_backoff_s=16)


# --- backoff: an address whose strangers keep finding no room is refused for a while ----


def backoff(max_addresses: int = 64) -> Backoff:
    return Backoff(first_s=1.0, max_s=8.0, vouch_s=100.0, max_addresses=max_addresses)


def test_the_third_strike_refuses_an_address_and_each_refusal_after_doubles_up_to_the_cap():
    table = backoff()
    assert [table.offend("a", t) for t in (0.0, 0.5)] == [0.0, 0.0]
    assert not table.refuses("a", 0.6)
    assert table.offend("a", 1.0) == 1.0
    assert table.refuses("a", 1.5) and not table.refuses("b", 1.5)
    refused = []
    now = 2.0
    for _ in range(5):  # a strike each time the refusal has just ended
        refused.append(table.offend("a", now))
        now += refused[-1]
    assert refused == pytest.approx([2.0, 4.0, 8.0, 8.0, 8.0])
    assert not table.refuses("a", now)


def test_strikes_while_refused_count_once():
    table = backoff()
    for t in (0.0, 0.1, 0.2):
        table.offend("a", t)
    burst = [table.offend("a", 0.3 + n / 100) for n in range(20)]
    assert burst[0] == pytest.approx(0.9) and burst[-1] == pytest.approx(0.71)  # until 1.2
    assert table.offend("a", 1.3) == pytest.approx(2.0)  # doubled once, not twenty times


def test_an_address_quiet_for_max_s_starts_afresh():
    table = backoff()
    for t in (0.0, 0.1, 0.2):
        table.offend("a", t)
    assert table.refuses("a", 1.0)
    assert not table.refuses("a", 1.2 + 8.0) and len(table) == 0
    assert table.offend("a", 20.0) == 0.0  # a first strike again


def test_a_vouched_address_is_never_refused_until_its_vouch_runs_out():
    table = backoff()
    table.vouch("a", 0.0)
    for t in (1.0, 1.1, 1.2, 1.3):
        table.offend("a", t)
    assert not table.refuses("a", 1.4)
    for t in (100.0, 100.1, 100.2):  # the vouch is over
        table.offend("a", t)
    assert table.refuses("a", 100.3)


@given(st.lists(st.tuples(st.integers(0, 999), st.booleans()), max_size=300))
def test_the_tables_never_hold_more_addresses_than_their_bound(steps):
    table = backoff(max_addresses=16)
    for now, (address, vouch) in enumerate(steps):
        if vouch:
            table.vouch(str(address), now)
        else:
            table.offend(str(address), now)
        table.refuses(str(address), now)
        assert len(table) <= 2 * 16


def test_backoff_refuses_nonsense_values():
    with pytest.raises(ValueError, match="first_s"):
        Backoff(first_s=2, max_s=1, vouch_s=1, max_addresses=1)
    with pytest.raises(ValueError, match="max_addresses"):
        Backoff(first_s=1, max_s=1, vouch_s=1, max_addresses=0)
