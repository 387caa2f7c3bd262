"""Fixtures for the profile watcher tests: a real project in tmp_path and a
watcher of its default profile (helpers in `support.py`)."""

from __future__ import annotations

import pathlib

import pytest
import trio

from gbr_node.config.loader import load_profile
from gbr_node.config.watcher import ProfileWatcher
from tests.watch.support import PROFILE, TEST_POLL_S


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    """A project folder with `.gbr_envs/default.toml` (PROFILE)."""
    folder = tmp_path / "project"
    (folder / ".gbr_envs").mkdir(parents=True)
    (folder / ".gbr_envs" / "default.toml").write_text(PROFILE, encoding="utf-8")
    return folder


@pytest.fixture
def profile_file(project: pathlib.Path) -> pathlib.Path:
    return project / ".gbr_envs" / "default.toml"


@pytest.fixture
def channel() -> tuple[trio.MemorySendChannel, trio.MemoryReceiveChannel]:
    return trio.open_memory_channel(100)


@pytest.fixture
def watcher(project: pathlib.Path, channel) -> ProfileWatcher:
    """A watcher of the default profile polling every TEST_POLL_S seconds (not started)."""
    return ProfileWatcher(load_profile(project), channel[0], poll_interval_s=TEST_POLL_S)


@pytest.fixture
async def running(watcher: ProfileWatcher, nursery: trio.Nursery) -> ProfileWatcher:
    """The watcher, started in the test's nursery (cancelled when the test ends)."""
    await nursery.start(watcher.run)
    return watcher


@pytest.fixture
def receive(channel) -> trio.MemoryReceiveChannel:
    """Where the watcher's messages arrive."""
    return channel[1]
