"""Benchmark: what a change pays for its checkpoint (GBR-UNDO-01).

Run: `.venv/bin/python scripts/bench/checkpoints.py [--rounds N] [--quick]` (`--quick`:
3 rounds, roots of 100 and 300 files, a smoke run of every measure). In a temporary
root, interleaved so that load hits both alike, it times (wall clock,
`time.perf_counter`) the real registry's call:

- `write_file` of a 1 KiB, 1 MiB and 20 MiB file whose content changes every
  round, with the checkpoint store and without (the prior content is written
  as a blob and fsynced, its row committed, before the write);
- `run_command` of `true` in a root of 1,000 and 10,000 files of 1 KiB, with the
  store (the root listed before and after, changed files' prior content kept)
  and without; the first run with the store, which reads every file once, is
  shown apart ("cold").

Prints, per measure, the median and p95 of the calls with the store, without
it, and the extra cost (median of with minus median of without; p95 likewise),
in milliseconds, against the targets: a 1 KiB write pays <= 1 ms more, a
run_command in a 1,000-file root <= 20 ms more.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import p95  # type: ignore[import-not-found]  # noqa: E402 (the bench folder's own)

from gbr_node.checkpoints.store import CheckpointStore, default_path  # noqa: E402
from gbr_node.config.profile import ToolsConfig  # noqa: E402
from gbr_node.sandbox import Sandbox  # noqa: E402
from gbr_node.tools import build_registry  # noqa: E402
from gbr_node.tools.base import TURN  # noqa: E402
from gbr_node.tools.registry import Registry, ToolResult  # noqa: E402

TARGETS = {"write 1 KiB": "<= 1 ms more", "run_command, 1000 files": "<= 20 ms more"}


def registries(root: Path) -> tuple[Registry, Registry, CheckpointStore]:
    tools = ToolsConfig.model_validate({"run_command": {"allow": ["true"], "confine": "off"}})
    sandbox = Sandbox(root)
    store = CheckpointStore(default_path(root), root)
    path = "/usr/bin:/bin"
    kept = build_registry(tools, sandbox, search_path=path, checkpoints=store)
    bare = build_registry(tools, sandbox, search_path=path)
    return kept, bare, store


def timed(call: Callable[[], ToolResult]) -> float:
    started = time.perf_counter()
    result = call()
    elapsed = (time.perf_counter() - started) * 1000
    assert not result.is_error, result
    return elapsed


def bench_write(size: int, rounds: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        kept, bare, store = registries(root)
        with_store: list[float] = []
        without: list[float] = []
        for n in range(rounds):
            token = TURN.set(f"bench.{n}")  # one turn per round: each write keeps its prior
            try:
                for registry, samples in ((kept, with_store), (bare, without)):
                    content = (f"{n} {id(samples)} " * (size // 8 + 1))[:size]
                    args = {"path": "data.txt", "content": content}
                    samples.append(timed(functools.partial(registry.call, "write_file", args)))
            finally:
                TURN.reset(token)
        store.close()
        return with_store, without


def bench_command(files: int, rounds: int) -> tuple[list[float], list[float], float]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        for n in range(files):
            sub = root / f"d{n % 50:02d}"
            sub.mkdir(exist_ok=True)
            (sub / f"f{n}.txt").write_bytes(os.urandom(512).hex().encode())
        kept, bare, store = registries(root)
        args = {"argv": ["true"]}
        cold = timed(lambda: kept.call("run_command", args))
        with_store: list[float] = []
        without: list[float] = []
        for _ in range(rounds):
            with_store.append(timed(lambda: kept.call("run_command", args)))
            without.append(timed(lambda: bare.call("run_command", args)))
        store.close()
        return with_store, without, cold


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="3 rounds, small roots")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    roots = (100, 300) if args.quick else (1000, 10_000)
    sizes = [("1 KiB", 1024), ("1 MiB", 1 << 20), ("20 MiB", 20 << 20)]
    rows: list[tuple[str, list[float], list[float], float | None]] = []
    for label, size in sizes:
        with_store, without = bench_write(size, rounds)
        rows.append((f"write {label}", with_store, without, None))
    for files in roots:
        with_store, without, command_cold = bench_command(files, rounds)
        rows.append((f"run_command, {files} files", with_store, without, command_cold))
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"{rounds} rounds, {os.cpu_count()} CPUs, load average {load}; times in ms")
    print(
        f"{'measure':<28}{'with':>9}{'p95':>9}{'without':>9}{'p95':>9}"
        f"{'extra':>9}{'p95':>9}{'cold':>9}  target"
    )
    for label, kept, bare, cold in rows:
        extra = statistics.median(kept) - statistics.median(bare)
        extra95 = p95(kept) - p95(bare)
        print(
            f"{label:<28}{statistics.median(kept):>9.2f}{p95(kept):>9.2f}"
            f"{statistics.median(bare):>9.2f}{p95(bare):>9.2f}"
            f"{extra:>9.2f}{extra95:>9.2f}"
            f"{'' if cold is None else f'{cold:.1f}':>9}  {TARGETS.get(label, '')}".rstrip()
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
