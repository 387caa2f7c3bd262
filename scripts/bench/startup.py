"""Benchmark: one-shot commands as whole processes, against `python -c pass` (issue 35).

Run: `.venv/bin/python scripts/bench/startup.py [--runs 20] [--quick]`
(`--quick`: 2 runs of each after 1 warm-up, a smoke run of the same code).

`gbr-node call bob read_file '{"path": "kib.txt"}'` runs as a process of its own
(`python -m gbr_node`, as the `gbr-node` script does) against a `gbr-node serve`
process on 127.0.0.1 that keeps running; each run starts, loads the profile and
key, dials (TCP + Noise + Yamux), calls, prints a 1 KiB file and exits. Each
command is paired with `python -c pass` (the same interpreter): they run in turn,
A B A B ..., and the ratio is taken pair by pair, so a machine whose speed
drifts hits both alike. Other one-shot commands (`--version`, `tool`, `inbox`,
`env check`, `id`, and `send` to the same serve, which waits for the ack) get a
row each the same way.

Times are wall milliseconds of the whole process (start to exit, output to
/dev/null) and the CPU it used (user + system, from the kernel's accounting of
the reaped child). gbr_node's bytecode is compiled first (`compileall`), as a
pip install does: a checkout run with PYTHONDONTWRITEBYTECODE would otherwise
compile every module on every run. Target: `call` median ratio <= 13x.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.e2e.conftest import node_env  # noqa: E402 (needs the path above)
from tests.e2e.p2p_helpers import (  # noqa: E402
    Identity,
    ServeProcess,
    write_serving_profile,
)

TARGET_RATIO = 13.0


def run_once(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """Run `argv` to its end: (wall ms, CPU ms of the child, exit status)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, timeout=120,
    )  # fmt: skip
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"{argv[3:]} exited {done.returncode}: {done.stderr.decode()[-800:]}")
    return wall, cpu, done.returncode


def measure(
    commands: list[tuple[str, list[str]]], cwd: Path, env: dict[str, str], runs: int, warmup: int
) -> dict[str, dict[str, list[float]]]:
    """Each command paired with `python -c pass`, in turn; per label: wall, cpu, ratio lists."""
    baseline = [sys.executable, "-c", "pass"]
    out: dict[str, dict[str, list[float]]] = {}
    base: dict[str, list[float]] = {"wall": [], "cpu": []}
    for label, argv in commands:
        rows: dict[str, list[float]] = {"wall": [], "cpu": [], "ratio": []}
        for n in range(warmup + runs):
            wall, cpu, _ = run_once(argv, cwd, env)
            base_wall, base_cpu, _ = run_once(baseline, cwd, env)
            if n >= warmup:
                rows["wall"].append(wall)
                rows["cpu"].append(cpu)
                rows["ratio"].append(wall / base_wall)
                base["wall"].append(base_wall)
                base["cpu"].append(base_cpu)
        out[label] = rows
    out["python -c pass"] = {**base, "ratio": [1.0]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="counted runs of each command")
    parser.add_argument("--warmup", type=int, default=2, help="runs not counted, first")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 runs of each")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.warmup = 2, 1
    compileall.compile_dir(str(ROOT / "gbr_node"), quiet=1)
    with tempfile.TemporaryDirectory(prefix="gbr-bench-startup-") as tmp:
        work = Path(tmp)
        bob, alice = Identity(work / "bob.key"), Identity(work / "alice.key")
        served, caller = work / "bob", work / "alice"
        served.mkdir()
        caller.mkdir()
        (served / "kib.txt").write_text("x" * 1023 + "\n", encoding="utf-8")
        # `extra` lands in the last table, [peers.alice]: her messages are shown there
        grant = {"alice": (alice.peer_id, ["read_file"])}
        write_serving_profile(served, grant, extra='chat = "show"')
        serve = ServeProcess(served, work / "bob-home", bob)
        try:
            addrs = f'addrs = ["{serve.addr.rsplit("/p2p/", 1)[0]}"]'
            # `extra` lands in the last table, [peers.bob]
            write_serving_profile(caller, {"bob": (bob.peer_id, "*")}, extra=addrs)
            (caller / "notes.txt").write_text("hello\n", encoding="utf-8")
            home = work / "alice-home"
            home.mkdir()
            env = node_env(home)
            gbr = [sys.executable, "-m", "gbr_node", "--identity", str(alice.path)]
            kib, notes = '{"path": "kib.txt"}', '{"path": "notes.txt"}'
            commands = [
                ("gbr-node call bob read_file (1 KiB)", [*gbr, "call", "bob", "read_file", kib]),
                ("gbr-node --version", [*gbr, "--version"]),
                ("gbr-node tool read_file", [*gbr, "tool", "read_file", notes]),
                ("gbr-node inbox", [*gbr, "inbox"]),
                ("gbr-node env check", [*gbr, "env", "check"]),
                ("gbr-node id", [*gbr, "id"]),
                ("gbr-node send bob (delivered)", [*gbr, "send", "bob", "the build is green"]),
            ]
            results = measure(commands, caller, env, args.runs, args.warmup)
        finally:
            serve.stop()
    print_table(results, args.runs, args.warmup)
    return 0


def print_table(results: dict[str, dict[str, list[float]]], runs: int, warmup: int) -> None:
    """The table: wall and CPU medians (ms), wall min, and the median of the pair ratios."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"one-shot commands as whole processes, {runs} runs each (+{warmup} warm-up), "
        f"each paired with python -c pass; {os.cpu_count()} CPUs, load average {load}"
    )
    width = max(len(label) for label in results) + 2
    print(f"{'command':<{width}}{'wall ms':>9}{'min':>8}{'cpu ms':>8}{'x pass':>8}  target")
    for label, rows in results.items():
        target = f"<= {TARGET_RATIO:.0f}x" if label.startswith("gbr-node call") else ""
        print(
            f"{label:<{width}}{statistics.median(rows['wall']):>9.1f}{min(rows['wall']):>8.1f}"
            f"{statistics.median(rows['cpu']):>8.1f}{statistics.median(rows['ratio']):>7.1f}x"
            f"  {target}".rstrip()
        )


if __name__ == "__main__":
    raise SystemExit(main())
