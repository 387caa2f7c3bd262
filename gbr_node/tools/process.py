"""Run one program with a time limit and an output cap, confined where the OS can.

POSIX only (process groups, `os.killpg`, `select` on pipes). Output is read
while the program runs, and at most `max_output_bytes` (stdout and stderr
together) are kept; the rest is read and dropped, never buffered.

Two kinds of child, one loop:

- confined (GBR-CONF-01; `confine.spawn`): started by the launcher's fork
  server; in namespaces mode it is pid 1 of its own pid namespace, so when it
  exits, or is killed at the time limit, the kernel kills everything it
  started, daemons that left its process group included;
- unconfined (`confine = "off"`, or no OS sandbox here): `subprocess.Popen`
  in a new session, so it and the children that stay in its process group
  can be killed at once.

A `Stop` ends a run from another thread at once (the agent's `/s` during a
write check): the program and what it started are killed as at the time limit.

Processes still running when the interpreter exits (the node stopped by
Ctrl-C, SIGTERM or /quit mid-command) are killed then too
(`kill_running_groups`, registered with `atexit`); after a SIGKILL of the node,
confined commands die with the launcher's fork server, unconfined groups live
on until their own end. A call that is abandoned while its program runs (the
caller went away, its time limit ran out) sets the run's `CANCEL` event, and
the program and what it started are killed within `_POLL_S`.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import logging
import os
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gbr_node.confine import CommandPolicy, Support, support
from gbr_node.confine.spawn import parse_reports, spawn
from gbr_node.errors import NotConfined, ToolError

log = logging.getLogger(__name__)

_CHUNK_BYTES = 64 * 1024
_POLL_S = 0.05  # how often the leader's exit is checked while its pipes stay open
_DRAIN_AFTER_EXIT_S = 1.0  # how long pipes held by a detached process are still read


@dataclass(frozen=True)
class Completed:
    """What a bounded run produced.

    `exit_code` is the program's exit status (negative: killed by that signal),
    `timed_out` says the time limit ran out before it exited (then it and what
    it started were killed), `stdout`/`stderr` are the kept bytes,
    `dropped_bytes` counts output read past the cap and thrown away, and
    `stopped` says a `Stop` killed it.
    """

    exit_code: int
    timed_out: bool
    stdout: bytes
    stderr: bytes
    dropped_bytes: int
    stopped: bool = False


CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "gbr_cancel_run", default=None
)
"""Set by the async caller of a blocking tool (`Registry.run`) when it stops
waiting for it; `run_bounded` then kills the program and returns."""


class Stop:
    """Stops `run_bounded` calls from any thread (thread-safe).

    `stop()` kills the running program and everything it started with SIGKILL
    at once; a run that starts after `stop()` is killed as soon as it has
    started. `stopped` says whether `stop()` was called.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kill: Callable[[], None] | None = None
        self.stopped = False

    def stop(self) -> None:
        """Kill the program being run now (if any) and every later one."""
        with self._lock:
            self.stopped = True
            kill = self._kill
        if kill is not None:
            kill()

    def attach(self, kill: Callable[[], None] | None) -> None:
        """`run_bounded`'s side: `kill` ends the program running now (None once it is
        reaped, so that a late `stop()` cannot signal a reused process id)."""
        with self._lock:
            self._kill = kill
            stopped = self.stopped
        if stopped and kill is not None:
            kill()


def _input_fd(data: bytes) -> int:
    """A readable file descriptor holding `data` from offset 0 (a memfd, or an unlinked
    temporary file where there are none); the caller closes it."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("gbr-stdin", os.MFD_CLOEXEC)
    else:
        with tempfile.TemporaryFile() as handle:
            fd = os.dup(handle.fileno())
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class _Unconfined:
    """A Popen child in its own session; `kill` kills its process group."""

    def __init__(
        self, args: Sequence[str], cwd: Path, env: Mapping[str, str], stdin: int | None
    ) -> None:
        try:
            self._proc = subprocess.Popen(
                list(args),
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL if stdin is None else stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise ToolError(f"could not start {args[0]}: {exc.strerror or exc}") from exc
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self.outputs = (self._proc.stdout.fileno(), self._proc.stderr.fileno())
        self.status = None
        self.exit_fd: int | None = None  # readable once the leader exited (Linux pidfd)
        if hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):
                self.exit_fd = os.pidfd_open(self._proc.pid)

    def has_exited(self) -> bool:
        """True once the leader has exited. Where `os.waitid` exists it is left a
        zombie (not reaped), so its process group id cannot be reused before
        `kill` runs; elsewhere (macOS before Python 3.13) it is reaped."""
        if hasattr(os, "waitid"):
            flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
            return os.waitid(os.P_PID, self._proc.pid, flags) is not None
        return self._proc.poll() is not None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
            os.killpg(self._proc.pid, signal.SIGKILL)

    def finish(self) -> int:
        self.kill()
        self._proc.wait()
        return self._proc.returncode

    def close(self) -> None:
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()
        if self.exit_fd is not None:
            os.close(self.exit_fd)
            self.exit_fd = None


class _Confined:
    """A child of the launcher: exit known from its status pipe (see launcher.py)."""

    def __init__(
        self,
        policy: CommandPolicy,
        found: Support,
        args: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        stdin: int | None,
    ) -> None:
        self._program = args[0]
        self._process = spawn(
            policy,
            list(args),
            cwd=cwd,
            env=env,
            abi=found.abi,
            namespaces=found.namespaces,
            stdin=stdin,
        )
        self.outputs = (self._process.stdout, self._process.stderr)
        self.status = self._process.status
        self._reports = b""
        self._closed = False

    def on_status(self, chunk: bytes) -> None:
        """Data from the status pipe; b"" when it closed."""
        self._reports += chunk
        self._closed = self._closed or not chunk

    def has_exited(self) -> bool:
        return self._closed or any(r.kind in "FX" for r in parse_reports(self._reports))

    def kill(self) -> None:
        self._process.kill()

    def finish(self) -> int:
        """The exit code. Raises NotConfined (nothing ran) or ToolError (not started)."""
        self.kill()
        reports = parse_reports(self._reports)
        for report in reports:
            if report.kind == "F":
                log.warning("confinement failed, %s not run: %s", self._program, report.text)
                raise NotConfined(
                    f"not run: the OS sandbox could not be applied to this command "
                    f"({report.text}); nothing was started"
                )
            if report.kind == "E":
                raise ToolError(f"could not start {self._program}: {report.text}")
        exited = [r for r in reports if r.kind == "X"]
        if exited:
            return os.waitstatus_to_exitcode(exited[0].wait_status)
        return -signal.SIGKILL  # the launcher was killed (time limit, or by hand)

    def close(self) -> None:
        self._process.close()


_Child = _Unconfined | _Confined
_running: set[_Child] = set()
_running_lock = threading.Lock()


def kill_running_groups() -> int:
    """SIGKILL every command `run_bounded` started that is still running (with what it
    started); returns how many. Called at interpreter exit; safe to call at any time."""
    with _running_lock:
        children = list(_running)
    for child in children:
        child.kill()
    return len(children)


atexit.register(kill_running_groups)


def confinement(policy: CommandPolicy | None) -> Support | None:
    """The confinement `policy` gets here, or None to run unconfined (no policy,
    `mode = "off"`, or no OS sandbox and `mode = "auto"`).

    Raises:
        NotConfined: `mode = "required"` and this system offers no confinement.
    """
    if policy is None or policy.mode == "off":
        return None
    found = support()
    if found.mode is not None:
        return found
    if policy.mode == "required":
        raise NotConfined(
            'not run: the profile requires confinement (confine = "required") and this '
            f"system offers none: {found.reason}"
        )
    return None


def run_bounded(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    max_output_bytes: int,
    policy: CommandPolicy | None = None,
    stdin: bytes | None = None,
    stop: Stop | None = None,
) -> Completed:
    """Run `args` (args[0] an absolute executable; no shell) in `cwd` with `env`.

    Blocks at most about `timeout_s` seconds (plus the time a SIGKILL takes).
    stdin is `stdin` (bytes the program reads from offset 0), else /dev/null.
    When the time runs out, when `stop` is stopped, when the caller sets the
    `CANCEL` event of this context (checked every `_POLL_S` seconds), or when the
    program exits while processes it started still run, they are all killed
    with SIGKILL.
    `policy` confines the program as `confinement(policy)` says (GBR-CONF-01);
    a confined program also gets its own TMPDIR and HOME (`confine.plan`).

    Raises:
        ToolError: the program could not be started (missing, not executable).
        NotConfined: the policy could not be applied; nothing ran.
    """
    found = confinement(policy)
    cancel = CANCEL.get() or threading.Event()
    stdin_fd = None if stdin is None else _input_fd(stdin)
    try:
        if found is not None and policy is not None:
            child: _Child = _Confined(policy, found, args, cwd, env, stdin_fd)
        else:
            child = _Unconfined(args, cwd, env, stdin_fd)
    finally:
        if stdin_fd is not None:
            os.close(stdin_fd)
    with _running_lock:
        _running.add(child)
    if stop is not None:
        stop.attach(child.kill)
    out_fd, err_fd = child.outputs
    kept = {out_fd: bytearray(), err_fd: bytearray()}
    budget = max_output_bytes
    dropped = 0
    deadline = time.monotonic() + timeout_s
    exited = timed_out = False
    selector = selectors.DefaultSelector()
    try:
        for fd in (*kept, child.status):
            if fd is not None:
                selector.register(fd, selectors.EVENT_READ)
        while any(fd in kept for fd in selector.get_map()) and not cancel.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = not exited
                break
            for key, _ in selector.select(min(remaining, _POLL_S)):
                chunk = os.read(key.fd, _CHUNK_BYTES)
                if key.fd == child.status:
                    child.on_status(chunk)
                    if not chunk:
                        selector.unregister(key.fd)
                    continue
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                keep = chunk[:budget]
                kept[key.fd] += keep
                budget -= len(keep)
                dropped += len(chunk) - len(keep)
            if not exited and child.has_exited():
                exited = True
                child.kill()  # leftovers die with the command
                deadline = min(deadline, time.monotonic() + _DRAIN_AFTER_EXIT_S)
        if not exited and not timed_out and not cancel.is_set():
            timed_out = not _wait_exit(child, selector, deadline, cancel)
        if stop is not None:
            stop.attach(None)
        exit_code = child.finish()
    finally:
        if stop is not None:
            stop.attach(None)
        selector.close()
        child.kill()
        with _running_lock:
            _running.discard(child)
        child.close()
    return Completed(
        exit_code=exit_code,
        timed_out=timed_out,
        stdout=bytes(kept[out_fd]),
        stderr=bytes(kept[err_fd]),
        dropped_bytes=dropped,
        stopped=stop is not None and stop.stopped,
    )


def _wait_exit(
    child: _Child, selector: selectors.BaseSelector, deadline: float, cancel: threading.Event
) -> bool:
    """Both output pipes closed but the program still runs: wait for its exit until
    `deadline` or until `cancel` is set; False when the time ran out. An unconfined
    child's pidfd wakes the wait at its exit (else it is polled every `_POLL_S`
    seconds)."""
    exit_fd = getattr(child, "exit_fd", None)
    if exit_fd is not None:
        selector.register(exit_fd, selectors.EVENT_READ)
    while not child.has_exited() and not cancel.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        for key, _ in selector.select(min(remaining, _POLL_S)):
            if key.fd == exit_fd:
                continue
            chunk = os.read(key.fd, _CHUNK_BYTES)
            if isinstance(child, _Confined):  # the only kind with a status pipe
                child.on_status(chunk)
            if not chunk:
                selector.unregister(key.fd)
    return True
