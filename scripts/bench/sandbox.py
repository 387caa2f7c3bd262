"""Benchmark: the cost of one sandbox path check against `os.path.realpath` alone.

Run: `.venv/bin/python scripts/bench/sandbox.py [--rounds N] [--quick]`. Prints median
and p95 in microseconds for `Sandbox.resolve` on a 5-name relative path and on
a path through a symlink, and for `os.path.realpath` of the same absolute
paths (the floor: the filesystem part of the check), plus the ratio of the
medians. Target (issue 2): median check within 3x of realpath alone.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time
from collections.abc import Callable

from gbr_node.sandbox import Sandbox


def _timings(
    floor: Callable[[], object], check: Callable[[], object], rounds: int
) -> tuple[list[float], list[float]]:
    """Microseconds per call of `floor` and `check`, interleaved so load hits both alike."""
    for _ in range(min(rounds, 1000)):
        floor()
        check()
    clock = time.perf_counter_ns
    floors, checks = [], []
    for _ in range(rounds):
        start = clock()
        floor()
        middle = clock()
        check()
        end = clock()
        floors.append((middle - start) / 1000)
        checks.append((end - middle) / 1000)
    return floors, checks


def _row(label: str, samples: list[float]) -> tuple[str, float, float]:
    ordered = sorted(samples)
    return label, statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50_000, help="calls per measurement")
    parser.add_argument("--quick", action="store_true", help="smoke run: 200 calls each")
    args = parser.parse_args()
    rounds = 200 if args.quick else args.rounds
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "src", "pkg", "sub", "deep"))
        with open(os.path.join(root, "src", "pkg", "sub", "deep", "mod.py"), "w") as f:
            f.write("x = 1\n")
        os.symlink(os.path.join(root, "src", "pkg"), os.path.join(root, "pkglink"))
        sandbox = Sandbox(root, ["pyproject.toml", "**/*.lock"])
        real_root = str(sandbox.root)
        plain = "src/pkg/sub/deep/mod.py"
        linked = "pkglink/sub/deep/mod.py"
        cases = [("plain", plain), ("symlink", linked)]
        rows = []
        for label, rel in cases:
            absolute = os.path.join(real_root, rel)
            floors, checks = _timings(
                functools.partial(os.path.realpath, absolute),
                functools.partial(sandbox.resolve, rel),
                rounds,
            )
            floor = _row(f"realpath ({label})", floors)
            check = _row(f"resolve  ({label})", checks)
            rows.append((floor, check))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'measurement':<22} {'median us':>10} {'p95 us':>10} {'ratio':>7}")
    for floor, check in rows:
        print(f"{floor[0]:<22} {floor[1]:>10.2f} {floor[2]:>10.2f} {'':>7}")
        print(f"{check[0]:<22} {check[1]:>10.2f} {check[2]:>10.2f} {check[1] / floor[1]:>6.2f}x")
    print(f"({rounds} calls each; ratio = median resolve / median realpath; target <= 3x)")


if __name__ == "__main__":
    main()
