"""Benchmark: `/s` (ADR-0010) from the Enter key to the model server, through a real terminal.

Run: `.venv/bin/python scripts/bench/interrupt.py [--interrupts 60] [--quick]`
(`--quick`: 3 interrupts after 1 warm-up, a smoke run of the same code whose
exit status ignores the targets). It measures what a person sees: `gbr-node run`
runs as its own process in a pseudo-terminal (pexpect, `delaybeforesend=None`),
its output rendered by pyte as in the end-to-end tests, and the model is a real
HTTP server on 127.0.0.1 (tests/support/model_server.py, a thread of this
process) streaming an SSE answer slowly: a word a line, every 50 ms, so that the
input line keeps a row of its own. Each cycle: once the third word is on screen,
`/s next` is typed a key at a time, the screen shows it on the input line, and
then Enter is sent. Two times are taken from that Enter (`time.monotonic()` just
before the write to the pty; the server stamps its records with the same
clock, which is the system's, so it holds across processes):

- Enter -> close: the server sees the connection of the cut stream closed
  (`Disconnect.at`: its `select` on the socket wakes on the FIN). Targets
  (issue 35): p50 <= 10 ms, p95 <= 20 ms.
- Enter -> request: the re-prompt carrying the suggestion arrives at the
  server (`RecordedRequest.at`). Target: p95 below 150 ms.

From the Enter until the server has seen both, this process only reads the
pty (no rendering) and sleeps, so the server thread is never kept waiting for
the GIL by the bench's own work; the output read meanwhile is rendered after.
Prints median, p95 and max in milliseconds. The first `--warmup` cycles (3)
are not counted.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pexpect

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.e2e.conftest import node_env, write_profile  # noqa: E402 (needs the path above)
from tests.e2e.terminal import COLS, ROWS, Terminal  # noqa: E402
from tests.support.model_server import ModelServer  # noqa: E402
from tests.support.replies import Delay, SseReply  # noqa: E402

TARGET_CLOSE_P50_MS = 10.0
TARGET_CLOSE_MS = 20.0
TARGET_REQUEST_MS = 150.0
WORD_GAP_S = 0.05
WORDS = 400  # 20 s of answer: always cut long before its end
WAIT_S = 20.0
STARTUP_S = 60.0  # a node starting on a loaded machine


def _chunk(delta: dict, finish: str | None = None) -> dict:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "bench", "object": "chat.completion.chunk", "choices": [choice]}


def slow_answer(tag: str) -> SseReply:
    """Words `TAGw0 TAGw1 ...`, one every WORD_GAP_S seconds."""
    items: list = [_chunk({"role": "assistant", "content": ""})]
    for n in range(WORDS):
        items += [_chunk({"content": f"{tag}w{n}\n"}), Delay(WORD_GAP_S)]
    return SseReply([*items, _chunk({}, "stop")])


def wait_unrendered(term: Terminal, done: Callable[[], bool], what: str) -> None:
    """Read the pty, without rendering, until `done()`; then render what was read.
    RuntimeError after WAIT_S seconds."""
    pending: list[str] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while not done():
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}:\n{term.text()[-2000:]}")
            with contextlib.suppress(pexpect.TIMEOUT):
                pending.append(term.child.read_nonblocking(65536, timeout=0.001))
    finally:
        for data in pending:
            term.feed(data)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile `q` (0..100) of `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def seen_both(server: ModelServer, gone: int, asked: int) -> Callable[[], bool]:
    """True once the server has seen one more disconnect than `gone` and one more chat
    request than `asked`."""
    return lambda: len(server.disconnects) > gone and len(server.chat_bodies) > asked


def measure(interrupts: int, warmup: int) -> tuple[list[float], list[float]]:
    """Run the cycles; returns (Enter → close, Enter → request) in milliseconds."""
    cycles = interrupts + warmup
    closes: list[float] = []
    requests: list[float] = []
    with ModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        write_profile(project, server.base_url)
        server.enqueue(*[slow_answer(f"c{n}x") for n in range(cycles + 1)])
        home = Path(tmp) / "home"
        home.mkdir()
        child = pexpect.spawn(
            sys.executable,
            ["-m", "gbr_node", "run"],
            cwd=str(project),
            env=node_env(home),
            encoding="utf-8",
            dimensions=(ROWS, COLS),
        )
        child.delaybeforesend = None
        term = Terminal(child)
        try:
            term.expect("/help for commands", timeout_s=STARTUP_S)
            child.send("go\r")
            for n in range(cycles):
                term.expect(f"c{n}xw2\n")
                term.mark()
                for key in "/s next":
                    child.send(key)
                term.expect_new("/s next")
                gone, asked = len(server.disconnects), len(server.chat_bodies)
                start = time.monotonic()
                child.send("\r")
                wait_unrendered(term, seen_both(server, gone, asked), "the close and the request")
                if n >= warmup:
                    closes.append((server.disconnects[gone].at - start) * 1000)
                    chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
                    requests.append((chats[asked].at - start) * 1000)
            problems = [r.problem for r in server.requests if r.problem]
            if problems:
                raise RuntimeError(f"the server refused requests: {problems[:3]}")
        finally:
            child.terminate(force=True)
    return closes, requests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interrupts", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 interrupts")
    args = parser.parse_args(argv)
    if args.quick:
        args.interrupts, args.warmup = 3, 1
    closes, requests = measure(args.interrupts, args.warmup)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"/s interrupts through a pty: {len(closes)} measured (+{args.warmup} warm-up); load {load}"
    )
    print(f"{'Enter on /s →':<26}{'median':>9}{'p95':>9}{'max':>9}  target")
    close_p50, close_p95 = statistics.median(closes), percentile(closes, 95)
    ok = close_p50 <= TARGET_CLOSE_P50_MS and close_p95 <= TARGET_CLOSE_MS
    ok = ok and percentile(requests, 95) < TARGET_REQUEST_MS
    for name, values, target in (
        (
            "server sees the close",
            closes,
            f"p50 <= {TARGET_CLOSE_P50_MS:.0f} ms, p95 <= {TARGET_CLOSE_MS:.0f} ms",
        ),
        ("new request arrives", requests, f"p95 < {TARGET_REQUEST_MS:.0f} ms"),
    ):
        print(
            f"{name:<26}{statistics.median(values):>7.1f}ms{percentile(values, 95):>7.1f}ms"
            f"{max(values):>7.1f}ms  {target}"
        )
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    raise SystemExit(main())
