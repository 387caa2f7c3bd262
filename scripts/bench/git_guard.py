"""Benchmark: what closing git's side doors costs a `run_command` git call (issue 12).

Run: `.venv/bin/python scripts/bench/git_guard.py [--rounds N] [--quick]`. In a temporary
repository (200 committed files, one of them changed), `git status --short`
and `git log --oneline -5` are run `--rounds` times each way, interleaved so
load hits both alike:

- raw: the same git, run with the same scrubbed environment through
  `process.run_bounded` (what `run_command` cost before: one process);
- guarded: through the `run_command` tool, which first asks git where the
  repository is and what its config names (`git rev-parse` twice, `git config
  --list`) and then runs git with the disarming settings.

Prints the machine's load average, then median and p95 in milliseconds per
call and the ratio of the medians (guarded / raw). The cost is the extra git
processes; a figure from a loaded machine is a ceiling.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from gbr_node.config.profile import ToolsConfig
from gbr_node.sandbox import Sandbox
from gbr_node.tools import build_registry
from gbr_node.tools.guards import scrubbed_environment
from gbr_node.tools.process import run_bounded

COMMANDS = (["status", "--short"], ["log", "--oneline", "-5"])


def _repository(root: Path) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    env.update(GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.org")
    env.update(GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@example.org")
    for n in range(200):
        (root / f"file{n:03}.txt").write_text(f"line {n}\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "files"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)
    (root / "file000.txt").write_text("changed\n")


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[max(int(len(ordered) * 0.95) - 1, 0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60, help="calls per measurement")
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 calls each")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    git = shutil.which("git")
    if git is None:
        raise SystemExit("git_guard: needs git")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        _repository(root)
        sandbox = Sandbox(root)
        tools = ToolsConfig.model_validate({"run_command": {"allow": ["git"]}})
        registry = build_registry(tools, sandbox, search_path=os.path.dirname(git))
        env = scrubbed_environment(os.environ)
        env["PATH"] = os.path.dirname(git)
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{'git command':<22} {'raw ms (p95)':>14} {'guarded ms (p95)':>18} {'ratio':>7}")
        for command in COMMANDS:
            raw, guarded = [], []
            for _ in range(rounds):
                start = time.perf_counter()
                run_bounded(
                    [git, *command], cwd=root, env=env, timeout_s=30, max_output_bytes=65536
                )
                middle = time.perf_counter()
                registry.call("run_command", {"argv": ["git", *command]})
                end = time.perf_counter()
                raw.append((middle - start) * 1000)
                guarded.append((end - middle) * 1000)
            (raw_median, raw_p95), (guarded_median, guarded_p95) = _ms(raw), _ms(guarded)
            ratio = guarded_median / raw_median
            print(
                f"{' '.join(command):<22} {raw_median:>7.1f} ({raw_p95:>4.1f})"
                f" {guarded_median:>10.1f} ({guarded_p95:>4.1f}) {ratio:>7.2f}"
            )


if __name__ == "__main__":
    main()
