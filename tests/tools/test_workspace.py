"""What the embedded model's grammar is told the project holds (tools.workspace, issue 15b)."""

from __future__ import annotations

import os
from pathlib import Path

from gbr_node.sandbox import Sandbox
from gbr_node.tools.workspace import workspace_view


def make(root: Path, files: dict[str, bytes]) -> Sandbox:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return Sandbox(root)


def test_files_with_their_small_texts_and_folders_in_walk_order(tmp_path: Path) -> None:
    sandbox = make(
        tmp_path,
        {
            "b.txt": b"bee\n",
            "a/x.py": b"x = 1\n",
            "big.txt": b"y" * 5000,
            "logo.png": b"\x89PNG\x00\x01",
            "latin.txt": "caf\xe9".encode("latin-1"),
            ".env": b"KEY=1\n",  # a dotfile is a file like another
            ".git/config": b"[core]\n",  # dot-folders (.git, .gbr, .venv) are not walked
            ".gbr/node.log": b"log\n",
        },
    )
    os.symlink(tmp_path / "b.txt", tmp_path / "link.txt")  # links are not followed or listed
    view = workspace_view(sandbox, max_text_bytes=4096)
    assert view is not None
    files, folders = view
    assert folders == (".", "a")
    assert files == {
        ".env": "KEY=1\n",
        "b.txt": "bee\n",
        "big.txt": None,
        "latin.txt": None,
        "logo.png": None,
        "a/x.py": "x = 1\n",
    }


def test_a_large_project_leaves_the_paths_free(tmp_path: Path) -> None:
    sandbox = make(tmp_path, {f"f{n}.txt": b"" for n in range(12)})
    assert workspace_view(sandbox, max_entries=10) is None
    assert workspace_view(sandbox, max_entries=13) is not None


def test_an_empty_project_has_only_its_root(tmp_path: Path) -> None:
    assert workspace_view(Sandbox(tmp_path)) == ({}, (".",))
