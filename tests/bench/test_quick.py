"""Every benchmark under scripts/bench/ still runs (issue 22): each `--quick` mode,
a few iterations of the same code path, must exit 0 and print its table.

A benchmark added without a row here fails `test_every_benchmark_is_listed`; a module
whose name starts with "_" is a helper the benchmarks share, not a benchmark.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.local_model.support import requires_local_model

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"
TIMEOUT_S = 600

# script name -> a line of its table's header (or its first row)
TABLES = {
    "agent": "history  measure",
    "chat": "message/send -> ack (shown there), open connection",
    "checkpoints": "write 1 KiB",
    "checks": "formatter alone (subprocess.run)",
    "confine": "program          mode        median ms",
    "flood": "quiet (no flood)",
    "git_guard": "git command",
    "hotreload": "interval s  median ms",
    "interrupt": "server sees the close",
    "library": "query p95 (question set)",
    "local_model": "| model | start s | first token cold s",
    "local_tasks": "| model | tasks | success %",
    "mcp": "mcp local: SDK client -> gbr-node mcp, read_file",
    "p2p_connect": "connect (dial+Noise+Yamux)",
    "relay": "call relayed",
    "rpc": "tools/call read_file 1 KiB, new stream",
    "sandbox": "resolve  (plain)",
    "startup": "gbr-node call bob read_file (1 KiB)",
    "terminal": "streaming, typing",
}
NEEDS_LOCAL_MODEL = {"local_model", "local_tasks"}


def test_every_benchmark_is_listed() -> None:
    benchmarks = [path.stem for path in BENCH.glob("*.py") if not path.stem.startswith("_")]
    assert sorted(benchmarks) == sorted(TABLES)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[requires_local_model] if name in NEEDS_LOCAL_MODEL else [])
        for name in TABLES
    ],
)
def test_quick_mode_prints_its_table(name: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), "--quick"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, f"{name}.py --quick failed:\n{done.stdout}\n{done.stderr}"
    assert TABLES[name] in done.stdout, f"{name}.py printed no table:\n{done.stdout}"
