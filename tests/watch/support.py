"""Helpers for the profile watcher tests: real saves the way editors do them,
and waits that always have a timeout."""

from __future__ import annotations

import os
import pathlib

import pytest
import trio

from gbr_node.agent.messages import UpdateEnv
from gbr_node.config.events import ProfileRejected
from gbr_node.config.loader import LoadedProfile
from gbr_node.config.watcher import ProfileWatcher

WAIT_S = 5.0
TEST_POLL_S = 0.01

PROFILE = """\
system_prompt = "alpha"
allowed_root = "."
protected_files = ["a.lock"]
"""


def save_in_place(path: pathlib.Path, text: str) -> None:
    """Truncate and rewrite the same inode (nano, vim with backupcopy=yes)."""
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)


def save_atomic(path: pathlib.Path, text: str) -> None:
    """Write a temporary file next to `path` and rename it over (vim, VS Code, JetBrains)."""
    temporary = path.with_name(path.name + ".tmp~")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


async def next_message(receive: trio.MemoryReceiveChannel) -> UpdateEnv | ProfileRejected:
    with trio.fail_after(WAIT_S):
        return await receive.receive()


async def next_update(receive: trio.MemoryReceiveChannel) -> UpdateEnv:
    message = await next_message(receive)
    assert isinstance(message, UpdateEnv), message
    assert isinstance(message.snapshot, LoadedProfile)
    return message


async def next_rejection(receive: trio.MemoryReceiveChannel) -> ProfileRejected:
    message = await next_message(receive)
    assert isinstance(message, ProfileRejected), message
    return message


async def wait_polls(watcher: ProfileWatcher, count: int) -> None:
    """Return once the watcher has done `count` more polls."""
    target = watcher.statistics().polls + count
    with trio.fail_after(WAIT_S):
        while watcher.statistics().polls < target:
            await trio.sleep(TEST_POLL_S / 2)


def assert_nothing_sent(receive: trio.MemoryReceiveChannel) -> None:
    with pytest.raises(trio.WouldBlock):
        receive.receive_nowait()
