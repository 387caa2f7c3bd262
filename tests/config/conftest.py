"""Fixtures for profile tests: a real project folder with a `.gbr_envs/` in tmp_path."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest

WriteProfile = Callable[..., pathlib.Path]


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    """An empty project folder holding an empty `.gbr_envs/`."""
    folder = tmp_path / "project"
    (folder / ".gbr_envs").mkdir(parents=True)
    return folder


@pytest.fixture
def write_profile(project: pathlib.Path) -> WriteProfile:
    """Write `.gbr_envs/NAME.SUFFIX` with the given text; returns its path."""

    def write(name: str, text: str, suffix: str = ".toml") -> pathlib.Path:
        path = project / ".gbr_envs" / f"{name}{suffix}"
        path.write_text(text, encoding="utf-8")
        return path

    return write
