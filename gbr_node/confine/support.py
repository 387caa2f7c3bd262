"""Which confinement this machine gives commands, found by trying it (GBR-CONF-01).

A sandbox that only looks available is worse than none (public reports: a
Landlock "best effort" that silently enforced nothing; a probe that said
"supported" while writes outside went through). So the probe runs a real
confined process that must fail to read a file outside its root, must write
inside it, must fail to write a protected file and to connect to a listening
loopback socket; only a mode that passes is used. Namespaces are tried first,
then Landlock alone; the result is kept for the life of the process.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gbr_node.confine import seccomp
from gbr_node.confine.policy import CommandPolicy
from gbr_node.confine.spawn import ZYGOTE, parse_reports, spawn
from gbr_node.sandbox import Sandbox

log = logging.getLogger(__name__)
PROBE_TIMEOUT_S = 10.0
MIN_LANDLOCK_ONLY_ABI = 3  # below, truncate(2) is not covered: a protected file could be emptied


@dataclass(frozen=True)
class Support:
    """The confinement in force: `abi` is the kernel's Landlock ABI (0: none);
    `mode` "namespaces", "landlock" or None (commands would run unconfined);
    `reason` says why a stronger mode is not used (empty when none is missing)."""

    abi: int
    mode: Literal["namespaces", "landlock"] | None
    reason: str = ""

    @property
    def namespaces(self) -> bool:
        """True in namespaces mode."""
        return self.mode == "namespaces"

    def describe(self) -> str:
        """One line for `gbr-node env check` and the start of `run`/`serve`."""
        if self.mode == "namespaces":
            return (
                f"Landlock ABI {self.abi} + user, mount, pid, ipc and network namespaces "
                "(protected paths are read-only bind mounts)"
            )
        if self.mode == "landlock":
            return (
                f"Landlock ABI {self.abi} only, without namespaces ({self.reason}): protected "
                "paths are read-only through per-folder rules, so no new file can be created "
                "directly in a folder that holds one; seccomp refuses unix sockets"
            )
        return f"commands run unconfined: {self.reason}"


def in_force(mode: str, found: Support) -> str:
    """What happens to commands under profile value `confine = mode` on a machine
    offering `found`: one line, for `gbr-node env check` and the start of a node."""
    if mode == "off":
        return (
            f'commands run unconfined: confine = "off" in the profile (offered: {found.describe()})'
        )
    if found.mode is None:
        if mode == "required":
            return (
                'no command runs: confine = "required" in the profile, and this system '
                f"offers no confinement ({found.reason})"
            )
        return found.describe()
    return f"commands run confined: {found.describe()}"


_lock = threading.Lock()
_found: Support | None = None


def support() -> Support:
    """The confinement this process gives commands (probed once, then kept)."""
    global _found
    with _lock:
        if _found is None:
            _found = _probe()
            log.info("confinement of commands: %s", _found.describe())
        return _found


def _probe() -> Support:
    if not sys.platform.startswith("linux"):
        return Support(0, None, f"no OS sandbox on {sys.platform} (Landlock is Linux only)")
    if os.uname().machine not in seccomp.ARCHES:
        return Support(0, None, f"no confinement for machine {os.uname().machine}")
    try:
        abi = ZYGOTE.landlock_abi()
    except OSError as exc:
        return Support(0, None, f"the confinement launcher does not start: {exc}")
    if abi < 1:
        return Support(0, None, "this kernel has no Landlock (ABI 0; needs Linux 5.13+ with it on)")
    failed = self_test(abi, namespaces=True)
    if failed is None:
        return Support(abi, "namespaces")
    why = f"namespaces unusable: {failed}"
    if abi < MIN_LANDLOCK_ONLY_ABI:
        return Support(abi, None, f"{why}; Landlock ABI {abi} alone cannot stop truncation")
    failed_alone = self_test(abi, namespaces=False)
    if failed_alone is None:
        return Support(abi, "landlock", why)
    return Support(abi, None, f"{why}; Landlock alone: {failed_alone}")


def self_test(abi: int, *, namespaces: bool) -> str | None:
    """Run one confined probe process; None when every expectation held, else what
    went wrong (a confinement step that failed, or the check that did not hold)."""
    # A leftover in the temporary folder must not end the node (it once did, through
    # a launcher still building mountpoints in it): the probe's verdict stands.
    with tempfile.TemporaryDirectory(prefix="gbr-probe-", ignore_cleanup_errors=True) as base:
        base = os.path.realpath(base)
        root, outside, home = Path(base, "root"), Path(base, "outside"), Path(base, "home")
        for folder in (root / ".git", root / "work", outside, home):
            folder.mkdir(parents=True)
        for path in (outside / "secret", root / "pyproject.toml", root / ".git" / "config"):
            path.write_text("probe\n")
        policy = CommandPolicy(Sandbox(root, ["pyproject.toml"]), home=str(home))
        with socket.create_server(("127.0.0.1", 0)) as listener:
            checks = [
                ("unreadable", str(outside / "secret")),
                ("writable", str(root / "work" / "written")),
                ("readonly", str(root / "pyproject.toml")),
                ("readonly", str(root / ".git" / "config")),
                ("no_connect", listener.getsockname()[1]),
            ]
            process = spawn(
                policy,
                [sys.executable],
                cwd=root,
                env={},
                abi=abi,
                namespaces=namespaces,
                probe=checks,
            )
            try:
                status = _read_until_closed(process.status, PROBE_TIMEOUT_S)
                output = os.read(process.stdout, 65536).decode("utf-8", "replace")
            finally:
                process.close()
    reports = parse_reports(status)
    failure = next((r.text for r in reports if r.kind in ("F", "E")), None)
    if failure is not None:
        return failure
    exited = [r for r in reports if r.kind == "X"]
    if not exited:
        return "the probe process gave no exit status"
    if os.waitstatus_to_exitcode(exited[0].wait_status) != 0:
        return f"a confined process could still do: {output.strip() or 'something it must not'}"
    return None


def _read_until_closed(fd: int, timeout_s: float) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data
