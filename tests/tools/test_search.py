"""search_text on a real temporary root."""

from __future__ import annotations

import time

import pytest

from gbr_node.errors import SecurityViolation
from gbr_node.tools import search
from gbr_node.tools.search import MAX_MATCHES
from tests.tools.helpers import text_of


@pytest.fixture
def registry(make_registry):
    return make_registry(read_max_bytes=1000)


def test_search_text_reports_file_line_and_text(registry, root):
    (root / "src").mkdir()
    (root / "src/a.py").write_text("import os\ndef main():\n    return os.getcwd()\n")
    (root / "b.txt").write_text("nothing\n")
    text = text_of(registry.call("search_text", {"pattern": r"os\.\w+"}))
    assert text.splitlines() == [
        "src/a.py:3:     return os.getcwd()",
        "[1 matching lines in 2 files searched]",
    ]


def test_search_text_glob_limits_the_files(registry, root):
    (root / "a.py").write_text("hit\n")
    (root / "a.txt").write_text("hit\n")
    (root / "sub").mkdir()
    (root / "sub/b.py").write_text("hit\n")
    names = text_of(registry.call("search_text", {"pattern": "hit", "glob": "*.py"}))
    assert names.splitlines()[:2] == ["a.py:1: hit", "sub/b.py:1: hit"]
    only_sub = text_of(registry.call("search_text", {"pattern": "hit", "glob": "sub/*"}))
    assert only_sub.splitlines()[0] == "sub/b.py:1: hit"
    assert "a.py" not in only_sub.replace("sub/b.py", "")


def test_search_text_skips_git_binaries_oversize_files_and_links(registry, root, outside):
    (root / ".git").mkdir()
    (root / ".git/config").write_text("hit\n")
    (root / "bin.dat").write_bytes(b"hit\x00\n")
    (root / "big.txt").write_text("hit\n" * 500)
    (root / "out.txt").symlink_to(outside / "secret.txt")
    (root / "ok.txt").write_text("hit\n")
    text = text_of(registry.call("search_text", {"pattern": "hit|secret"}))
    assert text.splitlines() == [
        "ok.txt:1: hit",
        "[1 matching lines in 1 files searched "
        "(2 binary, unreadable, hard-linked or over-size files skipped)]",
    ]


def test_search_text_stops_after_the_match_cap_and_says_so(registry, root):
    (root / "many.txt").write_text("x\n" * (MAX_MATCHES + 5))
    lines = text_of(registry.call("search_text", {"pattern": "x"})).splitlines()
    assert len(lines) == MAX_MATCHES + 1
    assert lines[-1].startswith(f"[more than {MAX_MATCHES} matching lines")


def test_search_text_invalid_regex_is_a_clear_error(registry):
    result = registry.call("search_text", {"pattern": "(unclosed"})
    assert result.is_error and "invalid regular expression" in text_of(result)


def test_search_text_outside_the_root_is_refused(registry):
    with pytest.raises(SecurityViolation):
        registry.call("search_text", {"pattern": "x", "path": "../outside"})


def test_search_text_of_one_file(registry, root):
    (root / "a.txt").write_text("one\ntwo\n")
    text = text_of(registry.call("search_text", {"pattern": "two", "path": "a.txt"}))
    assert text.splitlines()[0] == "a.txt:2: two"


def test_search_text_with_a_runaway_pattern_stops_in_time_with_what_it_found(
    registry, root, monkeypatch
):
    monkeypatch.setattr(search, "SEARCH_TIME_LIMIT_S", 0.3)
    (root / "x.txt").write_text("aaaa\n" + "a" * 60 + "b\n")
    started = time.monotonic()
    result = registry.call("search_text", {"pattern": r"^(a|aa)+$"})
    assert time.monotonic() - started < 5  # without the limit: longer than the universe
    text = text_of(result)
    assert text.startswith("x.txt:1: aaaa\n")
    assert "search stopped after 0.3 s in x.txt with 1 matching lines so far" in text
