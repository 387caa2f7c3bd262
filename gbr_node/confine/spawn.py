"""Start confined processes through the launcher's fork server (GBR-CONF-01).

The node starts `launcher.py` once, as a fork server (the zygote), from a
plain `subprocess.Popen`; each confined command is one request on a unix
socket: the plan (a memfd of marshal data) and the command's stdin, stdout,
stderr and status pipe go over as file descriptors, a pid and a pidfd come
back. The zygote runs in its own session (a Ctrl-C at the terminal does not
reach it) and kills what it started when the node's end of the socket
closes, so commands never outlive the node, even one killed with SIGKILL.
"""

from __future__ import annotations

import atexit
import contextlib
import marshal
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gbr_node.confine.plan import Private, build_plan
from gbr_node.confine.policy import CommandPolicy
from gbr_node.errors import NotConfined

LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launcher.py")
START_TIMEOUT_S = 10.0


class Zygote:
    """The node's end of the launcher fork server; thread-safe, started on first use
    and again after it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._abi = 0

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = subprocess.Popen(
                [sys.executable, "-S", "-I", LAUNCHER, "zygote", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.settimeout(START_TIMEOUT_S)
        try:
            hello = ours.recv(16)
        except OSError:
            hello = b""
        if hello[:1] != b"H" or len(hello) != 5:
            ours.close()
            process.kill()
            process.wait()
            raise OSError("the confinement launcher did not answer")
        self._abi = struct.unpack("=i", hello[1:])[0]
        self._socket, self._process = ours, process

    def _stop(self) -> None:
        if self._socket is not None:
            self._socket.close()
        if self._process is not None:
            self._process.kill()
            self._process.wait()
        self._socket = self._process = None

    def landlock_abi(self) -> int:
        """The kernel's Landlock ABI as the launcher read it. Raises OSError when the
        launcher cannot start."""
        with self._lock:
            if self._socket is None:
                self._start()
            return self._abi

    def request(
        self, plan: bytes, fds: tuple[int, int, int, int], *, common: bool
    ) -> tuple[int, int]:
        """Have the zygote launch `plan` with `fds` (stdin, stdout, stderr, status);
        returns (pid, pidfd) of the launcher process. `common`: a namespaces plan
        without network, which a launcher made ahead of time can take. Raises
        OSError."""
        with self._lock:
            if self._socket is None or (self._process and self._process.poll() is not None):
                self._stop()
                self._start()
            assert self._socket is not None
            memfd = os.memfd_create("gbr-plan", os.MFD_CLOEXEC)
            try:
                view = memoryview(plan)
                while view:
                    view = view[os.write(memfd, view) :]
                os.lseek(memfd, 0, os.SEEK_SET)
                try:
                    kind = b"Sn" if common else b"Sx"
                    socket.send_fds(self._socket, [kind], [memfd, *fds])
                    message, got, _, _ = socket.recv_fds(self._socket, 16, 1)
                except OSError:
                    self._stop()
                    raise
            finally:
                os.close(memfd)
            if message[:1] != b"P" or len(message) != 5 or len(got) != 1:
                for fd in got:
                    os.close(fd)
                self._stop()
                raise OSError("the confinement launcher gave no process")
            return struct.unpack("=i", message[1:])[0], got[0]


ZYGOTE = Zygote()


@dataclass
class ConfinedProcess:
    """A running confined command: `stdout`, `stderr` and `status` are the read
    ends of its pipes (see `launcher.py` for the status frames), `pidfd` the
    launcher process, `private` its private folder (Landlock-only mode; None
    with namespaces). `close()` once done."""

    pid: int
    pidfd: int
    stdout: int
    stderr: int
    status: int
    private: Private | None

    def kill(self) -> None:
        """SIGKILL the launcher: the command and everything it started die with it."""
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def close(self) -> None:
        """Kill what is left, close the pipes, remove the private folder."""
        self.kill()
        for fd in (self.pidfd, self.stdout, self.stderr, self.status):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.private is not None:
            remove_tree(self.private.base)


def remove_tree(path: str) -> None:
    """Remove `path`, also what a command left unwritable (mode 0 folders)."""

    def unlock(function: Callable[[str], object], failed: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), 0o700)
            os.chmod(failed, 0o700)
            function(failed)

    shutil.rmtree(path, onerror=unlock)


_new_root_lock = threading.Lock()
_new_root: str | None = None


def new_root_mountpoint() -> str:
    """An empty folder to mount new roots on, one per node process: each command
    mounts its own tmpfs there, in its own mount namespace, so nothing of it is
    ever written to disk. Removed when the process exits."""
    global _new_root
    with _new_root_lock:
        if _new_root is None:
            _new_root = os.path.realpath(tempfile.mkdtemp(prefix="gbr-root-"))
            atexit.register(_remove_new_root, _new_root)
        return _new_root


def _remove_new_root(path: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(path)


def spawn(
    policy: CommandPolicy,
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    abi: int,
    namespaces: bool,
    probe: list[tuple[str, object]] | None = None,
    stdin: int | None = None,
) -> ConfinedProcess:
    """Start `argv` (argv[0] absolute) confined by `policy`; its stdin is the open file
    descriptor `stdin` (the caller keeps and closes it), or /dev/null.

    `abi` and `namespaces` say which confinement to apply (`support.Support`).
    A `probe` (support.self_test) runs the checks instead of `argv`, in a launcher
    forked for it alone: no warm launcher is made ready for its root.
    The plan is built now (protected paths as they exist now). Raises
    NotConfined when the launcher cannot be reached; a confinement step that
    fails later is reported on the status pipe instead.
    """
    private = None if namespaces else Private(os.path.realpath(tempfile.mkdtemp(prefix="gbr-cmd-")))
    opened: list[int] = []
    try:
        if private is not None:
            private.create()
        plan = build_plan(
            policy,
            abi=abi,
            argv=argv,
            cwd=cwd,
            env=env,
            new_root=new_root_mountpoint(),
            private=private,
            probe=probe,
        )
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        opened = [out_r, out_w, err_r, err_w, status_r, status_w]
        if stdin is None:
            stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            opened.append(stdin)
        # A probe is not the common plan: the zygote would warm a spare launcher for its
        # root, whose mountpoints it builds in the probe's folder while that is removed.
        common = namespaces and not policy.network and probe is None
        pid, pidfd = ZYGOTE.request(
            marshal.dumps(plan), (stdin, out_w, err_w, status_w), common=common
        )
    except BaseException as exc:
        for fd in opened:
            os.close(fd)
        if private is not None:
            remove_tree(private.base)
        if isinstance(exc, OSError):
            raise NotConfined(f"not run: the confinement launcher failed: {exc}") from exc
        raise
    for fd in (out_w, err_w, status_w, *opened[6:]):  # the /dev/null we opened, if any
        os.close(fd)
    return ConfinedProcess(pid, pidfd, out_r, err_r, status_r, private)


@dataclass(frozen=True)
class Report:
    """What the status pipe said: `kind` F (confinement failed, nothing ran), E (the
    program could not be started; `errno`), X (exited; `wait_status`), or "" when
    the pipe closed without a word (the launcher was killed)."""

    kind: str
    text: str = ""
    errno: int = 0
    wait_status: int = 0


def parse_reports(data: bytes) -> list[Report]:
    """The status frames in `data` (kind, u32 length, payload) [pure]; a torn frame at
    the end is dropped."""
    reports = []
    while len(data) >= 5:
        kind = data[:1].decode("ascii", "replace")
        (length,) = struct.unpack("=I", data[1:5])
        payload, data = data[5 : 5 + length], data[5 + length :]
        if len(payload) != length:
            break
        if kind == "X" and length == 4:
            reports.append(Report("X", wait_status=struct.unpack("=i", payload)[0]))
        elif kind == "E" and length >= 4:
            text = payload[4:].decode("utf-8", "replace")
            reports.append(Report("E", text, errno=struct.unpack("=i", payload[:4])[0]))
        else:
            reports.append(Report(kind, payload.decode("utf-8", "replace")))
    return reports
