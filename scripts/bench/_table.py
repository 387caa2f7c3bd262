"""The timing table the RPC-plane benchmarks print (rpc.py, chat.py): one shared helper.

Not a benchmark itself (tests/bench/test_quick.py skips names starting with "_").
"""

from __future__ import annotations

import os
import statistics


def p95(samples: list[float]) -> float:
    """The 95th percentile of `samples` (nearest rank); `samples` must not be empty."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def print_timings(setting: str, rows: list[tuple[str, list[float], str]]) -> None:
    """Print the load line, then median, p95 and min (ms) of each (label, samples, target).

    `setting` opens the first line ("loopback, 1 KiB payloads"); the machine's CPU
    count and load average follow it (a shared machine: read ratios and medians).
    """
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"{setting}, {os.cpu_count()} CPUs, load average {load}; times in ms")
    width = max(len(label) for label, _, _ in rows) + 2
    print(f"{'measure':<{width}}{'median':>9}{'p95':>9}{'min':>9}  target")
    for label, samples, target in rows:
        print(
            f"{label:<{width}}{statistics.median(samples):>9.2f}{p95(samples):>9.2f}"
            f"{min(samples):>9.2f}  {target}".rstrip()
        )
