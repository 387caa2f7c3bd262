"""Helpers for the end-to-end p2p tests: `gbr-node serve` and `gbr-node call` as real processes.

Every node is a separate `python -m gbr_node` process on 127.0.0.1 with its own
identity key (`--identity`), its own project folder and its own HOME.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from gbr_node.p2p.identity import load_or_create_identity, peer_id_of
from tests.e2e.conftest import node_env

LOOPBACK_LISTEN = "/ip4/127.0.0.1/tcp/0"
START_TIMEOUT_S = 30
CALL_TIMEOUT_S = 60
MCP = "/gbr/mcp/1.0.0"


class Identity:
    """An Ed25519 key file (created now) and its peer ID."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keypair = load_or_create_identity(path)
        self.peer_id = peer_id_of(self.keypair)


def write_serving_profile(
    project: Path,
    peers: Mapping[str, tuple[str, Sequence[str] | str]],
    node: str = "",
    extra: str = "",
) -> Path:
    """`.gbr_envs/default.toml` trusting `peers` (alias -> (peer ID, tools or "*")).

    `node` is added to the `[node]` table (e.g. `call_timeout_s = 60`); `extra`
    is appended as is (e.g. a `[tools.run_command]` table).
    """
    lines = ['system_prompt = "A serving test node."', 'protected_files = ["pyproject.toml"]']
    lines += ["[node]", f'listen = ["{LOOPBACK_LISTEN}"]', node]
    for alias, (peer_id, tools) in peers.items():
        granted = '"*"' if tools == "*" else "[" + ", ".join(f'"{t}"' for t in tools) + "]"
        lines += [f"[peers.{alias}]", f'peer_id = "{peer_id}"', f"tools = {granted}"]
    lines.append(extra)
    folder = project / ".gbr_envs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "default.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class ServeProcess:
    """`python -m gbr_node --identity KEY serve --listen LISTEN ARGS` in `project` (port 0 by
    default), run under `wrap` when given (e.g. `ip netns exec NS`, tests/support/netns.py).

    A thread drains its stdout (one line per served call) so it never blocks;
    `wait_line()` finds lines. `addr` is the printed `/ip4/127.0.0.1/tcp/N/p2p/ID`.
    """

    def __init__(
        self,
        project: Path,
        home: Path,
        identity: Identity,
        listen: str = LOOPBACK_LISTEN,
        wrap: Sequence[str] = (),
        args: Sequence[str] = (),
    ) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.identity = identity
        self.proc = subprocess.Popen(
            [*wrap, sys.executable, "-m", "gbr_node", "--identity", str(identity.path), "serve"]
            + ["--listen", listen, *args],
            cwd=project,
            env=node_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._new: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()
        try:
            host = re.escape(listen.split("/")[2])
            first = self.wait_line(rf"/ip4/{host}/tcp/\d+/p2p/", START_TIMEOUT_S)
            self.wait_line(r"^trusted peers:", START_TIMEOUT_S)
        except AssertionError:
            self.kill()
            raise
        self.addr = first.strip()
        self.peer_id = self.addr.rsplit("/p2p/", 1)[1]
        assert self.peer_id == identity.peer_id

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._new.put(line.rstrip("\n"))
        self._new.put(None)

    def all_lines(self, timeout_s: float = 10) -> list[str]:
        """Every line it printed, once its output has ended (call after it exited)."""
        deadline = time.monotonic() + timeout_s
        while (line := self._new.get(timeout=max(deadline - time.monotonic(), 0.001))) is not None:
            self.lines.append(line)
        self._new.put(None)  # later calls end at once too
        return self.lines

    def wait_line(self, pattern: str, timeout_s: float = CALL_TIMEOUT_S) -> str:
        """The first line (seen so far or arriving within `timeout_s`) matching `pattern`."""
        regex = re.compile(pattern)
        for seen in self.lines:
            if regex.search(seen):
                return seen
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._new.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"serve exited; output: {self.lines}")
            self.lines.append(line)
            if regex.search(line):
                return line
        raise AssertionError(f"no line matching {pattern!r} within {timeout_s} s: {self.lines}")

    def wait_count(self, pattern: str, count: int, timeout_s: float = CALL_TIMEOUT_S) -> None:
        """Wait until `count` lines so far match `pattern`, at most `timeout_s` seconds."""
        regex = re.compile(pattern)
        seen = sum(1 for line in self.lines if regex.search(line))
        deadline = time.monotonic() + timeout_s
        while seen < count:
            left = deadline - time.monotonic()
            try:
                line = self._new.get(timeout=max(left, 0.001))
            except queue.Empty:
                raise AssertionError(f"{seen} of {count} lines match {pattern!r}") from None
            if line is None:
                raise AssertionError(f"serve exited after {seen} of {count} lines")
            self.lines.append(line)
            seen += bool(regex.search(line))

    def rss_bytes(self) -> int:
        """Resident memory (VmRSS of /proc/PID/status), bytes."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def kill(self) -> None:
        """SIGKILL, and reap."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM (SIGKILL if it lingers), and reap."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def gbr_call(
    cwd: Path,
    home: Path,
    identity: Identity,
    target: str,
    *args: str,
    timeout_s: float = CALL_TIMEOUT_S,
    wrap: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run `python -m gbr_node --identity KEY call TARGET ARGS...` to completion, under
    `wrap` when given (e.g. `ip netns exec NS`)."""
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [*wrap, sys.executable, "-m", "gbr_node", "--identity", str(identity.path), "call"]
        + [target, *args],
        cwd=cwd,
        env=node_env(home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def start_call(
    cwd: Path, home: Path, identity: Identity, target: str, *args: str, wrap: Sequence[str] = ()
) -> subprocess.Popen[str]:
    """Like `gbr_call` but returns at once; the caller waits (with a timeout)."""
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [*wrap, sys.executable, "-m", "gbr_node", "--identity", str(identity.path), "call"]
        + [target, *args],
        cwd=cwd,
        env=node_env(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def children_running(parent_pid: int, program: str) -> list[int]:
    """PIDs of live descendants of `parent_pid` whose argv[0] ends in `program` (a
    confined command runs a few generations below the node: launcher, pid 1)."""
    parents, programs = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            parents[int(entry.name)] = int(ppid)
            programs[int(entry.name)] = os.path.basename(argv[0].decode()) if argv else ""
    found = []
    for pid, name in programs.items():
        ancestor = parents.get(pid)
        while ancestor not in (None, 0, 1, parent_pid):
            ancestor = parents.get(ancestor)
        if ancestor == parent_pid and name == program:
            found.append(pid)
    return found


def is_running(pid: int) -> bool:
    """Running (a zombie, killed but not reaped by PID 1, does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def decode_frame(data: bytes) -> tuple[int, bytes]:
    """(body length, body) of the frame at the start of `data` (multiformats unsigned varint)."""
    value, shift = 0, 0
    for index, byte in enumerate(data[:9]):
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            body = data[index + 1 : index + 1 + value]
            assert len(body) == value, f"frame of {value} bytes cut at {len(body)}"
            return value, body
    raise AssertionError(f"no complete varint prefix in {data[:12]!r}")
