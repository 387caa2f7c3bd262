"""Benchmark: spawn-to-exit of a confined command against the same command unconfined.

Run: `.venv/bin/python scripts/bench/confine.py [--rounds N]`. Times
`run_bounded` (the path run_command takes) from the call to the exit of
`true` and of `python3 -c pass`, unconfined and confined in each mode this
machine offers (namespaces, Landlock only), interleaved so that load hits all
alike, on a root holding the default profile's protected paths. Prints the
medians and p95 in milliseconds, the median added by confinement and the
ratio, and the machine load (os.getloadavg) before and after. Target (issue
16): confinement adds <= 10 ms median.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from gbr_node.confine import CommandPolicy, support
from gbr_node.confine.support import Support
from gbr_node.sandbox import Sandbox
from gbr_node.tools import process


def _spawn_ms(argv: list[str], root: Path, policy: CommandPolicy | None) -> float:
    start = time.perf_counter()
    done = process.run_bounded(
        argv, cwd=root, env={"PATH": "/usr/bin:/bin"}, timeout_s=30, max_output_bytes=4096,
        policy=policy,
    )
    elapsed = (time.perf_counter() - start) * 1000
    if done.exit_code != 0:
        raise SystemExit(f"{argv} failed ({policy and policy.mode}): {done.stderr!r}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="spawns per measurement")
    rounds = parser.parse_args().rounds
    found = support()
    modes = ["namespaces", "landlock"] if found.mode == "namespaces" else [found.mode]
    python = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"
    programs = {"true": [shutil.which("true", path="/usr/bin:/bin")], "python3 -c pass": [
        python, "-c", "pass"]}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name in ("pyproject.toml", "poetry.lock"):
            (root / name).write_text("x\n")
        for sub in (".git", ".gbr_envs", ".gbr"):
            (root / sub).mkdir()
        sandbox = Sandbox(root, ["pyproject.toml", "*.lock", "package-lock.json", ".env"])
        policies: dict[str, CommandPolicy | None] = {"unconfined": None}
        for mode in modes:
            policies[mode] = CommandPolicy(sandbox, executables=(python,))
        timings = {(p, m): [] for p in programs for m in policies}
        for _ in range(rounds):
            for program, argv in programs.items():
                for mode, policy in policies.items():
                    if mode in ("namespaces", "landlock"):
                        process.support = lambda mode=mode: Support(found.abi, mode)
                    timings[program, mode].append(_spawn_ms(argv, Path(sandbox.root), policy))
    print(f"confinement: {found.describe()}")
    print(f"load before {load_before[0]:.2f} {load_before[1]:.2f}, after "
          f"{os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1 and 5 min)")
    print(f"{'program':<18} {'mode':<12} {'median ms':>10} {'p95 ms':>8} {'added ms':>9} {'ratio':>6}")
    for program in programs:
        base = statistics.median(timings[program, "unconfined"])
        for mode in policies:
            samples = sorted(timings[program, mode])
            median = statistics.median(samples)
            p95 = samples[int(len(samples) * 0.95) - 1]
            print(f"{program:<18} {mode:<12} {median:>10.2f} {p95:>8.2f} "
                  f"{median - base:>9.2f} {median / base:>5.2f}x")
    print(f"({rounds} spawns each, interleaved; target: confinement adds <= 10 ms median)")


if __name__ == "__main__":
    main()
