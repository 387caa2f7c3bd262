"""Sandbox on a real filesystem: symlinks, hard links, modes, protected files (UBQ-DEV-01)."""

from __future__ import annotations

import logging
import os
import pathlib
import stat
import sys

import pytest

from gbr_node.errors import SecurityViolation, ToolError
from gbr_node.sandbox import MACOS, POSIX, WINDOWS, Sandbox
from gbr_node.sandbox import sandbox as sandbox_module


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """root/ with src/pkg/mod.py and pyproject.toml; outside/ with secret.txt."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "pyproject.toml").write_text("[project]\n")
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    return root, outside


@pytest.fixture(params=["dir-handles", "paths"])
def write_strategy(request, monkeypatch):
    """Run write tests through both strategies: O_NOFOLLOW handles and path re-checks."""
    if request.param == "paths":
        monkeypatch.setattr(sandbox_module, "HAVE_DIR_FD", False)
    elif not sandbox_module.HAVE_DIR_FD:
        pytest.skip("this OS has no directory handles (dir_fd)")
    return request.param


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
def test_linux_writes_go_through_directory_handles():
    assert sandbox_module.HAVE_DIR_FD


def test_symlink_from_inside_to_outside_is_refused(tree):
    root, outside = tree
    (root / "out_file").symlink_to(outside / "secret.txt")
    (root / "out_dir").symlink_to(outside)
    sandbox = Sandbox(root)
    for path in ("out_file", "out_dir", "out_dir/secret.txt", str(root / "out_file")):
        with pytest.raises(SecurityViolation, match="outside the allowed root through a symlink"):
            sandbox.resolve(path)


def test_symlink_from_inside_to_inside_resolves_to_its_target(tree):
    root, _ = tree
    (root / "pkg_link").symlink_to(root / "src" / "pkg")
    (root / "rel_link").symlink_to("src/pkg/mod.py")
    sandbox = Sandbox(root)
    via_dir = sandbox.resolve("pkg_link/mod.py")
    assert via_dir.path == sandbox.root / "src" / "pkg" / "mod.py"
    assert via_dir.relative == "src/pkg/mod.py"
    assert sandbox.resolve("rel_link").relative == "src/pkg/mod.py"


def test_new_file_under_a_symlinked_folder_pointing_outside_is_refused(tree):
    root, outside = tree
    (root / "out_dir").symlink_to(outside)
    with pytest.raises(SecurityViolation, match="through a symlink"):
        Sandbox(root).resolve("out_dir/new/deeper/file.txt")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_dangling_symlink_pointing_outside_is_refused(tree):
    root, outside = tree
    (root / "dangling").symlink_to(outside / "not-yet")
    with pytest.raises(SecurityViolation):
        Sandbox(root).resolve("dangling")


def test_new_path_resolves_through_its_deepest_existing_ancestor(tree):
    root, _ = tree
    resolved = Sandbox(root).resolve("src/pkg/new/dir/f.txt")
    assert resolved.path == root.resolve() / "src/pkg/new/dir/f.txt"
    assert resolved.relative == "src/pkg/new/dir/f.txt"
    assert not resolved.protected


def test_root_itself_resolves_to_dot(tree):
    root, _ = tree
    sandbox = Sandbox(root)
    for spelling in (".", "./", str(root), "src/.."):
        resolved = sandbox.resolve(spelling)
        assert (resolved.path, resolved.relative) == (sandbox.root, ".")


def test_root_given_through_a_symlink_accepts_both_spellings_of_absolute_paths(tree, tmp_path):
    root, _ = tree
    (tmp_path / "root_link").symlink_to(root)
    sandbox = Sandbox(tmp_path / "root_link")
    assert sandbox.root == root.resolve()
    assert sandbox.resolve(str(tmp_path / "root_link" / "a.txt")).relative == "a.txt"
    assert sandbox.resolve(str(root / "a.txt")).relative == "a.txt"
    with pytest.raises(SecurityViolation, match="outside the allowed root"):
        sandbox.resolve(str(tmp_path / "outside" / "secret.txt"))


def test_dotdot_through_a_symlink_is_taken_lexically_and_stays_inside(tree):
    root, outside = tree
    (root / "out_dir").symlink_to(outside)
    resolved = Sandbox(root).resolve("out_dir/../pyproject.toml")
    assert resolved.relative == "pyproject.toml"


def test_root_that_is_missing_or_a_file_is_refused(tree):
    root, _ = tree
    for bad in (root / "missing", root / "pyproject.toml"):
        with pytest.raises(SecurityViolation, match="not an existing directory"):
            Sandbox(bad)


def test_protected_through_dotdot_spelling(tree):
    root, _ = tree
    resolved = Sandbox(root, ["pyproject.toml"]).resolve("./a/../pyproject.toml")
    assert resolved.protected
    assert resolved.relative == "pyproject.toml"


def test_protected_through_a_symlink_to_it(tree):
    root, _ = tree
    (root / "src" / "innocent.toml").symlink_to(root / "pyproject.toml")
    (root / "hooks").symlink_to(root / ".git" / "hooks", target_is_directory=True)
    sandbox = Sandbox(root, ["pyproject.toml"])
    resolved = sandbox.resolve("src/innocent.toml")
    assert (resolved.relative, resolved.protected) == ("pyproject.toml", True)
    assert sandbox.resolve("hooks/pre-commit").protected


@pytest.mark.parametrize("flavour", [MACOS, WINDOWS], ids=lambda f: f.name)
def test_protected_through_other_case_on_a_case_insensitive_flavour(tree, flavour):
    root, _ = tree
    sandbox = Sandbox(root, ["pyproject.toml"], flavour=flavour)
    assert sandbox.resolve("PYPROJECT.TOML").protected
    assert sandbox.resolve(".Git/config").protected


def test_other_case_is_a_different_unprotected_file_on_posix(tree):
    root, _ = tree
    assert not Sandbox(root, ["pyproject.toml"], flavour=POSIX).resolve("PYPROJECT.TOML").protected


def test_windows_flavour_refuses_device_names_before_touching_the_disk(tree):
    root, _ = tree
    with pytest.raises(SecurityViolation, match="reserved Windows device"):
        Sandbox(root, flavour=WINDOWS).resolve("src\\nul.txt")


def test_protected_under_lists_protected_entries_and_prunes_protected_folders(tree):
    root, _ = tree
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".git" / "config").write_text("")
    (root / "src" / "pkg" / "poetry.lock").write_text("")
    (root / "linked").symlink_to(root / ".git", target_is_directory=True)
    sandbox = Sandbox(root, ["**/*.lock", "pyproject.toml"])
    assert sandbox.protected_under(sandbox.root) == [
        ".git",
        "pyproject.toml",
        "src/pkg/poetry.lock",
    ]
    assert sandbox.protected_under(sandbox.root / "src") == ["src/pkg/poetry.lock"]
    assert sandbox.protected_under(sandbox.root / ".git" / "objects") == [".git/objects"]
    assert sandbox.protected_under(sandbox.root / "src" / "pkg" / "mod.py") == []


def test_protected_under_refuses_a_folder_outside_the_root(tree):
    root, outside = tree
    with pytest.raises(SecurityViolation):
        Sandbox(root).protected_under(outside)


def test_write_atomic_creates_parents_and_writes_the_bytes(tree, write_strategy):
    root, _ = tree
    sandbox = Sandbox(root)
    target = sandbox.resolve("new/deep/file.bin").path
    sandbox.write_atomic(target, b"\x00\x01data")
    assert target.read_bytes() == b"\x00\x01data"
    assert [p.name for p in target.parent.iterdir()] == ["file.bin"]


def test_write_atomic_over_a_hard_link_leaves_the_outside_file_unchanged(tree, write_strategy):
    root, outside = tree
    os.link(outside / "secret.txt", root / "hard.txt")
    sandbox = Sandbox(root)
    sandbox.write_atomic(sandbox.resolve("hard.txt").path, b"overwritten\n")
    assert (root / "hard.txt").read_bytes() == b"overwritten\n"
    assert (outside / "secret.txt").read_text() == "secret\n"


@pytest.mark.parametrize("mode", [0o600, 0o755, 0o640])
def test_write_atomic_keeps_the_mode_of_an_existing_file(tree, write_strategy, mode):
    root, _ = tree
    script = root / "run.sh"
    script.write_text("old\n")
    script.chmod(mode)
    sandbox = Sandbox(root)
    sandbox.write_atomic(sandbox.resolve("run.sh").path, b"new\n")
    assert stat.S_IMODE(script.stat().st_mode) == mode
    assert script.read_text() == "new\n"


def test_write_atomic_gives_new_files_0o644_minus_the_umask(tree, write_strategy):
    root, _ = tree
    sandbox = Sandbox(root)
    previous = os.umask(0o027)
    try:
        sandbox.write_atomic(sandbox.resolve("fresh.txt").path, b"x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((root / "fresh.txt").stat().st_mode) == 0o640


def test_write_atomic_refuses_a_symlink_planted_at_the_final_name_after_the_check(
    tree, write_strategy
):
    root, outside = tree
    sandbox = Sandbox(root)
    target = sandbox.resolve("late.txt").path
    (root / "late.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(SecurityViolation, match="symlink appeared"):
        sandbox.write_atomic(target, b"pwned")
    assert (outside / "secret.txt").read_text() == "secret\n"


def test_write_atomic_refuses_a_symlinked_parent_planted_after_the_check(tree, write_strategy):
    root, outside = tree
    sandbox = Sandbox(root)
    target = sandbox.resolve("later/sub/file.txt").path
    (root / "later").symlink_to(outside)
    with pytest.raises(SecurityViolation, match="symlink appeared"):
        sandbox.write_atomic(target, b"pwned")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_write_atomic_refuses_paths_that_did_not_come_from_resolve(tree, write_strategy):
    root, outside = tree
    sandbox = Sandbox(root)
    for bad in (outside / "x.txt", sandbox.root / "a" / ".." / ".." / "x", sandbox.root):
        with pytest.raises((SecurityViolation, ToolError)):
            sandbox.write_atomic(bad, b"x")
    assert not (root.parent / "x").exists()


def test_write_atomic_onto_a_folder_is_a_tool_error_naming_the_path(tree, write_strategy):
    root, _ = tree
    sandbox = Sandbox(root)
    with pytest.raises(ToolError, match="src/pkg"):
        sandbox.write_atomic(sandbox.resolve("src/pkg").path, b"x")


def test_write_atomic_translates_os_errors_into_tool_errors(tree, write_strategy):
    root, _ = tree
    sandbox = Sandbox(root)
    (root / "src" / "pkg" / "file").write_text("a file where a folder is needed")
    with pytest.raises(ToolError, match="cannot write src/pkg/file/x.txt") as caught:
        sandbox.write_atomic(sandbox.root / "src" / "pkg" / "file" / "x.txt", b"x")
    assert isinstance(caught.value.__cause__, OSError)


def test_case_probe_agrees_with_the_filesystem_and_is_logged(tree, caplog):
    root, _ = tree
    (root / "probe-me").write_text("")
    expected = not (root / "PROBE-ME").exists()
    with caplog.at_level(logging.INFO, logger="gbr_node.sandbox"):
        sandbox = Sandbox(root)
    assert sandbox.probe_case_sensitivity() is expected
    assert "case-sensitive" in caplog.text or "case-insensitive" in caplog.text
    assert [p.name for p in root.iterdir() if p.name.startswith(".gbr")] == []


def test_detected_flavour_takes_the_probed_case_rule_and_an_injected_one_is_kept(tree, monkeypatch):
    root, _ = tree
    sensitive = Sandbox(root).case_sensitive_fs
    monkeypatch.setattr(sandbox_module, "detect_flavour", lambda: MACOS)
    assert Sandbox(root).flavour == MACOS.with_case_sensitive(sensitive)
    assert Sandbox(root, flavour=MACOS).flavour == MACOS


def _read_all(fd: int) -> bytes:
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


@pytest.mark.skipif(not sandbox_module.HAVE_DIR_FD, reason="needs directory handles (dir_fd)")
def test_open_read_refuses_a_symlinked_parent_planted_after_the_check(tree):
    root, outside = tree
    (outside / "pkg").mkdir()
    (outside / "pkg" / "mod.py").write_text("stolen\n")
    sandbox = Sandbox(root)
    target = sandbox.resolve("src/pkg/mod.py").path
    (root / "src" / "pkg").rename(root / "src" / "old")
    (root / "src" / "pkg").symlink_to(outside / "pkg")
    with pytest.raises(SecurityViolation, match="symlink appeared"):
        sandbox.open_read(target)


@pytest.mark.skipif(not sandbox_module.HAVE_DIR_FD, reason="needs directory handles (dir_fd)")
def test_open_read_refuses_a_symlink_planted_at_the_final_name_after_the_check(tree):
    root, outside = tree
    sandbox = Sandbox(root)
    target = sandbox.resolve("pyproject.toml").path
    (root / "pyproject.toml").unlink()
    (root / "pyproject.toml").symlink_to(outside / "secret.txt")
    with pytest.raises(SecurityViolation, match="symlink appeared"):
        sandbox.open_read(target)


def test_open_read_reads_through_links_that_resolve_kept_inside(tree):
    root, _ = tree
    (root / "alias").symlink_to(root / "src")
    sandbox = Sandbox(root)
    assert _read_all(sandbox.open_read(sandbox.resolve("alias/pkg/mod.py").path)) == b"x = 1\n"
    with pytest.raises(FileNotFoundError):
        sandbox.open_read(sandbox.resolve("src/missing/mod.py").path)


@pytest.mark.skipif(not sandbox_module.HAVE_DIR_FD, reason="needs directory handles (dir_fd)")
def test_open_read_of_a_symlink_loop_says_loop(tree):
    root, _ = tree
    (root / "loop1").symlink_to(root / "loop2")
    (root / "loop2").symlink_to(root / "loop1")
    sandbox = Sandbox(root)
    with pytest.raises(ToolError, match="loop1 is a symlink loop"):
        sandbox.open_read(sandbox.resolve("loop1").path)


def test_write_atomic_over_a_symlink_loop_says_loop(tree, write_strategy):
    root, _ = tree
    (root / "loop1").symlink_to(root / "loop2")
    (root / "loop2").symlink_to(root / "loop1")
    sandbox = Sandbox(root)
    with pytest.raises(ToolError, match="loop1 is a symlink loop"):
        sandbox.write_atomic(sandbox.resolve("loop1").path, b"x")
