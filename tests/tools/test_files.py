"""read_file, write_file, edit_file on a real temporary root (UBQ-DEV-01, EVD-AI-01)."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from gbr_node.errors import SecurityViolation
from gbr_node.tools import approval_required_result
from tests.tools.helpers import text_of, tree_snapshot


@pytest.fixture
def registry(make_registry):
    return make_registry(protected=("pyproject.toml", "locked/**"))


def test_read_file_shows_numbered_lines_and_the_total(registry, root):
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    text = text_of(registry.call("read_file", {"path": "a.txt"}))
    assert text == "a.txt: lines 1-3 of 3\n     1\tone\n     2\ttwo\n     3\tthree"


def test_read_file_window_says_how_to_continue(registry, root):
    (root / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    text = text_of(registry.call("read_file", {"path": "long.txt", "offset": 4, "limit": 3}))
    assert text.splitlines()[0] == "long.txt: lines 4-6 of 10"
    assert "     4\tline 4" in text and "line 7" not in text
    assert "[4 more lines; call again with offset=7]" in text


def test_read_file_offset_past_the_end_is_an_error(registry, root):
    (root / "a.txt").write_text("one\n")
    result = registry.call("read_file", {"path": "a.txt", "offset": 5})
    assert result.is_error and "past the end" in text_of(result)


def test_read_file_over_the_cap_shows_the_head_and_says_so(make_registry, root):
    registry = make_registry(read_max_bytes=20)
    (root / "big.txt").write_text("0123456789\n" * 5)  # 55 bytes
    text = text_of(registry.call("read_file", {"path": "big.txt"}))
    assert "lines 1-1 of at least 1" in text
    assert "the file is 55 bytes; only the first 20 bytes were read" in text


@pytest.mark.parametrize(
    ("data", "reason"),
    [(b"PNG\x00\x01\x02", "NUL bytes"), (b"caf\xe9 latin-1\n", "not UTF-8")],
)
def test_read_file_refuses_binary_files(registry, root, data, reason):
    (root / "blob.bin").write_bytes(data)
    result = registry.call("read_file", {"path": "blob.bin"})
    assert result.is_error and reason in text_of(result)


def test_read_file_follows_a_symlink_that_stays_inside(registry, root):
    (root / "real.txt").write_text("real\n")
    (root / "link.txt").symlink_to("real.txt")
    assert "1\treal" in text_of(registry.call("read_file", {"path": "link.txt"}))


@pytest.mark.parametrize("path", ["escape.txt", "../outside/secret.txt", "{outside}/secret.txt"])
def test_read_file_never_reaches_outside_the_root(registry, root, outside, path):
    (root / "escape.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(SecurityViolation):
        registry.call("read_file", {"path": path.format(outside=outside)})


def test_read_file_of_a_folder_points_to_list_dir(registry, root):
    (root / "sub").mkdir()
    result = registry.call("read_file", {"path": "sub"})
    assert result.is_error and "list_dir" in text_of(result)


@pytest.mark.skipif(sys.platform != "linux", reason="O_RDWR on a FIFO is Linux behaviour")
async def test_read_file_of_a_fifo_is_refused_at_once_instead_of_waiting_for_a_writer(
    registry, root
):
    os.mkfifo(root / "pipe")
    # Should read_file wait for a writer, this one comes after 3 s (O_RDWR never blocks).
    writer = threading.Timer(3, lambda: os.close(os.open(root / "pipe", os.O_RDWR)))
    writer.start()
    started = time.monotonic()
    result = await registry.run("read_file", {"path": "pipe"})
    waited = time.monotonic() - started
    writer.cancel()
    writer.join()

    assert result.is_error and "not a regular file" in text_of(result)
    assert waited < 2


def test_write_file_creates_parents_and_reports_bytes(registry, root):
    result = registry.call("write_file", {"path": "new/deep/f.txt", "content": "héllo\n"})
    assert text_of(result) == "created new/deep/f.txt (7 bytes)"
    assert (root / "new/deep/f.txt").read_text() == "héllo\n"


def test_write_file_replaces_content_and_keeps_the_mode(registry, root):
    script = root / "run.sh"
    script.write_text("old\n")
    script.chmod(0o751)
    assert text_of(registry.call("write_file", {"path": "run.sh", "content": "new\n"})).startswith(
        "replaced"
    )
    assert script.read_text() == "new\n"
    assert script.stat().st_mode & 0o777 == 0o751


@pytest.mark.parametrize(
    ("seen", "path", "written"),
    [
        (None, "old.txt", True),  # a peer's, a command's or an MCP client's call: no turn
        (frozenset(), "new.txt", True),  # a new file needs no read
        (frozenset(), "sub/new.txt", True),
        (frozenset(), "old.txt", False),
        (frozenset({"other.txt"}), "old.txt", False),
        (frozenset({"old.txt"}), "old.txt", True),
        (frozenset({"./old.txt"}), "old.txt", True),  # spelled another way
        (frozenset({"sub/../old.txt"}), "./old.txt", True),
        (frozenset({"../outside.txt", "old.txt"}), "old.txt", True),  # a bad path is no match
    ],
)
def test_write_file_replaces_a_file_the_agent_did_not_read_in_its_turn_never(
    registry, root, seen, path, written
):
    """Claude Code's Write rule, for the local agent's calls (`tools.base.SEEN`): a small
    model wrote `port = 8080` over all of server.py without reading it (issue 32)."""
    from gbr_node.tools.base import SEEN

    (root / "old.txt").write_text("keep me\n")
    token = SEEN.set(seen)
    try:
        result = registry.call("write_file", {"path": path, "content": "new\n"})
    finally:
        SEEN.reset(token)
    target = root / path
    if written:
        assert not result.is_error and target.read_text() == "new\n"
    else:
        assert result.is_error
        assert text_of(result).startswith("old.txt already exists and was not read in this turn")
        assert "read_file it first" in text_of(result)
        assert (root / "old.txt").read_text() == "keep me\n"


@pytest.mark.parametrize(
    ("content", "written"),
    [
        ("call the plumber\non monday\n", False),  # the same text
        ("call the plumber\non monday", False),  # less its last newline
        ("call the plumber\non monday\n\n", True),  # a line added
        ("call the plumber\r\non monday\r\n", True),  # other line ends are a change
        ("call the plumber\non tuesday\n", True),
        (" call the plumber\non monday\n", True),
        ("", True),  # emptying a file is a change
    ],
)
def test_write_file_that_changes_nothing_is_refused(registry, root, content, written):
    """A small model read notes.txt and wrote it back less its last newline when asked
    for a new script (issue 32): a write of the text the file holds is refused, as
    edit_file refuses an old_string equal to its new_string."""
    notes = root / "notes.txt"
    notes.write_bytes(b"call the plumber\non monday\n")
    result = registry.call("write_file", {"path": "notes.txt", "content": content})
    assert result.is_error is not written
    if written:
        assert notes.read_bytes() == content.encode()
    else:
        assert text_of(result) == (
            "notes.txt already holds this text: that changes nothing; nothing written"
        )
        assert notes.read_bytes() == b"call the plumber\non monday\n"


def test_write_file_through_a_hard_link_leaves_the_outside_file_alone(registry, root, outside):
    os.link(outside / "secret.txt", root / "hard.txt")
    registry.call("write_file", {"path": "hard.txt", "content": "changed\n"})
    assert (outside / "secret.txt").read_text() == "outside secret\n"
    assert (root / "hard.txt").read_text() == "changed\n"


def test_write_file_under_a_symlinked_folder_leading_out_is_refused(registry, root, outside):
    (root / "out").symlink_to(outside)
    with pytest.raises(SecurityViolation):
        registry.call("write_file", {"path": "out/new.txt", "content": "x"})
    assert not (outside / "new.txt").exists()


@pytest.mark.parametrize(
    "path",
    ["pyproject.toml", "./a/../pyproject.toml", "locked/deep/x.txt", ".gbr_envs/default.toml"],
)
def test_write_file_to_a_protected_path_needs_approval_and_touches_nothing(registry, root, path):
    (root / "pyproject.toml").write_text("[project]\n")
    before = tree_snapshot(root)
    result = registry.call("write_file", {"path": path, "content": "evil\n"})
    assert result.structured["status"] == "approval_required"
    assert result.structured["tool"] == "write_file"
    assert tree_snapshot(root) == before


def test_write_file_to_a_symlink_of_a_protected_file_needs_approval(registry, root):
    (root / "pyproject.toml").write_text("[project]\n")
    (root / "alias.toml").symlink_to("pyproject.toml")
    result = registry.call("write_file", {"path": "alias.toml", "content": "evil\n"})
    assert result.structured["path"] == "pyproject.toml"
    assert (root / "pyproject.toml").read_text() == "[project]\n"


def test_edit_file_replaces_exactly_one_match(registry, root):
    (root / "m.py").write_text("a = 1\nb = 2\n")
    result = registry.call(
        "edit_file", {"path": "m.py", "old_string": "b = 2", "new_string": "b = 3"}
    )
    assert text_of(result) == "edited m.py: replaced 1 occurrence"
    assert (root / "m.py").read_text() == "a = 1\nb = 3\n"


@pytest.mark.parametrize(("text", "count"), [("x\n", 0), ("a a a\n", 3)])
def test_edit_file_without_a_single_match_says_how_many_and_changes_nothing(
    registry, root, text, count
):
    (root / "m.txt").write_text(text)
    result = registry.call("edit_file", {"path": "m.txt", "old_string": "a", "new_string": "b"})
    assert result.is_error
    assert (f"{count} matches" if count == 0 else f"matches {count} times") in text_of(result)
    assert (root / "m.txt").read_text() == text


@pytest.mark.parametrize("replace_all", [False, True])
def test_edit_file_that_changes_nothing_is_refused(registry, root, replace_all):
    (root / "team.txt").write_text("Maria\nDmitri\n")
    arguments = {"path": "team.txt", "old_string": "Dmitri", "new_string": "Dmitri"}
    result = registry.call("edit_file", {**arguments, "replace_all": replace_all})
    assert result.is_error and "changes nothing" in text_of(result)
    assert (root / "team.txt").read_text() == "Maria\nDmitri\n"


def test_edit_file_replace_all_replaces_every_match(registry, root):
    (root / "m.txt").write_text("a a a\n")
    args = {"path": "m.txt", "old_string": "a", "new_string": "bb", "replace_all": True}
    assert "replaced 3 occurrences" in text_of(registry.call("edit_file", args))
    assert (root / "m.txt").read_text() == "bb bb bb\n"


def test_edit_file_of_a_protected_file_proposes_the_full_new_content(make_registry, root):
    proposals = []

    def on_approval(exc):
        proposals.append(exc)
        return approval_required_result(exc)

    registry = make_registry(protected=("pyproject.toml",), on_approval=on_approval)
    (root / "pyproject.toml").write_text('name = "a"\nversion = "1"\n')
    args = {"path": "pyproject.toml", "old_string": '"1"', "new_string": '"2"'}
    result = registry.call("edit_file", args)
    assert result.structured["status"] == "approval_required"
    assert proposals[0].content == 'name = "a"\nversion = "2"\n'
    assert proposals[0].absolute == str(root / "pyproject.toml")
    assert (root / "pyproject.toml").read_text() == 'name = "a"\nversion = "1"\n'


def test_edit_file_refuses_binary_files(registry, root):
    (root / "b.bin").write_bytes(b"a\x00b")
    result = registry.call("edit_file", {"path": "b.bin", "old_string": "a", "new_string": "c"})
    assert result.is_error and "binary" in text_of(result)
    assert (root / "b.bin").read_bytes() == b"a\x00b"
