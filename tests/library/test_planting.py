"""GBR-PRIV-01: the library reads only what it may, whatever a peer planted in the root.

A peer granted write_file can write a `.venv` into the project; a repository can
ship one. Neither may make search_library or read_library show a file outside
the environment's own site-packages (or outside the root).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gbr_node.config.profile import LibraryConfig
from gbr_node.library.lookup import open_library
from tests.library.conftest import write_dist

MARK = "OUTSIDE_SECRET_CONSTANT"


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """(project, outside): a project (the root) and a folder outside it holding a
    Python package whose text must never be shown."""
    project = tmp_path / "project"
    project.mkdir()
    outside = tmp_path / "outside"
    (outside / "loot").mkdir(parents=True)
    (outside / "loot" / "__init__.py").write_text(
        f'{MARK} = "the person\'s private value"\n\ndef loot_fn():\n    "Private docs."\n'
    )
    return project, outside


def _venv_site(project: Path) -> Path:
    venv = project / ".venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text(
        f"home = {Path.home()}\ninclude-system-site-packages = false\n"
    )
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    return site


def _shown(project: Path) -> str:
    index = open_library(project, LibraryConfig(), root=project)
    index.refresh()
    hits = index.search(MARK) + index.search("loot_fn")
    text = " ".join(f"{h.qualname} {h.file} {h.doc}" for h in hits)
    try:
        text += index.read("loot.loot_fn")
    except Exception as exc:  # a miss names what was asked: that is not a leak
        text += type(exc).__name__
    return text


def test_a_planted_pth_of_an_editable_install_is_not_followed(world) -> None:
    project, outside = world
    site = _venv_site(project)
    dist_info = write_dist(site, "loot", "1.0", {"__editable__.loot-1.0.pth": f"{outside}\n"})
    (dist_info / "direct_url.json").write_text(
        f'{{"url": "file://{outside}", "dir_info": {{"editable": true}}}}'
    )
    assert MARK not in _shown(project) and "loot_fn" not in _shown(project)


def test_a_planted_editable_finder_mapping_is_not_followed(world) -> None:
    project, outside = world
    site = _venv_site(project)
    finder = f"MAPPING = {{'loot': '{outside / 'loot'}'}}\n"
    dist_info = write_dist(site, "loot", "1.0", {"__editable___loot_1_0_finder.py": finder})
    (dist_info / "direct_url.json").write_text(
        '{"url": "file:///x", "dir_info": {"editable": true}}'
    )
    assert MARK not in _shown(project)


def test_a_symlinked_package_in_a_shipped_venv_is_not_read(world) -> None:
    project, outside = world
    site = _venv_site(project)
    write_dist(site, "loot", "1.0", {})
    os.symlink(outside / "loot", site / "loot")
    record = next(site.glob("loot-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text() + "loot/__init__.py,,\n")
    assert MARK not in _shown(project)


def test_a_symlinked_file_in_a_real_package_is_not_read(world) -> None:
    project, outside = world
    site = _venv_site(project)
    write_dist(site, "pkg", "1.0", {"pkg/__init__.py": "def fine():\n    'ok'\n"})
    os.symlink(outside / "loot" / "__init__.py", site / "pkg" / "loot.py")
    record = next(site.glob("pkg-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text() + "pkg/loot.py,,\n")
    index = open_library(project, LibraryConfig(), root=project)
    index.refresh()
    assert index.search("fine")  # the real package is indexed
    assert MARK not in " ".join(h.qualname for h in index.search(MARK))
    with pytest.raises(Exception, match="not a file of the library index|outside"):
        index.read("pkg/loot.py")


def test_an_environment_outside_the_root_that_is_not_the_nodes_own_is_refused(world) -> None:
    project, outside = world
    write_dist(outside / "site", "loot2", "1.0", {"loot2.py": f"{MARK} = 1\n"})
    index = open_library(
        project, LibraryConfig(environments=(str(outside / "site"),)), root=project
    )
    index.refresh()
    assert index.search(MARK) == []
    assert any("outside the allowed root" in p for p in index.problems)


def test_a_pyvenv_cfg_pointing_home_does_not_widen_what_is_read(world, tmp_path) -> None:
    project, outside = world
    site = _venv_site(project)
    (project / ".venv" / "pyvenv.cfg").write_text(f"home = {outside}\n")
    write_dist(site, "ok", "1.0", {"ok.py": "def fine():\n    'ok'\n"})
    shown = _shown(project)
    assert MARK not in shown


def test_a_symlinked_package_in_a_source_folder_is_not_read(world) -> None:
    project, outside = world
    (project / "node_modules").mkdir()
    os.symlink(outside / "loot", project / "node_modules" / "loot")
    index = open_library(
        project, LibraryConfig(environments=(), sources=("node_modules",)), root=project
    )
    index.refresh()
    assert index.search(MARK) == []
