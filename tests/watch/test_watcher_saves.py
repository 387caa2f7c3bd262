"""The running watcher notices every kind of save editors do (ADR-0012a, issue 7 "Watcher").

Real files in tmp_path, a watcher polling every 10 ms; every wait has a timeout.
"""

from __future__ import annotations

import os
import pathlib

import trio

from gbr_node.config.loader import load_profile
from gbr_node.config.watcher import ProfileWatcher
from tests.watch.support import (
    PROFILE,
    assert_nothing_sent,
    next_update,
    save_atomic,
    save_in_place,
    wait_polls,
)


async def test_in_place_save_sends_update_env_with_the_new_prompt_and_snapshot(
    running: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    inode = profile_file.stat().st_ino
    save_in_place(profile_file, PROFILE.replace('"alpha"', '"new prompt"'))
    assert profile_file.stat().st_ino == inode

    update = await next_update(receive)

    assert update.system_prompt == "new prompt"
    assert update.changed == ("system_prompt",)
    assert update.snapshot.system_prompt == "new prompt"
    assert running.active is update.snapshot


async def test_atomic_rename_save_is_noticed(
    running: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    inode = profile_file.stat().st_ino
    save_atomic(profile_file, PROFILE.replace('"a.lock"', '"a.lock", "b.lock"'))
    assert profile_file.stat().st_ino != inode

    update = await next_update(receive)

    assert update.changed == ("protected_files",)
    assert update.snapshot.profile.protected_files == ("a.lock", "b.lock")


async def test_touch_without_content_change_sends_nothing(
    running: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    before = running.statistics()
    os.utime(profile_file)  # touch: new mtime and ctime, same bytes

    await wait_polls(running, 5)

    assert_nothing_sent(receive)
    assert running.statistics().hashes > before.hashes  # it looked, and saw no change
    assert running.statistics().loads == before.loads


async def test_two_same_size_saves_within_one_mtime_tick_are_both_noticed(
    running: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    save_in_place(profile_file, PROFILE.replace('"alpha"', '"bravo"'))
    tick = profile_file.stat()
    assert (await next_update(receive)).system_prompt == "bravo"

    save_in_place(profile_file, PROFILE.replace('"alpha"', '"delta"'))
    os.utime(profile_file, ns=(tick.st_atime_ns, tick.st_mtime_ns))  # a coarse timestamp
    again = profile_file.stat()
    assert (again.st_size, again.st_mtime_ns, again.st_ino) == (
        tick.st_size,
        tick.st_mtime_ns,
        tick.st_ino,
    )

    assert (await next_update(receive)).system_prompt == "delta"


async def test_system_prompt_file_edit_is_noticed(
    project: pathlib.Path, profile_file: pathlib.Path, channel, nursery: trio.Nursery
) -> None:
    prompt = project / "prompts" / "agent.md"
    prompt.parent.mkdir()
    prompt.write_text("Be brief.\n", encoding="utf-8")
    save_in_place(profile_file, 'system_prompt_file = "prompts/agent.md"\n')
    watcher = ProfileWatcher(load_profile(project), channel[0], poll_interval_s=0.01)
    await nursery.start(watcher.run)

    save_atomic(prompt, "Be thorough.\n")

    update = await next_update(channel[1])
    assert update.system_prompt == "Be thorough.\n"
    assert update.changed == ("system_prompt",)


async def test_a_prompt_file_the_profile_starts_pointing_to_is_watched_from_then_on(
    running: ProfileWatcher,
    project: pathlib.Path,
    profile_file: pathlib.Path,
    receive: trio.MemoryReceiveChannel,
) -> None:
    prompt = project / "agent.md"
    prompt.write_text("From a file.\n", encoding="utf-8")
    save_atomic(
        profile_file, PROFILE.replace('system_prompt = "alpha"', 'system_prompt_file = "agent.md"')
    )

    update = await next_update(receive)
    assert update.changed == ("system_prompt", "system_prompt_file")
    assert update.system_prompt == "From a file.\n"

    save_in_place(prompt, "Edited in the file.\n")
    assert (await next_update(receive)).system_prompt == "Edited in the file.\n"


async def test_changed_names_every_top_level_key_that_changed_in_profile_order(
    running: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    text = (
        PROFILE.replace('"alpha"', '"omega"').replace('"a.lock"', '"*.lock"')
        + '[model]\nmodel = "m2"\n[tools]\nread_max_bytes = 10\n'
    )
    save_atomic(profile_file, text)

    update = await next_update(receive)

    assert update.changed == ("system_prompt", "protected_files", "tools", "model")


async def test_edit_that_changes_nothing_in_effect_sends_nothing(
    running: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    save_in_place(profile_file, "# a comment only\n" + PROFILE)
    before = running.statistics().loads

    with trio.fail_after(5):
        while running.statistics().loads == before:
            await trio.sleep(0.005)
    await wait_polls(running, 3)

    assert_nothing_sent(receive)


async def test_reload_takes_the_new_poll_interval_when_none_was_fixed(
    project: pathlib.Path, profile_file: pathlib.Path, channel, nursery: trio.Nursery
) -> None:
    save_in_place(profile_file, PROFILE + "[watch]\npoll_interval_s = 0.02\n")
    watcher = ProfileWatcher(load_profile(project), channel[0])
    assert watcher.poll_interval_s == 0.02
    await nursery.start(watcher.run)

    save_atomic(profile_file, PROFILE + "[watch]\npoll_interval_s = 0.03\n")

    update = await next_update(channel[1])
    assert update.changed == ("watch",)
    assert watcher.poll_interval_s == 0.03


async def test_saves_with_crlf_line_ends_or_a_bom_take_effect(
    running: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    for prompt, data in (
        ("crlf", PROFILE.replace('"alpha"', '"crlf"').replace("\n", "\r\n").encode()),
        ("bom", b"\xef\xbb\xbf" + PROFILE.replace('"alpha"', '"bom"').encode()),
        ("cr", PROFILE.replace('"alpha"', '"cr"').replace("\n", "\r").encode()),
    ):
        profile_file.write_bytes(data)
        update = await next_update(receive)
        assert update.system_prompt == prompt
        assert update.snapshot.profile.protected_files == ("a.lock",)


async def test_a_prompt_file_saved_with_crlf_line_ends_takes_effect(
    project: pathlib.Path, profile_file: pathlib.Path, channel, nursery
) -> None:
    (project / "p.md").write_bytes(b"one\r\n")
    save_in_place(
        profile_file, PROFILE.replace('system_prompt = "alpha"', 'system_prompt_file = "p.md"')
    )
    watcher = ProfileWatcher(load_profile(project), channel[0], poll_interval_s=0.01)
    await nursery.start(watcher.run)
    (project / "p.md").write_bytes(b"two\r\nlines\r\n")

    update = await next_update(channel[1])

    assert update.system_prompt == "two\nlines\n"
