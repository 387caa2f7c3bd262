"""move_path, delete_path, list_dir on a real temporary root (UBQ-DEV-01, EVD-AI-01)."""

from __future__ import annotations

import pytest

from gbr_node.errors import SecurityViolation
from gbr_node.tools.tree import MAX_LIST_ENTRIES
from tests.tools.helpers import text_of, tree_snapshot


@pytest.fixture
def registry(make_registry):
    return make_registry(protected=("pyproject.toml", "conf/*.yaml"))


def test_move_path_renames_a_file_and_creates_missing_parents(registry, root):
    (root / "a.txt").write_text("a\n")
    result = registry.call("move_path", {"source": "a.txt", "destination": "x/y/b.txt"})
    assert text_of(result) == "moved a.txt to x/y/b.txt"
    assert not (root / "a.txt").exists()
    assert (root / "x/y/b.txt").read_text() == "a\n"


def test_move_path_moves_a_symlink_not_its_target(registry, root):
    (root / "real.txt").write_text("r\n")
    (root / "link").symlink_to("real.txt")
    registry.call("move_path", {"source": "link", "destination": "renamed"})
    assert (root / "renamed").is_symlink()
    assert (root / "real.txt").read_text() == "r\n"


def test_move_path_refuses_an_existing_destination(registry, root):
    (root / "a.txt").write_text("a\n")
    (root / "b.txt").write_text("b\n")
    result = registry.call("move_path", {"source": "a.txt", "destination": "b.txt"})
    assert result.is_error and "already exists" in text_of(result)
    assert (root / "b.txt").read_text() == "b\n"


@pytest.mark.parametrize(
    ("source", "destination"),
    [
        ("pyproject.toml", "moved.toml"),  # away from a protected file
        ("a.txt", "pyproject.toml"),  # onto a protected file
        ("a.txt", ".git/hooks/pre-commit"),  # into an always-protected folder
        ("conf", "elsewhere"),  # a folder holding a protected file
        ("plain", "conf"),  # a folder whose file would become protected
    ],
)
def test_move_path_touching_a_protected_path_needs_approval_and_moves_nothing(
    registry, root, source, destination
):
    (root / "pyproject.toml").write_text("[project]\n")
    (root / "a.txt").write_text("a\n")
    (root / "conf").mkdir()
    (root / "conf/app.yaml").write_text("k: v\n")
    (root / "plain").mkdir()
    (root / "plain/db.yaml").write_text("k: v\n")
    if destination == "conf":
        (root / "conf/app.yaml").unlink()
        (root / "conf").rmdir()
    before = tree_snapshot(root)
    result = registry.call("move_path", {"source": source, "destination": destination})
    assert result.structured["status"] == "approval_required"
    assert result.structured["tool"] == "move_path"
    assert tree_snapshot(root) == before


def test_move_path_refuses_the_root_and_paths_outside(registry, root, outside):
    result = registry.call("move_path", {"source": ".", "destination": "elsewhere"})
    assert result.is_error and "root" in text_of(result)
    (root / "a.txt").write_text("a\n")
    with pytest.raises(SecurityViolation):
        registry.call("move_path", {"source": "a.txt", "destination": "../outside/a.txt"})
    with pytest.raises(SecurityViolation):
        registry.call("move_path", {"source": str(outside / "secret.txt"), "destination": "s"})
    assert (root / "a.txt").exists() and (outside / "secret.txt").exists()


def test_delete_path_deletes_a_file(registry, root):
    (root / "a.txt").write_text("a\n")
    assert text_of(registry.call("delete_path", {"path": "a.txt"})) == "deleted a.txt"
    assert not (root / "a.txt").exists()


def test_delete_path_deletes_a_folder_with_its_contents(registry, root):
    (root / "d/e").mkdir(parents=True)
    (root / "d/e/f.txt").write_text("f\n")
    result = registry.call("delete_path", {"path": "d"})
    assert text_of(result) == "deleted folder d and 2 entries in it"
    assert not (root / "d").exists()


def test_delete_path_of_a_symlink_removes_the_link_only(registry, root, outside):
    (root / "real.txt").write_text("r\n")
    (root / "link").symlink_to("real.txt")
    (root / "dirlink").symlink_to(".")
    registry.call("delete_path", {"path": "link"})
    registry.call("delete_path", {"path": "dirlink"})
    assert not (root / "link").is_symlink() and not (root / "dirlink").is_symlink()
    assert (root / "real.txt").read_text() == "r\n"


@pytest.mark.parametrize("path", [".", "sub/..", "{root}"])
def test_delete_path_refuses_the_root(registry, root, path):
    (root / "sub").mkdir()
    result = registry.call("delete_path", {"path": path.format(root=root)})
    assert result.is_error and "root" in text_of(result)
    assert (root / "sub").is_dir()


@pytest.mark.parametrize("path", ["pyproject.toml", "conf", "conf/app.yaml", ".git", ".gbr_envs"])
def test_delete_path_of_a_protected_path_or_its_folder_needs_approval(registry, root, path):
    (root / "pyproject.toml").write_text("[project]\n")
    (root / "conf").mkdir()
    (root / "conf/app.yaml").write_text("k: v\n")
    (root / ".git").mkdir()
    (root / ".git/HEAD").write_text("ref: refs/heads/main\n")
    (root / ".gbr_envs").mkdir()
    (root / ".gbr_envs/default.toml").write_text("\n")
    before = tree_snapshot(root)
    result = registry.call("delete_path", {"path": path})
    assert result.structured["status"] == "approval_required"
    assert result.structured["detail"]["protected"]
    assert tree_snapshot(root) == before


def test_delete_path_outside_the_root_is_refused(registry, root, outside):
    with pytest.raises(SecurityViolation):
        registry.call("delete_path", {"path": "../outside/secret.txt"})
    assert (outside / "secret.txt").exists()


def test_list_dir_shows_folders_files_and_links_and_skips_git(registry, root):
    (root / ".git").mkdir()
    (root / ".git/HEAD").write_text("x")
    (root / "src/pkg").mkdir(parents=True)
    (root / "src/pkg/m.py").write_text("x = 1\n")
    (root / "README").write_text("hi\n")
    (root / "link").symlink_to("src")
    text = text_of(registry.call("list_dir", {}))
    assert text.splitlines() == [
        "./ (depth 1): 1 file, 1 folder, 1 link",
        "README (3 bytes)",
        "link@",
        "src/",
    ]
    deep = text_of(registry.call("list_dir", {"path": "src", "depth": 2}))
    assert deep.splitlines() == [
        "src/ (depth 2): 1 file, 1 folder",
        "src/pkg/",
        "src/pkg/m.py (6 bytes)",
    ]


def test_list_dir_output_is_bounded_and_says_how_many_were_cut(registry, root):
    for n in range(MAX_LIST_ENTRIES + 7):
        (root / f"f{n:04}").write_text("")
    lines = text_of(registry.call("list_dir", {})).splitlines()
    assert len(lines) == 1 + MAX_LIST_ENTRIES + 1
    assert lines[-1].startswith("[7 more entries not shown")


def test_list_dir_of_a_file_is_an_error(registry, root):
    (root / "a.txt").write_text("")
    assert registry.call("list_dir", {"path": "a.txt"}).is_error
