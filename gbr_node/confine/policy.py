"""What a confined command may touch, and the built-in secrets it may never read.

`CommandPolicy` is the input of `confine.spawn` (GBR-CONF-01): the sandbox
(allowed root and protected files), the executables the command may be
(their install prefixes become readable), the network switch and the
profile's extra readable and secret paths. `run_command` builds one per
profile load (`for_commands`), the write checks (issue 17) can build theirs
the same way.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gbr_node.config.profile import RunCommandConfig
from gbr_node.sandbox import Sandbox
from gbr_node.sandbox.caller import caller_is_remote
from gbr_node.sandbox.private import HOME_SECRETS, NODE_STATE, SYSTEM_SECRETS

__all__ = ["HOME_SECRETS", "SYSTEM_SECRETS", "CommandPolicy", "for_commands"]

Mode = Literal["auto", "required", "off"]

SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
"""Read and execute for every confined command (symlinks such as /bin -> usr/bin kept)."""


@dataclass(frozen=True)
class CommandPolicy:
    """What a confined command may read, write and reach (GBR-CONF-01).

    `sandbox`: its root is read-write, its protected files read-only, its
    `.gbr/` unreadable. `executables`: absolute paths of the programs the
    command may be; each one, and the install prefix it belongs to, is
    readable. `network`: TCP/UDP allowed. `read_paths`: extra folders or
    files, readable. `secret_paths`: never readable, on top of
    `SYSTEM_SECRETS` and `HOME_SECRETS` (globs; `~` is the home folder).
    `mode`: "auto" (confine where the OS can, else run unconfined and say
    so), "required" (refuse to run unconfined) or "off". `home`: the home
    folder whose secrets are meant (default: `~` now).
    """

    sandbox: Sandbox
    executables: tuple[str, ...] = ()
    network: bool = False
    read_paths: tuple[str, ...] = ()
    secret_paths: tuple[str, ...] = ()
    mode: Mode = "auto"
    home: str = field(default_factory=lambda: os.path.expanduser("~"))

    @property
    def root(self) -> Path:
        """The allowed root, resolved."""
        return self.sandbox.root

    def secrets(self) -> list[str]:
        """Absolute resolved paths of every secret that exists now: the built-in
        ones, `secret_paths`, and whatever the sandbox keeps private from the
        caller of the command (GBR-PRIV-01: for a peer, the profiles too)."""
        home = os.path.realpath(self.home)
        patterns = [*SYSTEM_SECRETS, *(os.path.join(home, name) for name in HOME_SECRETS)]
        patterns += [os.path.expanduser(p) for p in self.secret_paths]
        patterns += self.sandbox.private.everyone
        if caller_is_remote():
            patterns += self.sandbox.private.remote
        found = {os.path.realpath(hit) for hit in _expand(patterns)}
        found.add(os.path.join(self.sandbox.root, NODE_STATE))
        existing = sorted(path for path in found if os.path.lexists(path))
        # the topmost only: a secret folder hides what is below it
        return [p for p in existing if not any(p.startswith(q + os.sep) for q in existing)]


def _expand(patterns: list[str]) -> list[str]:
    """The existing paths `patterns` name: like `glob.glob`, but each folder is
    listed once for all the patterns whose wildcards are in the last name (the
    common case: this runs before every command)."""
    found: list[str] = []
    listings: dict[str, list[str]] = {}
    for pattern in patterns:
        folder, name = os.path.split(pattern)
        if not glob.has_magic(pattern):
            if os.path.lexists(pattern):
                found.append(pattern)
        elif glob.has_magic(folder):
            found += glob.glob(pattern)
        else:
            if folder not in listings:
                try:
                    listings[folder] = os.listdir(folder)
                except OSError:
                    listings[folder] = []
            hits = fnmatch.filter(listings[folder], name)
            found += [os.path.join(folder, hit) for hit in hits if not hit.startswith(".")]
    return found


def for_commands(
    config: RunCommandConfig, sandbox: Sandbox, executables: tuple[str, ...]
) -> CommandPolicy:
    """The policy of `[tools.run_command]` (`config`) over `sandbox`."""
    return CommandPolicy(
        sandbox=sandbox,
        executables=executables,
        network=config.network,
        read_paths=tuple(os.path.expanduser(p) for p in config.read_paths),
        secret_paths=config.secret_paths,
        mode=config.confine,
    )
