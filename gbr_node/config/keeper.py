"""The profile keeper: the profile in force, hot reload (ADR-0012a) and `/env`.

`ProfileKeeper` holds the `LoadedProfile` in force and hands every valid new
one (an `UpdateEnv` from `config.watcher.ProfileWatcher`) to the node's
services in the order the composition root (`control.Node`) wired them: first
each `appliers` entry puts it in force (all or none: one that raises has the
previous profile applied again), then each `reactions` entry does what a
change asks of it (the agent's system message, the model client, peers no
longer trusted), then one line says what changed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from gbr_node.config.events import ProfileRejected, UpdateEnv
from gbr_node.config.loader import LoadedProfile, list_profiles, render_effective
from gbr_node.config.network import NodeConfig
from gbr_node.config.render import summary
from gbr_node.config.watcher import ProfileWatcher
from gbr_node.errors import GbrError
from gbr_node.slash import Command
from gbr_node.textcells import RESET, YELLOW

Applier = Callable[[LoadedProfile], None]
"""Puts a validated profile in force; GbrError, ValueError or OSError refuse it."""
Reaction = Callable[[UpdateEnv, LoadedProfile], Awaitable[None]]
"""Acts on a profile put in force: (the update, the profile before it)."""


def reload_notice(previous_name: str, update: UpdateEnv) -> str:
    """The one line that announces a profile put in force: switched or reloaded, what
    changed, and, when the rules got looser, how, in yellow (issue 12)."""
    name = update.snapshot.name
    if name != previous_name:
        line = f"switched to profile {name}"
    else:
        what = ", ".join(update.changed) or "valid again, nothing changed"
        line = f"profile {name} reloaded: {what}"
    if update.loosened:
        line = f"{YELLOW}{line}; LOOSER RULES: {'; '.join(update.loosened)}{RESET}"
    return line


def _at_next_start(before: NodeConfig, after: NodeConfig) -> str:
    """The line saying which changed `[node]` keys wait for a restart, or "": `listen`,
    `mdns` and the relay keys are read once, when the node starts (issue 23)."""
    keys = [k for k in NodeConfig.model_fields if k in ("listen", "mdns") or k.startswith("relay")]
    changed = [key for key in keys if getattr(before, key) != getattr(after, key)]
    if not changed:
        return ""
    return f"[node] {', '.join(changed)} changed: in force at the next start of the node"


class ProfileKeeper:
    """The profile in force (`loaded`) and its hot reload; answers `/env`.

    `notice` shows one line to the person (late-bound by the caller: the REPL
    takes over from `print` once it is drawn).
    """

    commands = (
        Command(
            "env",
            "[all|use NAME]",
            "the profile in one screen (all: whole); use NAME switches; reload",
            completes="env",
        ),
    )

    def __init__(self, loaded: LoadedProfile, notice: Callable[[str], None]) -> None:
        self.loaded = loaded
        self.notice = notice
        self.appliers: list[Applier] = []
        self.reactions: list[Reaction] = []
        self.watcher: ProfileWatcher | None = None

    def apply(self, loaded: LoadedProfile) -> None:
        """Put `loaded` in force in every applier, in order (at start, and on reload)."""
        for applier in self.appliers:
            applier(loaded)
        self.loaded = loaded

    def profile_names(self) -> list[str]:
        """The profiles of this project (Tab after `/env use`)."""
        return list_profiles(self.loaded.project_dir)

    async def command(self, name: str, args: str) -> str:
        """`/env` shows a one-screen summary of the active profile, `/env all` all of it;
        `/env use NAME` switches; `/env reload` checks now.

        Switching and reloading follow the hot-reload rules (ADR-0012a): the
        outcome is announced like any reload, and a broken profile changes nothing.
        """
        word, _, rest = args.strip().partition(" ")
        if not word:
            loaded = self.loaded
            lines = summary(loaded.profile, loaded.name, str(loaded.file), str(loaded.root))
            return "\n".join(lines)
        if word == "all":
            return f"profile {self.loaded.name} ({self.loaded.file})\n" + render_effective(
                self.loaded
            )
        if self.watcher is None:
            raise GbrError("profile watching is not running")
        if word == "use" and rest.strip():
            await self.watcher.switch(rest.strip())
            return ""
        if word == "reload":
            outcome = await self.watcher.check_now()
            return "" if outcome is not None else f"profile {self.loaded.name} is unchanged"
        raise GbrError("usage: /env, /env all, /env use NAME, /env reload")

    async def run(
        self,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,  # type: ignore[name-defined]  # stale trio-typing stubs (see pyproject)
    ) -> None:
        """Watch the active profile's file and follow it until cancelled (ADR-0012a)."""
        send, receive = trio.open_memory_channel[UpdateEnv | ProfileRejected](16)
        self.watcher = ProfileWatcher(self.loaded, send)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.follow_profile, receive)
            await nursery.start(self.watcher.run)
            task_status.started()

    async def follow_profile(
        self, receive: trio.MemoryReceiveChannel[UpdateEnv | ProfileRejected]
    ) -> None:
        """Apply what the watcher sends (ADR-0012a): a valid profile is put in force
        for every call that starts after it, each reaction runs (the agent's system
        message is replaced, peers no longer trusted are disconnected...), and one
        line says what changed; a rejected profile is reported and the old one stays."""
        async for message in receive:
            if isinstance(message, ProfileRejected):
                self.notice(
                    f"{YELLOW}profile not reloaded, the previous one stays: {message}{RESET}"
                )
                continue
            previous = self.loaded
            try:
                self.apply(message.snapshot)
            except (GbrError, ValueError, OSError) as exc:
                self.notice(f"{YELLOW}profile not applied, the previous one stays: {exc}{RESET}")
                self.apply(previous)
                continue
            for reaction in self.reactions:
                await reaction(message, previous)
            self.notice(reload_notice(previous.name, message))
            later = _at_next_start(previous.profile.node, message.snapshot.profile.node)
            if later:
                self.notice(f"{YELLOW}{later}{RESET}")
