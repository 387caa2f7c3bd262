"""Benchmark: the REPL's keystroke-to-echo latency and its CPU while an answer streams.

Run: `.venv/bin/python scripts/bench/terminal.py [--keys 100] [--quick]` (`--quick`:
10 keys and 1 s per phase, a smoke run that reports the targets but exits 0). The test
model server runs in this process and streams an answer at 50 tokens per
second (one word every 20 ms); `gbr-node run` runs as its own process in an
80x24 pseudo-terminal. Measured in the same run:

- keystroke → echo: a capital letter (never in the answer, the status or the
  usage line) is written to the pty and the time taken until it appears in
  what the REPL writes back; then Backspace takes it away again. Keys are
  typed every 60-140 ms. Idle first (the baseline), then while the answer
  streams. Target: p95 below 30 ms while streaming.
- CPU: user + system time of the REPL's process (all its threads, from
  /proc/PID/stat) over wall time, as a share of one core: idle, streaming
  while typing, and streaming without typing. Target: below 15% while
  streaming.

Prints the load average (the machine is shared), medians, p95, and the
streaming/idle ratios.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import select
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pexpect

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.e2e.conftest import node_env, write_profile  # noqa: E402 (needs the path above)
from tests.support.model_server import ModelServer  # noqa: E402
from tests.support.replies import Delay, SseReply  # noqa: E402

TARGET_P95_MS = 30.0
TARGET_CPU = 0.15
TOKEN_GAP_S = 0.02  # 50 tokens per second
KEYS = "QZJX"  # capitals the answer, the status and the usage line never hold
ROWS, COLS = 24, 80
WAIT_S = 10.0


def _chunk(delta: dict, finish: str | None = None) -> dict:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "bench", "object": "chat.completion.chunk", "choices": [choice]}


def streamed_answer(seconds: float) -> SseReply:
    """Words of varied length, one every TOKEN_GAP_S, paragraphs now and then."""
    words = ["a", "to", "the", "word", "quick", "stream", "answers", "terminal"]
    items: list = [_chunk({"role": "assistant", "content": ""})]
    for n in range(int(seconds / TOKEN_GAP_S)):
        gap = "\n\n" if n % 120 == 119 else " "
        items += [_chunk({"content": f"{words[n % len(words)]}{n}{gap}"}), Delay(TOKEN_GAP_S)]
    return SseReply([*items, _chunk({}, "stop")])


class Pty:
    """The REPL's pty, read as raw bytes."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child
        self.fd = child.child_fd
        assert child.pid is not None  # spawned: pexpect's stubs allow None before that
        self.pid = child.pid

    def read_for(self, seconds: float) -> bytes:
        """Everything written within `seconds`."""
        out = b""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            out += self._read(left)
        return out

    def wait_for(self, needle: bytes, timeout_s: float = WAIT_S) -> float:
        """Read until `needle` is written; returns the monotonic time it arrived."""
        seen = b""
        deadline = time.monotonic() + timeout_s
        while needle not in seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{needle!r} not written within {timeout_s} s")
            seen = seen[-len(needle) :] + self._read(left)
        return time.monotonic()

    def _read(self, timeout_s: float) -> bytes:
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        if not ready:
            return b""
        try:
            return os.read(self.fd, 65536)
        except OSError as exc:
            raise RuntimeError("the REPL exited") from exc


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (all threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def type_keys(pty: Pty, count: int, rng: random.Random) -> tuple[list[float], float]:
    """Type `count` keys (each then erased); (latencies in ms, CPU share over the span)."""
    latencies = []
    cpu0, t0 = cpu_seconds(pty.pid), time.monotonic()
    for n in range(count):
        pty.read_for(rng.uniform(0.06, 0.14))
        key = KEYS[n % len(KEYS)].encode()
        start = time.monotonic()
        os.write(pty.fd, key)
        latencies.append((pty.wait_for(key) - start) * 1000)
        os.write(pty.fd, b"\x7f")
    pty.read_for(0.05)
    return latencies, (cpu_seconds(pty.pid) - cpu0) / (time.monotonic() - t0)


def cpu_share(pty: Pty, seconds: float) -> float:
    """The REPL's CPU share while it is left alone for `seconds`."""
    cpu0, t0 = cpu_seconds(pty.pid), time.monotonic()
    pty.read_for(seconds)
    return (cpu_seconds(pty.pid) - cpu0) / (time.monotonic() - t0)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile `q` (0..100) of `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def measure(keys: int, quiet_s: float) -> dict[str, tuple[list[float], float]]:
    """Run the phases; returns {phase: (latencies ms, CPU share)}."""
    rng = random.Random(14)
    stream_s = keys * 0.2 + quiet_s + 15
    results: dict[str, tuple[list[float], float]] = {}
    with ModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        write_profile(project, server.base_url)
        server.enqueue(streamed_answer(stream_s))
        home = Path(tmp) / "home"
        home.mkdir()
        env = node_env(home)
        env.pop("NO_COLOR")  # colour and markdown: the full rendering path
        env["TERM"] = "xterm-256color"
        child = pexpect.spawn(
            sys.executable,
            ["-m", "gbr_node", "run"],
            cwd=str(project),
            env=env,
            dimensions=(ROWS, COLS),
        )
        pty = Pty(child)
        try:
            pty.wait_for(b"/help for commands", 60)
            pty.read_for(1.0)
            results["idle, not typing"] = ([], cpu_share(pty, quiet_s))
            results["idle, typing"] = type_keys(pty, keys, rng)
            os.write(pty.fd, b"tell me a long story\r")
            pty.wait_for(b"word3", 30)
            pty.read_for(1.0)
            results["streaming, typing"] = type_keys(pty, keys, rng)
            results["streaming, not typing"] = ([], cpu_share(pty, quiet_s))
        finally:
            child.terminate(force=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100, help="keystrokes per phase")
    parser.add_argument("--quiet", type=float, default=5.0, help="seconds of each CPU-only phase")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 10 keys, 1 s phases, exit 0 on a miss"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.keys, args.quiet = 10, 1.0
    results = measure(args.keys, args.quiet)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"REPL in an {COLS}x{ROWS} pty, answer at {1 / TOKEN_GAP_S:.0f} tokens/s; load {load}")
    print(f"{'phase':<24}{'echo median':>12}{'p95':>9}{'max':>9}{'CPU':>9}")
    for phase, (latencies, cpu) in results.items():
        if latencies:
            median, p95 = statistics.median(latencies), percentile(latencies, 95)
            times = f"{median:>10.1f}ms{p95:>7.1f}ms{max(latencies):>7.1f}ms"
        else:
            times = f"{'-':>12}{'-':>9}{'-':>9}"
        print(f"{phase:<24}{times}{cpu * 100:>8.1f}%")
    idle, busy = results["idle, typing"][0], results["streaming, typing"][0]
    ratio_median = statistics.median(busy) / statistics.median(idle)
    ratio_p95 = percentile(busy, 95) / percentile(idle, 95)
    print(f"streaming/idle echo: median x{ratio_median:.2f}, p95 x{ratio_p95:.2f}")
    p95 = percentile(busy, 95)
    cpu = max(results["streaming, typing"][1], results["streaming, not typing"][1])
    ok = p95 < TARGET_P95_MS and cpu < TARGET_CPU
    print(
        f"targets: echo p95 {p95:.1f} ms (< {TARGET_P95_MS:.0f}), "
        f"CPU {cpu * 100:.1f}% (< {TARGET_CPU * 100:.0f}%) while streaming: "
        + ("met" if ok else "MISSED")
    )
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    raise SystemExit(main())
