"""A broken, half-written or deleted profile is reported once and the old one stays
in force (ADR-0012a, issue 7 "Refuse"); `/env reload` and `/env use NAME` (issue 7 "Switch").

Tests that need to place a save between two particular polls drive the watcher
with `poll_once()` (one poll, exactly as `run` does it) instead of the timer.
"""

from __future__ import annotations

import os
import pathlib

import pytest
import trio

from gbr_node.agent.messages import UpdateEnv
from gbr_node.config import changes
from gbr_node.config.events import ProfileRejected
from gbr_node.config.loader import load_profile
from gbr_node.config.watcher import ProfileWatcher
from tests.watch.support import (
    PROFILE,
    WAIT_S,
    assert_nothing_sent,
    next_rejection,
    next_update,
    save_atomic,
    save_in_place,
    wait_polls,
)

BROKEN = PROFILE + 'sytem_prompt = "typo"\n'  # line 4: unknown key


async def test_broken_save_keeps_the_old_profile_and_is_reported_once_with_file_line_key(
    running: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    before = running.active
    save_in_place(profile_file, BROKEN)

    rejection = await next_rejection(receive)
    await wait_polls(running, 5)

    assert (rejection.file, rejection.line, rejection.key) == (str(profile_file), 4, "sytem_prompt")
    assert "system_prompt" in rejection.message  # the suggestion
    assert str(rejection).startswith(f"{profile_file}:4 [sytem_prompt]: unknown key")
    assert_nothing_sent(receive)
    assert running.active is before


async def test_fix_after_a_broken_save_sends_update_env(
    running: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    save_atomic(profile_file, BROKEN)
    await next_rejection(receive)

    save_atomic(profile_file, PROFILE.replace('"alpha"', '"fixed"'))

    update = await next_update(receive)
    assert update.system_prompt == "fixed"
    assert running.active.system_prompt == "fixed"


async def test_restoring_the_content_in_force_after_a_broken_save_says_it_is_valid_again(
    running: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    save_atomic(profile_file, BROKEN)
    await next_rejection(receive)

    save_atomic(profile_file, PROFILE)

    update = await next_update(receive)
    assert update.changed == ()
    await wait_polls(running, 5)
    assert_nothing_sent(receive)


async def test_a_different_broken_save_is_reported_again(
    running: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    save_atomic(profile_file, BROKEN)
    first = await next_rejection(receive)

    save_atomic(profile_file, PROFILE + "[tools]\nread_max_bytes = -1\n")

    second = await next_rejection(receive)
    assert (first.key, second.key) == ("sytem_prompt", "tools.read_max_bytes")


async def test_deleted_profile_warns_once_and_a_recreated_one_applies(
    running: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    before = running.active
    profile_file.unlink()

    rejection = await next_rejection(receive)
    await wait_polls(running, 5)
    assert_nothing_sent(receive)
    assert rejection.file == str(profile_file)
    assert "missing" in rejection.message
    assert running.active is before

    save_in_place(profile_file, PROFILE.replace('"alpha"', '"reborn"'))
    assert (await next_update(receive)).system_prompt == "reborn"


async def test_a_missing_root_is_reported_and_applies_once_the_folder_exists(
    running: ProfileWatcher,
    project: pathlib.Path,
    profile_file: pathlib.Path,
    receive: trio.MemoryReceiveChannel,
) -> None:
    save_atomic(profile_file, PROFILE.replace('allowed_root = "."', 'allowed_root = "src"'))
    assert (await next_rejection(receive)).key == "allowed_root"

    (project / "src").mkdir()  # no profile save: the watcher retries while broken

    update = await next_update(receive)
    assert update.changed == ("allowed_root",)
    assert update.snapshot.root == project.resolve() / "src"


async def test_half_written_file_gets_one_more_poll_and_no_warning_when_whole_by_then(
    watcher: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    await watcher.poll_once()  # the first poll confirms the profile on disk
    whole = PROFILE.replace('"alpha"', '"complete"')
    save_in_place(profile_file, whole[:10])  # `system_pr`: not TOML yet

    assert await watcher.poll_once() is None
    save_in_place(profile_file, whole)
    update = await watcher.poll_once()

    assert isinstance(update, UpdateEnv) and update.system_prompt == "complete"
    assert await next_update(receive) == update
    assert_nothing_sent(receive)


# In-place saves caught between the writer's two writes (issue 12): each part
# parses as a valid profile or as an empty one, with protected files missing.
TORN = [
    ("zero_bytes", ""),
    ("header_comments_only", "# gbr-node environment profile\n# protected files below\n"),
    ("first_key_only", 'system_prompt = "whole"\n'),
    ("all_but_the_last_line", 'system_prompt = "whole"\nallowed_root = "."\n'),
]


@pytest.mark.parametrize("pause_s", [0.1, 0.4])
@pytest.mark.parametrize("part", [c[1] for c in TORN], ids=[c[0] for c in TORN])
async def test_a_save_caught_between_its_two_writes_never_takes_effect(
    watcher: ProfileWatcher,
    profile_file: pathlib.Path,
    receive: trio.MemoryReceiveChannel,
    nursery: trio.Nursery,
    part: str,
    pause_s: float,
) -> None:
    await watcher.poll_once()
    whole = PROFILE.replace('"alpha"', '"whole"')
    save_in_place(profile_file, part)
    loads = watcher.statistics().loads
    outcome: list[object] = []

    async def poll() -> None:
        outcome.append(await watcher.poll_once())

    nursery.start_soon(poll)
    with trio.fail_after(WAIT_S):
        while watcher.statistics().loads == loads:  # it is reading the first part
            await trio.sleep(0)
    await trio.sleep(pause_s)  # the second write comes within the 500 ms hold
    save_in_place(profile_file, whole)
    with trio.fail_after(WAIT_S):
        while not outcome:
            await trio.sleep(0.001)
    await watcher.poll_once()
    await watcher.poll_once()

    sent = []
    while True:
        try:
            sent.append(receive.receive_nowait())
        except trio.WouldBlock:
            break
    assert [m.snapshot.profile.protected_files for m in sent] == [("a.lock",)]
    assert sent[0].system_prompt == "whole"
    assert watcher.active.profile.protected_files == ("a.lock",)


async def test_a_profile_replaced_by_a_symlink_out_of_the_project_is_refused(
    running: ProfileWatcher,
    project: pathlib.Path,
    profile_file: pathlib.Path,
    receive: trio.MemoryReceiveChannel,
    tmp_path: pathlib.Path,
) -> None:
    outside = tmp_path / "elsewhere.toml"
    outside.write_text('system_prompt = "from elsewhere"\n', encoding="utf-8")
    link = profile_file.with_name("link.tmp")
    link.symlink_to(outside)
    link.replace(profile_file)

    rejection = await next_rejection(receive)

    assert "outside the project folder" in rejection.message
    assert running.active.profile.protected_files == ("a.lock",)
    assert running.active.system_prompt == "alpha"


async def test_a_prompt_file_replaced_by_a_fifo_is_refused_and_blocks_nothing(
    project: pathlib.Path,
    profile_file: pathlib.Path,
    channel,
    nursery: trio.Nursery,
) -> None:
    (project / "p.md").write_text("before\n")
    save_in_place(profile_file, 'system_prompt_file = "p.md"\n')
    watcher = ProfileWatcher(load_profile(project), channel[0], poll_interval_s=0.01)
    await nursery.start(watcher.run)
    (project / "p.md").unlink()
    os.mkfifo(project / "p.md")  # no writer: a plain read would wait forever

    rejection = await next_rejection(channel[1])

    assert "FIFO" in rejection.message and rejection.key == "system_prompt_file"
    assert watcher.active.system_prompt == "before\n"
    with trio.fail_after(WAIT_S):
        assert await watcher.check_now() == rejection  # the watcher still answers


async def test_a_save_during_env_reload_is_what_the_reload_applies(
    watcher: ProfileWatcher,
    profile_file: pathlib.Path,
    receive: trio.MemoryReceiveChannel,
    nursery: trio.Nursery,
) -> None:
    await watcher.poll_once()
    save_in_place(profile_file, PROFILE.replace('"alpha"', '"first"'))
    loads = watcher.statistics().loads
    outcome: list[object] = []

    async def reload() -> None:
        outcome.append(await watcher.check_now())

    nursery.start_soon(reload)
    with trio.fail_after(WAIT_S):
        while watcher.statistics().loads == loads:  # it is holding "first"
            await trio.sleep(0)
    await trio.sleep(0.1)
    save_atomic(profile_file, PROFILE.replace('"alpha"', '"second"'))
    with trio.fail_after(WAIT_S):
        while not outcome:
            await trio.sleep(0.001)

    (update,) = outcome
    assert isinstance(update, UpdateEnv) and update.system_prompt == "second"
    assert await next_update(receive) == update
    assert_nothing_sent(receive)


async def test_broken_file_is_reported_at_the_second_poll_and_never_again(
    watcher: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    await watcher.poll_once()
    save_in_place(profile_file, BROKEN)

    outcomes = [await watcher.poll_once() for _ in range(5)]

    assert outcomes[0] is None
    assert isinstance(outcomes[1], ProfileRejected)
    assert outcomes[2:] == [None, None, None]
    assert await next_rejection(receive) == outcomes[1]
    assert_nothing_sent(receive)


async def test_unchanged_settled_files_are_only_stat_ed_never_hashed_or_reloaded(
    watcher: ProfileWatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A zero racy window: every stamp is settled at once, as if the files were old.
    monkeypatch.setattr(changes, "RACY_WINDOW_NS", 0)
    await watcher.poll_once()
    before = watcher.statistics()

    for _ in range(10):
        assert await watcher.poll_once() is None

    after = watcher.statistics()
    assert after.polls - before.polls == 10
    assert (after.hashes, after.loads) == (before.hashes, before.loads)


async def test_check_now_on_an_unchanged_profile_sends_nothing(
    watcher: ProfileWatcher, receive: trio.MemoryReceiveChannel
) -> None:
    assert await watcher.check_now() is None
    assert_nothing_sent(receive)


async def test_check_now_reports_a_broken_file_at_once_and_again_when_asked_again(
    watcher: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    await watcher.poll_once()
    save_in_place(profile_file, BROKEN)

    first = await watcher.check_now()
    second = await watcher.check_now()

    assert isinstance(first, ProfileRejected) and first == second
    assert [await next_rejection(receive), await next_rejection(receive)] == [first, second]


async def test_switch_puts_another_profile_in_force_and_watches_its_file(
    running: ProfileWatcher, project: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    other = project / ".gbr_envs" / "review.toml"
    other.write_text(PROFILE.replace('"alpha"', '"reviewer"'), encoding="utf-8")

    update = await running.switch("review")

    assert update == await next_update(receive)
    assert update.changed == ("system_prompt",)
    assert running.active.name == "review"
    save_atomic(other, PROFILE.replace('"alpha"', '"stricter reviewer"'))
    assert (await next_update(receive)).system_prompt == "stricter reviewer"


async def test_switch_to_a_profile_with_the_same_content_still_sends_update_env(
    watcher: ProfileWatcher, project: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    (project / ".gbr_envs" / "twin.toml").write_text(PROFILE, encoding="utf-8")

    update = await watcher.switch("twin")

    assert isinstance(update, UpdateEnv)
    assert update.changed == () and update.snapshot.name == "twin"
    assert await next_update(receive) == update


async def test_switch_to_a_missing_profile_is_rejected_and_the_active_one_stays(
    watcher: ProfileWatcher, receive: trio.MemoryReceiveChannel
) -> None:
    before = watcher.active

    rejection = await watcher.switch("nope")

    assert isinstance(rejection, ProfileRejected)
    assert "not found" in rejection.message and "default" in rejection.message
    assert await next_rejection(receive) == rejection
    assert watcher.active is before


async def test_run_confirms_a_profile_edited_before_the_watcher_started(
    project: pathlib.Path, profile_file: pathlib.Path, channel, nursery: trio.Nursery
) -> None:
    current = load_profile(project)
    save_in_place(profile_file, PROFILE.replace('"alpha"', '"edited meanwhile"'))
    watcher = ProfileWatcher(current, channel[0], poll_interval_s=0.01)

    await nursery.start(watcher.run)

    assert (await next_update(channel[1])).system_prompt == "edited meanwhile"


def test_zero_poll_interval_is_refused_naming_the_argument(project: pathlib.Path, channel) -> None:
    with pytest.raises(ValueError, match="poll_interval_s"):
        ProfileWatcher(load_profile(project), channel[0], poll_interval_s=0)


async def test_closing_the_receiver_stops_the_watcher_with_an_error_not_silently(
    watcher: ProfileWatcher, profile_file: pathlib.Path, receive: trio.MemoryReceiveChannel
) -> None:
    await watcher.poll_once()
    await receive.aclose()
    save_in_place(profile_file, PROFILE.replace('"alpha"', '"nobody listens"'))

    with pytest.raises(trio.BrokenResourceError):
        await watcher.poll_once()
    assert watcher.active.system_prompt == "alpha"
