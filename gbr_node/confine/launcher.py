"""The confinement launcher: a fork server whose children confine themselves, then
start a command (GBR-CONF-01).

Standalone on purpose: it runs as `python -S -I launcher.py zygote FD` and
imports only the standard library, never gbr_node. The node starts it once
(`confine.spawn.Zygote`) and sends it one request per command; the command costs
forks of this small process, not an interpreter start, and nothing runs between
fork and exec in the node's own threaded process: there is no `preexec_fn`.

Everything here is mechanical: the node decides (`confine.plan`), this file
does what the plan says, in this order, and stops at the first failure without
running the command (fail closed):

    L, the launcher (forked by the zygote; for the common plan, namespaces
    without network, a spare L is forked ahead of time and already waits in I;
    one more per recent root (`SPARES`) has that new root built already: a plan
    whose mounts are the same, over the same files, skips the mounts, see
    `_Spares`):
      namespaces mode: unshare(user, mount, pid, ipc[, net]), map our uid/gid,
      fork -> I, pid 1 of the new pid namespace:
        private propagation, a tmpfs new root, the plan's mounts (bind mounts
        made read-only with mount_setattr, tmpfs, a fresh /proc, empty mounts
        over secrets), pivot_root, the old root detached
      Landlock-only mode: L is I, a subreaper, and nothing above happens
      I: drop every capability, no_new_privs, Landlock ruleset, seccomp filter
      posix_spawn -> C, the command; I reaps everything until C exits

Reports go to the status pipe (fd 3), framed as kind, u32 length, payload:
`F` + text (a confinement step failed, nothing ran), `E` + errno + text (the
command could not start), `X` + wait status (C exited). The zygote's hello is
`H` + the kernel's Landlock ABI. When I (pid 1) exits, the kernel kills what
is left in its namespace; without namespaces I kills its leftovers itself. L
and I die with their parent (PR_SET_PDEATHSIG), so killing L kills the whole
command, and the zygote kills every L when the node's socket closes.

Why not the `landlock` package from PyPI: it wraps only the filesystem part of
ABI 1-5 (no network rules, no scopes), is an alpha, and this file needs ctypes
for unshare, mount, pivot_root, prctl, capset and seccomp anyway; the three
Landlock syscalls are a dozen lines here.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import marshal
import os
import selectors
import signal
import socket
import stat
import struct
import sys
from typing import Any

_LIBC = ctypes.CDLL(None, use_errno=True)
_SYSCALL = _LIBC.syscall
_SYSCALL.restype = ctypes.c_long

# Syscalls without a glibc wrapper (asm-generic numbers for the newer ones).
_NR = {
    "x86_64": {"pivot_root": 155, "capset": 126, "seccomp": 317},
    "aarch64": {"pivot_root": 41, "capset": 91, "seccomp": 277},
}.get(os.uname().machine, {})
_NR.update(openat2=437, mount_setattr=442)
_NR.update(landlock_create_ruleset=444, landlock_add_rule=445, landlock_restrict_self=446)

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x20000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH, AT_FDCWD, AT_EMPTY_PATH, AT_RECURSIVE = 2, -100, 0x1000, 0x8000
RESOLVE_NO_SYMLINKS = 0x04
MOUNT_ATTR = {"ro": 1 | 2 | 4, "rw": 2 | 4, "dev": 2, "rofs": 1 | 2 | 4 | 8}
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER = 1, 24, 36
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
SECCOMP_SET_MODE_FILTER = 1
O_PATH = getattr(os, "O_PATH", 0o10000000)
MAX_FD = 1 << 20
SPARES = 3  # warm launchers kept, one per recent new root (run_command's, the checks')
HAND_OVER_TIMEOUT_S = 5.0  # a spare's I answers at once; it may be descheduled under load


class SetupError(Exception):
    """A confinement step failed: the command must not run."""


class _MountAttr(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("attr_set", "attr_clr", "propagation", "userns")]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(result: int, step: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise SetupError(f"{step}: {os.strerror(code)} (errno {code})")
    return result


def _syscall(name: str, step: str, *args: object) -> int:
    if name not in _NR:
        raise SetupError(f"{step}: unsupported machine {os.uname().machine}")
    return _check(_SYSCALL(_NR[name], *args), step)


def _prctl(option: int, value: int, step: str) -> None:
    _check(_LIBC.prctl(option, ctypes.c_ulong(value), 0, 0, 0), step)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is absent or disabled."""
    result = _SYSCALL(_NR["landlock_create_ruleset"], None, 0, 1)
    return max(int(result), 0)


# -- the pieces of a plan -------------------------------------------------------


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _enter_namespaces(plan: dict[str, Any]) -> None:
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC
    if not plan["network"]:
        flags |= CLONE_NEWNET
    uid, gid = os.getuid(), os.getgid()
    _check(_LIBC.unshare(flags), "unshare user, mount, pid, ipc and network namespaces")
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        raise SetupError(f"map uid/gid into the user namespace: {exc.strerror}") from exc


def _mountpoint(path: str, like: str) -> None:
    """Make `path` exist (a folder, or an empty file when `like` is not a folder)."""
    if os.path.lexists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if like == "dir" or os.path.isdir(like):
        os.mkdir(path, 0o755)
    else:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))


def _open_path(path: str, step: str) -> int:
    """An O_PATH descriptor of `path`, refusing any symlink on the way: plan paths
    are resolved, so a symlink there was planted after planning (RESOLVE_NO_SYMLINKS)."""
    how = struct.pack("=QQQ", O_PATH | os.O_CLOEXEC, 0, RESOLVE_NO_SYMLINKS)
    return _syscall("openat2", f"{step}: {path}", AT_FDCWD, path.encode(), how, len(how))


def _set_attr(path: str, attrs: int, recursive: bool, step: str) -> None:
    """Set mount attributes on the mount whose root is `path` (it was just mounted)."""
    attr = _MountAttr(attrs, 0, 0, 0)
    flags = AT_EMPTY_PATH | (AT_RECURSIVE if recursive else 0)
    fd = _open_path(path, step)
    try:
        _syscall("mount_setattr", step, fd, b"", flags, ctypes.byref(attr), 32)
    finally:
        os.close(fd)


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    """mount(2) with the source (for a bind) and the target opened by `_open_path`."""
    step = f"mount {fstype or source} on {target}"
    opened: list[int] = []
    try:
        if source is not None and fstype is None:
            opened.append(_open_path(source, step))
            source = f"/proc/self/fd/{opened[-1]}"
        opened.append(_open_path(target, step))
        target_fd = f"/proc/self/fd/{opened[-1]}"

        def encode(text: str | None) -> bytes | None:
            return None if text is None else text.encode()

        result = _LIBC.mount(
            encode(source), target_fd.encode(), encode(fstype), flags, encode(data)
        )
        _check(result, step)
    finally:
        for fd in opened:
            os.close(fd)


def _build_root(plan: dict[str, Any]) -> None:
    """Mount the plan's new root and pivot into it; afterwards only what the plan
    bound in exists (ops: tmpfs, bind, symlink, proc), every path as outside."""
    new = plan["new_root"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    late = []  # tmpfs made read-only once everything below them is mounted
    for op in plan["mounts"]:
        kind, target = op[0], new + op[-1] if op[-1] != "/" else new
        try:
            if kind == "tmpfs":
                _mountpoint(target, "dir")
                _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, op[1])
                if op[2]:
                    late.append((target, op[2], op[-1]))
            elif kind == "bind":
                source, attrs = op[1], op[2]
                _mountpoint(target, source)
                _mount(source, target, None, MS_BIND | MS_REC, None)
                _set_attr(target, MOUNT_ATTR[attrs], True, f"{attrs} {op[-1]}")
            elif kind == "symlink":
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.symlink(op[1], target)
            elif kind == "file":
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400))
            elif kind == "hide":
                if os.path.isdir(target) and not os.path.islink(target):
                    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0000,size=4k")
                    late.append((target, "rofs", op[-1]))
                else:
                    _mount(new + plan["empty"], target, None, MS_BIND, None)
                    _set_attr(target, MOUNT_ATTR["ro"], False, f"hide {op[-1]}")
            elif kind == "proc":
                _mountpoint(target, "dir")
                _mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        except OSError as exc:
            raise SetupError(f"{kind} {op[-1]}: {exc.strerror}") from exc
    for target, attrs, name in reversed(late):
        _set_attr(target, MOUNT_ATTR[attrs], False, f"{attrs} {name}")
    os.chdir(new)
    _syscall("pivot_root", "pivot_root into the new root", b".", b".")
    _check(_LIBC.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")
    _set_attr("/", MOUNT_ATTR["ro"], False, "read-only new root")


def _drop_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets, so that
    nothing exec'd later (root included) holds a capability. Without CAP_SETPCAP (an
    ordinary user without namespaces) the bounding set stays: no_new_privs then keeps
    file capabilities and setuid bits from granting anything."""
    cap = 0
    while _LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1  # until EINVAL: past the last capability
    _LIBC.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = struct.pack("=Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    _syscall("capset", "drop capabilities", header, bytes(24))


def _landlock(rules: dict[str, Any]) -> None:
    """Create the plan's ruleset (fs, net, scopes handled) and restrict this process."""
    handled = struct.pack("=QQQ", rules["fs"], rules["net"], rules["scoped"])
    handled = handled[: rules["attr_size"]]
    step = "create the Landlock ruleset"
    ruleset = _syscall("landlock_create_ruleset", step, handled, len(handled), 0)
    try:
        for path, access, file_access in rules["paths"]:
            step = f"Landlock rule for {path}"
            fd = _open_path(path, step)
            try:
                folder = stat.S_ISDIR(os.fstat(fd).st_mode)
                allowed = access if folder else access & file_access
                if allowed:
                    attr = struct.pack("=Qi", allowed, fd)  # struct landlock_path_beneath_attr
                    _syscall("landlock_add_rule", step, ruleset, 1, attr, 0)
            finally:
                os.close(fd)
        _syscall("landlock_restrict_self", "enforce the Landlock ruleset", ruleset, 0)
    finally:
        os.close(ruleset)


def _seccomp(program: bytes) -> None:
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    step = "install the seccomp filter"
    _syscall("seccomp", step, SECCOMP_SET_MODE_FILTER, 0, ctypes.byref(fprog))


def _confine_self(plan: dict[str, Any]) -> None:
    _drop_capabilities()
    _prctl(PR_SET_NO_NEW_PRIVS, 1, "set no_new_privs")
    _landlock(plan["landlock"])
    if plan["seccomp"]:
        _seccomp(plan["seccomp"])


# -- the processes ----------------------------------------------------------------


def _report(kind: bytes, payload: bytes) -> None:
    """One frame on the status pipe: kind (1 byte), length (u32), payload."""
    payload = payload[:4000]
    with contextlib.suppress(OSError):  # the node is gone: nothing to tell
        os.write(3, kind + struct.pack("=I", len(payload)) + payload)


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _start_command(plan: dict[str, Any]) -> int:
    """C: the command, started with posix_spawn (a vfork: no copy of this Python
    process), or the probe, forked. Returns its pid; 0 when it could not start
    (reported as `E`)."""
    argv = plan["argv"]
    try:
        os.chdir(plan["cwd"])
    except OSError as exc:
        _report_start_error(exc, f"cannot enter the working folder: {exc.strerror}")
        return 0
    try:
        if plan.get("probe"):
            command = os.fork()
            if command == 0:
                os._exit(_probe(plan["probe"]))
            return command
        return os.posix_spawn(
            argv[0], argv, plan["env"], setsigdef=(signal.SIGPIPE, signal.SIGXFSZ)
        )
    except OSError as exc:
        _report_start_error(exc, exc.strerror or str(exc))
        return 0


def _report_start_error(exc: OSError, text: str) -> None:
    _report(b"E", struct.pack("=i", exc.errno or 0) + text.encode())


def _children() -> list[int]:
    """This process's children (CONFIG_PROC_CHILDREN)."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as listing:
            return [int(pid) for pid in listing.read().split()]
    except (OSError, ValueError):
        return []


def _kill_leftovers() -> None:
    """Kill every descendant left (they were reparented to us, a subreaper) and
    reap them, until none is left."""
    while True:
        for pid in _children():
            _kill(pid)
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _init(
    plan: dict[str, Any], entered: bool = False, built: tuple[Any, ...] | None = None
) -> None:
    """I: finish confinement, run C, reap until C exits, report. Never returns.
    `entered`: a warm I, whose namespaces were made before the plan came (it must
    then be a namespaces plan without network); `built`: the `_root_of` the new
    root it stands in already (the plan's must be the same)."""
    try:
        if entered and (not plan["namespaces"] or plan["network"]):
            raise SetupError("a warm launcher got a plan it was not made for")
        if built is not None:
            if _root_of(plan) != built:
                raise SetupError("a warm launcher's new root is not the plan's")
        elif plan["namespaces"]:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "die with the launcher")
            _build_root(plan)
        else:
            _prctl(PR_SET_CHILD_SUBREAPER, 1, "become a subreaper")
        _confine_self(plan)
    except (SetupError, OSError) as exc:
        _report(b"F", str(exc).encode())
        os._exit(125)
    command = _start_command(plan)
    if not command:
        os._exit(127)
    for fd in (0, 1, 2):
        os.close(fd)
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == command:
            break
    if not plan["namespaces"]:
        _kill_leftovers()  # as pid 1, exiting does it
    _report(b"X", struct.pack("=i", status))
    os._exit(0)


def _launch(plan: dict[str, Any]) -> None:
    """L: run one plan. Never returns."""
    if not plan["namespaces"]:
        _init(plan)
    try:
        _enter_namespaces(plan)
        init = os.fork()
    except (SetupError, OSError) as exc:
        _report(b"F", str(exc).encode())
        os._exit(125)
    if init == 0:
        _init(plan)
    for fd in (0, 1, 2, 3):
        os.close(fd)
    os.waitpid(init, 0)
    os._exit(0)


def _probe(checks: list[Any]) -> int:
    """Probe plans run this in C instead of a command: each expectation about what
    the confined process can do is tested; 0 when all hold, else 1 (what failed on
    stdout)."""
    failed = []
    for kind, target in checks:
        try:
            if kind == "unreadable":
                os.close(os.open(target, os.O_RDONLY))
            elif kind in ("writable", "readonly"):
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o600))
            elif kind == "no_connect":
                with socket.socket() as connection:  # no getaddrinfo: no codec to import
                    connection.settimeout(2)
                    connection.connect(("127.0.0.1", target))
            ok = kind == "writable"
        except OSError:
            ok = kind != "writable"
        if not ok:
            failed.append(f"{kind} {target}")
    os.write(1, "\n".join(failed).encode())
    return 1 if failed else 0


# -- the zygote ------------------------------------------------------------------


def _adopt(fds: list[int]) -> dict[str, Any]:
    """Take a request's fds (plan, stdin, stdout, stderr, status) as 0-3 and read
    the plan; every other descriptor is closed."""
    if len(fds) != 5:
        os._exit(125)
    with os.fdopen(fds[0], "rb", closefd=True) as source:
        plan: dict[str, Any] = marshal.loads(source.read())
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds[1:]]
    for target, fd in enumerate(high):
        os.dup2(fd, target, inheritable=target < 3)
    os.closerange(4, MAX_FD)
    return plan


def _as_child(zygote: int) -> None:
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "die with the zygote")
    if os.getppid() != zygote:
        os._exit(125)


def _start_child(fds: list[int], zygote: int) -> None:
    """A cold L, forked for one request: adopt it, launch."""
    try:
        _as_child(zygote)
        _launch(_adopt(fds))
    except BaseException as exc:  # noqa: BLE001 - nothing may return into the zygote loop
        _report(b"F", f"launcher: {type(exc).__name__}: {exc}".encode())
    os._exit(125)


def _root_of(plan: dict[str, Any]) -> tuple[Any, ...]:
    """What a new root is built from: `_build_root` reads these keys alone."""
    return plan["new_root"], plan["empty"], plan["mounts"]


def _sources(root: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """(device, inode) of every bind mount's source of `root` (a `_root_of`), as the
    zygote sees them now; None when one is missing."""
    try:
        return tuple(os.lstat(op[1])[1:3] for op in root[2] if op[0] == "bind")
    except OSError:
        return None


def _mount_count() -> int:
    with open("/proc/self/mountinfo", "rb") as table:
        return table.read().count(b"\n")


def _start_spare(sock: socket.socket, zygote: int, root: tuple[Any, ...] | None) -> None:
    """A warm L, forked ahead of its request: it enters the namespaces of the
    common plan (no network) and forks I, which builds `root` (a `_root_of`;
    None: none, I builds the request's), says `b` (built), waits on `sock` for
    the request and then runs it as `_init` would. Before taking it, I answers
    `k`, or `r` when a mount of its root is gone (the kernel detaches a mount
    whose file was replaced outside): then it exits and the zygote starts the
    request otherwise. Exits 125 when namespaces or the mounts fail here."""
    try:
        _as_child(zygote)
        os.closerange(3, sock.fileno())
        os.closerange(sock.fileno() + 1, MAX_FD)
        _enter_namespaces({"network": False})
        init = os.fork()
        if init == 0:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "die with the launcher")
            if root is not None:
                _build_root(dict(zip(("new_root", "empty", "mounts"), root, strict=True)))
                mounts = _mount_count()
            sock.send(b"b")
            message, fds, _, _ = socket.recv_fds(sock, 16, 5)
            if not message:
                os._exit(0)
            if root is not None and _mount_count() != mounts:
                sock.send(b"r")
                os._exit(0)
            sock.send(b"k")
            sock.close()
            _init(_adopt(fds), entered=True, built=root)
        sock.close()
        os.waitpid(init, 0)
        os._exit(0)
    except BaseException as exc:  # noqa: BLE001
        with contextlib.suppress(BaseException):
            _report(b"F", f"launcher: {type(exc).__name__}: {exc}".encode())
    os._exit(125)


class _Spare:
    """The zygote's warm launcher: L's pid, the socket its I waits on, and the new
    root it built (`root`, a `_root_of`; None: none) over which files
    (`sources`): it fits a plan whose root is the same over the same files (a
    spare without a root fits any common plan)."""

    def __init__(self, zygote: int, root: tuple[Any, ...] | None) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.root, self.sources = root, None if root is None else _sources(root)
        self.built = False
        self.pid = os.fork()
        if self.pid == 0:
            _start_spare(theirs, zygote, root)
        theirs.close()
        self.sock = ours

    def ready(self) -> bool:
        """True once its I has built the root (a request never waits for a build:
        it is started cold meanwhile)."""
        if not self.built:
            try:
                self.built = self.sock.recv(1, socket.MSG_DONTWAIT) == b"b"
            except OSError:  # BlockingIOError: still building
                return False
        return self.built

    def fits(self, root: tuple[Any, ...]) -> bool:
        """True when this spare may run a common plan whose root is `root`."""
        if self.root is None:
            return True
        return root == self.root and self.sources is not None and _sources(root) == self.sources

    def hand_over(self, fds: list[int]) -> bool:
        """Give the request to the spare's I; False when it is gone or its root
        changed (it exits without touching the request: it answers `k` before it
        starts anything). An I too slow to answer within `HAND_OVER_TIMEOUT_S`
        keeps the request (True): starting it elsewhere too could run it twice."""
        try:
            socket.send_fds(self.sock, [b"S"], fds)
        except OSError:
            self.sock.close()
            return False
        try:
            self.sock.settimeout(HAND_OVER_TIMEOUT_S)
            answer = self.sock.recv(1)
            if answer == b"b":  # built, said before the request came
                answer = self.sock.recv(1)
            return answer == b"k"
        except TimeoutError:
            return True
        except OSError:
            return False
        finally:
            self.sock.close()

    def discard(self) -> None:
        """Kill the spare unused."""
        self.sock.close()
        _kill(self.pid)


class _Spares:
    """The zygote's warm launchers for common plans: one without a root (it fits
    any: what a request gets when no built one is ready) and one built for each
    of the last `SPARES` roots. `live` is the zygote's set of children's pids."""

    def __init__(self, zygote: int, live: set[int]) -> None:
        self._zygote, self._live = zygote, live
        self._built: dict[bytes, _Spare] = {}  # by marshal.dumps(root), oldest first
        self._blank: _Spare | None = None
        self.misses = 0  # spares that died unused: after 3, namespaces do not work here

    def take(self, root: tuple[Any, ...], fds: list[int]) -> int:
        """The pid of the warm launcher that took the request `fds` for `root`; 0 when
        none did (start it cold). A built spare still building is left for later."""
        shape = marshal.dumps(root)
        spare = self._built.get(shape)
        if spare is not None and spare.pid not in self._live:
            del self._built[shape]
            self.misses += 1
        elif spare is not None and spare.ready():
            del self._built[shape]
            if spare.fits(root) and spare.hand_over(fds):
                self.misses = 0
                return spare.pid
            spare.discard()
        blank, self._blank = self._blank, None
        if blank is not None and blank.pid not in self._live:
            self.misses += 1
        elif blank is not None and blank.hand_over(fds):
            self.misses = 0
            return blank.pid
        return 0

    def replenish(self, root: tuple[Any, ...]) -> None:
        """Start the spares missing after a request for `root`."""
        if self.misses >= 3:
            return
        if self._blank is None:
            self._blank = self._start(None)
        shape = marshal.dumps(root)
        if shape not in self._built:
            self._built[shape] = self._start(root)
            while len(self._built) > SPARES:
                self._built.pop(next(iter(self._built))).discard()

    def _start(self, root: tuple[Any, ...] | None) -> _Spare:
        spare = _Spare(self._zygote, root)
        self._live.add(spare.pid)
        return spare


def _peek_root(fds: list[int]) -> tuple[Any, ...] | None:
    """The `_root_of` the request's plan (its memfd, `fds[0]`, read without moving its
    offset); None when it cannot be read (the launcher taking it reports why)."""
    try:
        size = os.fstat(fds[0]).st_size
        return _root_of(marshal.loads(os.pread(fds[0], size, 0)))
    except (IndexError, OSError, ValueError, EOFError, TypeError, KeyError):
        return None


def _reap(live: set[int]) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        live.discard(pid)
    for pid in _children():  # strays of a killed Landlock-only command, reparented here
        if pid not in live:
            _kill(pid)


def serve(control_fd: int) -> None:
    """The zygote loop: one request (`S` + kind, five fds: plan, stdin, stdout,
    stderr, status) in, one reply (`P` + pid, with a pidfd) out. Kind `n`
    (namespaces, no network: the common plan) goes to a warm launcher made
    ahead of time (`_Spares`); other kinds get a fork of their own. Ends when the node's
    end of `control_fd` closes, killing every command still running."""
    control = socket.socket(fileno=control_fd)
    _prctl(PR_SET_CHILD_SUBREAPER, 1, "become a subreaper")
    gc.disable()  # forks share this process's pages: a collection would copy them all
    gc.freeze()
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    live: set[int] = set()
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    control.send(b"H" + struct.pack("=i", landlock_abi()))
    zygote = os.getpid()
    spares = _Spares(zygote, live)
    running = True
    while running:
        for key, _ in selector.select():
            if key.fileobj == wake_r:
                while True:
                    try:
                        os.read(wake_r, 512)
                    except BlockingIOError:
                        break
                _reap(live)
                continue
            try:
                message, fds, _, _ = socket.recv_fds(control, 16, 5)
            except OSError:
                message, fds = b"", []
            if not message:
                running = False
                break
            root = _peek_root(fds) if message == b"Sn" else None
            pid = 0 if root is None else spares.take(root, fds)
            if not pid:
                pid = os.fork()
                if pid == 0:
                    _start_child(fds, zygote)
                live.add(pid)
            for fd in fds:
                os.close(fd)
            pidfd = os.pidfd_open(pid)
            try:
                socket.send_fds(control, [b"P" + struct.pack("=i", pid)], [pidfd])
            finally:
                os.close(pidfd)
            if root is not None:
                spares.replenish(root)
    for pid in live:
        _kill(pid)
    _kill_leftovers()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "zygote":
        serve(int(sys.argv[2]))
    else:
        sys.exit("usage: launcher.py zygote FD (started by gbr-node, not by hand)")
