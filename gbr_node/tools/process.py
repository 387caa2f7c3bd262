"""Run one program with a time limit and an output cap, and kill its whole process group.

POSIX only (process groups, `os.killpg`, `select` on pipes). The program runs in a
new session (`start_new_session=True`), so it and every child it spawns share one
process group that can be killed at once. Output is read while the program runs,
and at most `max_output_bytes` (stdout and stderr together) are kept; the rest
is read and dropped, never buffered. Groups still running when the interpreter
exits (the node stopped by Ctrl-C, SIGTERM or /quit mid-command) are killed
then too (`kill_running_groups`, registered with `atexit`); after a SIGKILL of
the node nothing can run, and they live on until their own end.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gbr_node.errors import ToolError

_CHUNK_BYTES = 64 * 1024
_POLL_S = 0.05  # how often the leader's exit is checked while its pipes stay open
_DRAIN_AFTER_EXIT_S = 1.0  # how long pipes held by a detached process are still read


@dataclass(frozen=True)
class Completed:
    """What a bounded run produced.

    `exit_code` is the leader's exit status (negative: killed by that signal),
    `timed_out` says the time limit ran out before the leader exited (the group
    was then killed), `stdout`/`stderr` are the kept bytes, and `dropped_bytes`
    counts output read past the cap and thrown away.
    """

    exit_code: int
    timed_out: bool
    stdout: bytes
    stderr: bytes
    dropped_bytes: int


_running_groups: set[int] = set()
_running_lock = threading.Lock()


def kill_running_groups() -> int:
    """SIGKILL every process group `run_bounded` started that is still running; returns
    how many. Called at interpreter exit; safe to call at any time."""
    with _running_lock:
        groups = list(_running_groups)
    for pgid in groups:
        _kill_group(pgid)
    return len(groups)


atexit.register(kill_running_groups)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pgid, signal.SIGKILL)


def _has_exited(proc: subprocess.Popen[bytes]) -> bool:
    """True once the leader has exited. Where `os.waitid` exists it is left a
    zombie (not reaped), so its process group id cannot be reused before
    `_kill_group` runs; elsewhere (macOS before Python 3.13) it is reaped."""
    if hasattr(os, "waitid"):
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        return os.waitid(os.P_PID, proc.pid, flags) is not None
    return proc.poll() is not None


def run_bounded(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    max_output_bytes: int,
) -> Completed:
    """Run `args` (args[0] an absolute executable; no shell) in `cwd` with `env`.

    Blocks at most about `timeout_s` seconds (plus the time a SIGKILL takes).
    stdin is /dev/null. When the time runs out, or when the leader exits while
    processes it started are still in its group, the whole group is killed
    with SIGKILL, so no child outlives the call.

    Raises:
        ToolError: the program could not be started (missing, not executable);
            translated from the OSError.
    """
    try:
        proc = subprocess.Popen(
            list(args),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise ToolError(f"could not start {args[0]}: {exc.strerror or exc}") from exc
    with _running_lock:
        _running_groups.add(proc.pid)
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    kept = {out_fd: bytearray(), err_fd: bytearray()}
    budget = max_output_bytes
    dropped = 0
    deadline = time.monotonic() + timeout_s
    exited = timed_out = False
    selector = selectors.DefaultSelector()
    try:
        for fd in kept:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = not exited
                break
            for key, _ in selector.select(min(remaining, _POLL_S)):
                chunk = os.read(key.fd, _CHUNK_BYTES)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                keep = chunk[:budget]
                kept[key.fd] += keep
                budget -= len(keep)
                dropped += len(chunk) - len(keep)
            if not exited and _has_exited(proc):
                exited = True
                _kill_group(proc.pid)  # leftovers die with the command
                deadline = min(deadline, time.monotonic() + _DRAIN_AFTER_EXIT_S)
        if not exited and not timed_out:
            # Both pipes closed but the leader still runs: wait out the limit.
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        selector.close()
        _kill_group(proc.pid)
        proc.wait()
        with _running_lock:
            _running_groups.discard(proc.pid)
        proc.stdout.close()
        proc.stderr.close()
    return Completed(
        exit_code=proc.returncode,
        timed_out=timed_out,
        stdout=bytes(kept[out_fd]),
        stderr=bytes(kept[err_fd]),
        dropped_bytes=dropped,
    )
