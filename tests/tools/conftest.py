"""Fixtures for the local tools: a real temporary root, a sandbox over it, and
registries built from a `[tools]` table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gbr_node.config.profile import ToolsConfig
from gbr_node.sandbox import Sandbox
from gbr_node.tools import Registry, build_registry

SYSTEM_PATH = "/usr/bin:/bin"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty project root (resolved, so paths compare equal to the sandbox's)."""
    folder = tmp_path / "root"
    folder.mkdir()
    return folder.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the root, with a file the tools must never reach."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("outside secret\n")
    return folder.resolve()


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A folder outside the root for test programs."""
    folder = tmp_path / "bin"
    folder.mkdir()
    return folder.resolve()


MakeRegistry = Callable[..., Registry]


@pytest.fixture
def make_registry(root: Path) -> MakeRegistry:
    """`make_registry(protected=(), search_path=SYSTEM_PATH, on_approval=None, **tools)`:
    a registry over `root` whose `[tools]` table is `tools`."""

    def make(
        *,
        protected: tuple[str, ...] = (),
        search_path: str | None = SYSTEM_PATH,
        on_approval=None,
        **tools: object,
    ) -> Registry:
        config = ToolsConfig.model_validate(tools)
        sandbox = Sandbox(root, protected, allow_hardlinks=config.allow_hardlinks)
        return build_registry(config, sandbox, search_path=search_path, on_approval=on_approval)

    return make


def unconfined(make: MakeRegistry) -> MakeRegistry:
    """`make` with run_command's confinement off unless a test says otherwise: the
    tests of run_command's own checks must see them hold where the OS cannot confine
    commands (the confinement has its own tests, tests/confine)."""

    def make_unconfined(**tools: object) -> Registry:
        rules = tools.get("run_command")
        if isinstance(rules, dict):
            tools["run_command"] = {"confine": "off", **rules}
        return make(**tools)

    return make_unconfined
