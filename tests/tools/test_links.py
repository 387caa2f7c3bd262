"""Hard links and a root spelled through a symlink, as the tools see them (issue 12, "Paths").

A regular file with more than one hard link may be another name of a file
outside the root, where no path check can see it: reading it is refused by
default (`[tools] allow_hardlinks = true` allows it). A root reached through
a symlink (a symlinked `allowed_root`, or a project folder reached through a
symlink) admits absolute paths spelled with that link.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gbr_node.config.loader import build_sandbox, load_profile
from gbr_node.errors import SecurityViolation
from gbr_node.tools import build_registry
from tests.tools.conftest import SYSTEM_PATH
from tests.tools.helpers import text_of

RUN = {"run_command": {"allow": ["cat", "ls"]}}


def _outside_file(root: Path, outside: Path) -> Path:
    os.link(outside / "secret.txt", root / "notes.txt")
    return root / "notes.txt"


def _inside_file(root: Path, outside: Path) -> Path:
    (root / "a.txt").write_text("outside secret\n")
    os.link(root / "a.txt", root / "notes.txt")
    return root / "notes.txt"


def _in_a_subfolder(root: Path, outside: Path) -> Path:
    (root / "deep" / "er").mkdir(parents=True)
    os.link(outside / "secret.txt", root / "deep" / "er" / "notes.txt")
    os.symlink("deep/er/notes.txt", root / "notes.txt")
    return root / "notes.txt"


def _behind_a_symlink_inside(root: Path, outside: Path) -> Path:
    os.link(outside / "secret.txt", root / "target.txt")
    os.symlink("target.txt", root / "notes.txt")
    return root / "notes.txt"


# (name, how the hard link is planted); each leaves root/notes.txt naming it
HARD_LINKS = [
    ("another_name_of_an_outside_file", _outside_file),
    ("another_name_of_an_inside_file", _inside_file),
    ("in_a_subfolder_reached_by_a_symlink", _in_a_subfolder),
    ("behind_a_symlink_kept_inside", _behind_a_symlink_inside),
]

# (tool, arguments); each reads notes.txt
READS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "notes.txt"}),
    ("edit_file", {"path": "notes.txt", "old_string": "secret", "new_string": "s"}),
    ("run_command", {"argv": ["cat", "notes.txt"]}),
    ("run_command", {"argv": ["ls", "-l", "--", "notes.txt"]}),
]


@pytest.mark.parametrize("plant", [c[1] for c in HARD_LINKS], ids=[c[0] for c in HARD_LINKS])
@pytest.mark.parametrize(
    ("tool", "arguments"), READS, ids=[r[1]["argv"][0] if "argv" in r[1] else r[0] for r in READS]
)
def test_a_hard_linked_file_is_not_read_by_default(
    make_registry, root, outside, plant: Callable, tool, arguments
) -> None:
    plant(root, outside)
    registry = make_registry(**RUN)
    with pytest.raises(SecurityViolation, match=r"hard link.*allow_hardlinks = true"):
        registry.call(tool, arguments)
    assert (outside / "secret.txt").read_text() == "outside secret\n"


def test_search_skips_a_hard_linked_file_and_says_so(make_registry, root, outside) -> None:
    _outside_file(root, outside)
    (root / "plain.txt").write_text("no secret here\n")
    text = text_of(make_registry().call("search_text", {"pattern": "secret"}))
    assert "notes.txt" not in text
    assert "plain.txt:1: no secret here" in text
    assert "hard-linked" in text


@pytest.mark.parametrize("plant", [c[1] for c in HARD_LINKS], ids=[c[0] for c in HARD_LINKS])
def test_allow_hardlinks_lets_the_tools_read_them(make_registry, root, outside, plant) -> None:
    plant(root, outside)
    registry = make_registry(allow_hardlinks=True, **RUN)
    assert "outside secret" in text_of(registry.call("read_file", {"path": "notes.txt"}))
    assert "outside secret" in text_of(registry.call("run_command", {"argv": ["cat", "notes.txt"]}))


def test_a_file_with_one_link_and_folders_are_read_as_before(make_registry, root) -> None:
    (root / "sub").mkdir()
    (root / "sub" / "a.txt").write_text("hello\n")
    registry = make_registry(**RUN)
    assert "hello" in text_of(registry.call("read_file", {"path": "sub/a.txt"}))
    assert "a.txt" in text_of(registry.call("run_command", {"argv": ["ls", "sub"]}))


def _registry_of(project: Path):
    loaded = load_profile(project)
    return build_registry(loaded.profile.tools, build_sandbox(loaded), search_path=SYSTEM_PATH)


@pytest.fixture
def linked(tmp_path: Path) -> dict[str, Path]:
    """project/ (real) with real-src/a.txt and src -> real-src; project-link -> project."""
    project = tmp_path / "project"
    (project / ".gbr_envs").mkdir(parents=True)
    (project / "real-src").mkdir()
    (project / "real-src" / "a.txt").write_text("hello\n")
    os.symlink("real-src", project / "src")
    os.symlink(project, tmp_path / "project-link")
    return {"project": project, "link": tmp_path / "project-link"}


# (name, allowed_root, project folder as reached, absolute spelling of the file)
SPELLINGS = [
    ("root_given_through_a_symlink", "src", "project", "{project}/src/a.txt"),
    ("project_reached_through_a_symlink", "real-src", "link", "{link}/real-src/a.txt"),
    ("both_links", "src", "link", "{link}/src/a.txt"),
    ("both_links_root_spelled_really", "src", "link", "{project}/src/a.txt"),
    ("both_links_project_spelled_really", "src", "link", "{link}/real-src/a.txt"),
]


@pytest.mark.parametrize(
    ("allowed_root", "reached", "spelling"),
    [c[1:] for c in SPELLINGS],
    ids=[c[0] for c in SPELLINGS],
)
def test_paths_spelled_through_the_roots_symlinks_are_inside(
    linked, allowed_root, reached, spelling
) -> None:
    profile = f'allowed_root = "{allowed_root}"\n[tools.run_command]\nallow = ["cat"]\n'
    (linked["project"] / ".gbr_envs" / "default.toml").write_text(profile)
    registry = _registry_of(linked[reached])
    path = spelling.format(**linked)
    assert "hello" in text_of(registry.call("read_file", {"path": path}))
    assert "hello" in text_of(registry.call("run_command", {"argv": ["cat", path]}))
    with pytest.raises(SecurityViolation):
        registry.call("read_file", {"path": path.replace("/a.txt", "/../../secret")})
