"""The pure decisions of hot reload (config.changes, ADR-0012a): no files, no trio."""

from __future__ import annotations

import pathlib

from hypothesis import given
from hypothesis import strategies as st

from gbr_node.config.changes import (
    RACY_WINDOW_NS,
    FileStamp,
    ReloadGate,
    Verdict,
    compare,
    fingerprint,
    needs_hash,
    profile_changes,
)
from gbr_node.config.loader import parse_profile

T0 = 1_700_000_000 * 10**9  # a wall-clock time, in ns
STAMP = FileStamp(device=1, inode=7, size=30, mtime_ns=T0, ctime_ns=T0)
LONG_AFTER = T0 + RACY_WINDOW_NS
JUST_AFTER = T0 + RACY_WINDOW_NS - 1


def test_a_file_never_seen_is_hashed_and_a_missing_one_is_not() -> None:
    assert needs_hash(None, STAMP)
    assert not needs_hash(None, None)
    assert not needs_hash(fingerprint(STAMP, b"a", LONG_AFTER), None)


def test_equal_metadata_skips_the_hash_only_once_the_stamp_is_settled() -> None:
    assert not needs_hash(fingerprint(STAMP, b"a", LONG_AFTER), STAMP)
    assert needs_hash(fingerprint(STAMP, b"a", JUST_AFTER), STAMP)


def test_any_metadata_difference_asks_for_a_hash() -> None:
    settled = fingerprint(STAMP, b"a", LONG_AFTER)
    for field, value in [("inode", 8), ("size", 31), ("mtime_ns", T0 + 1), ("ctime_ns", T0 + 1)]:
        assert needs_hash(settled, FileStamp(**{**STAMP.__dict__, field: value}))


def test_a_recent_ctime_keeps_a_file_with_an_old_mtime_unsettled() -> None:
    restored_mtime = FileStamp(1, 7, 30, mtime_ns=T0 - 10 * RACY_WINDOW_NS, ctime_ns=T0)
    assert not fingerprint(restored_mtime, b"a", JUST_AFTER).settled
    assert fingerprint(restored_mtime, b"a", LONG_AFTER).settled


def test_two_same_size_saves_in_one_mtime_tick_differ_by_hash() -> None:
    first = {"p": fingerprint(STAMP, b"first", T0)}  # observed right after the save
    assert needs_hash(first["p"], STAMP)  # same stamp, but not settled: hash again
    second = {"p": fingerprint(STAMP, b"second", T0 + 1)}
    assert compare(first, second) is Verdict.CHANGED


def test_touch_changes_metadata_but_not_the_digest_so_nothing_changed() -> None:
    before = {"p": fingerprint(STAMP, b"same", LONG_AFTER)}
    touched = FileStamp(1, 7, 30, mtime_ns=LONG_AFTER, ctime_ns=LONG_AFTER)
    assert compare(before, {"p": fingerprint(touched, b"same", LONG_AFTER)}) is Verdict.UNCHANGED


def test_vanished_recreated_and_unknown_files() -> None:
    present = fingerprint(STAMP, b"x", LONG_AFTER)
    missing = fingerprint(None, None, LONG_AFTER)

    gone = compare({"p": present, "q": present}, {"p": missing, "q": present})
    assert gone is Verdict.VANISHED
    assert compare({"p": missing}, {"p": missing}) is Verdict.UNCHANGED
    assert compare({"p": missing}, {"p": present}) is Verdict.CHANGED
    assert compare({}, {"p": present}) is Verdict.CHANGED


def test_a_file_that_became_unreadable_counts_as_changed() -> None:
    unreadable = fingerprint(STAMP, None, LONG_AFTER)
    assert compare({"p": fingerprint(STAMP, b"x", T0)}, {"p": unreadable}) is Verdict.CHANGED


stamps = st.builds(
    FileStamp,
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(T0, T0 + 2 * RACY_WINDOW_NS),
    st.integers(T0, T0 + 2 * RACY_WINDOW_NS),
)


@given(stamps, stamps, st.integers(T0, T0 + 4 * RACY_WINDOW_NS))
def test_a_hash_is_skipped_only_for_an_equal_settled_stamp(
    old: FileStamp, new: FileStamp, seen_ns: int
) -> None:
    previous = fingerprint(old, b"d", seen_ns)
    skipped = not needs_hash(previous, new)
    assert skipped == (old == new and seen_ns - max(old.mtime_ns, old.ctime_ns) >= RACY_WINDOW_NS)


def _loaded(project: pathlib.Path, text: str):
    file = str(project / ".gbr_envs" / "default.toml")
    return parse_profile(text, file=file, project_dir=project, name="default")


def test_profile_changes_name_top_level_keys_in_profile_order(tmp_path: pathlib.Path) -> None:
    old = _loaded(tmp_path, 'system_prompt = "a"\nprotected_files = ["x"]\n')
    bob = '[peers.bob]\npeer_id = "12D3KooWBwWFwNgcJhE2qEsL3ewZHApd6s68SSUBGAiVwXHre1E7"\n'
    new = _loaded(tmp_path, bob + '[model]\nmodel = "m"\n')
    assert profile_changes(old, old) == ()
    assert profile_changes(old, new) == ("system_prompt", "protected_files", "model", "peers")


def test_prompt_moved_to_a_file_with_the_same_text_names_only_the_file_key(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "agent.md").write_text("Hi", encoding="utf-8")
    inline = _loaded(tmp_path, 'system_prompt = "Hi"\n')
    from_file = _loaded(tmp_path, 'system_prompt_file = "agent.md"\n')
    assert profile_changes(inline, from_file) == ("system_prompt_file",)


def test_allowed_root_is_named_when_the_folder_it_resolves_to_changes(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "one")
    before = _loaded(tmp_path, 'allowed_root = "link"\n')
    (tmp_path / "link").unlink()
    (tmp_path / "link").symlink_to(tmp_path / "two")
    after = _loaded(tmp_path, 'allowed_root = "link"\n')
    assert profile_changes(before, after) == ("allowed_root",)


def test_gate_reports_a_new_failure_at_its_second_poll_then_never_again() -> None:
    gate = ReloadGate()
    reports = []
    for _ in range(5):
        gate, report = gate.after_failure("broken")
        reports.append(report)
    assert reports == [False, True, False, False, False]
    assert gate.retrying


def test_gate_reports_a_different_failure_after_its_own_grace_poll() -> None:
    gate, _ = ReloadGate().after_failure("a")
    gate, reported_a = gate.after_failure("a")
    gate, first_b = gate.after_failure("b")
    gate, second_b = gate.after_failure("b")
    assert (reported_a, first_b, second_b) == (True, False, True)


def test_gate_reports_at_once_when_forced_even_a_known_failure() -> None:
    gate, report = ReloadGate().after_failure("a", force=True)
    assert report
    assert gate.after_failure("a", force=True)[1]
    assert not gate.after_failure("a")[1]


def test_a_fresh_gate_is_not_retrying() -> None:
    assert not ReloadGate().retrying
