"""Benchmark: what write checks add (UBQ-DEV-02, UNW-AI-01 / STD-DEV-01), on a 300-line file.

Run: `.venv/bin/python scripts/bench/checks.py [--rounds N] [--interrupts N] [--quick]`
(`--quick`: 3 rounds and 1 interrupt, a smoke run of every measure). In a temporary
root holding one 300-line Python file, interleaved so that load hits all
alike, it times (wall clock, `time.perf_counter`):

- format on save: `write_file` of the file (badly formatted, so ruff
  changes it) with `[checks]` against the same `write_file` without, and
  `edit_file` of one line of the formatted file (the file is known to be
  formatted, so one formatter run) with and without; the difference is
  set against the formatter alone, `ruff format --stdin-filename F -` run by
  `subprocess.run` with the same input;
- check: `CheckRunner.run` of `ruff check --quiet --output-format concise F`
  against that command alone (`subprocess.run`).

Both with the node's commands confined as this machine allows (the profile
default, `confine = "auto"`) and with `confine = "off"`: the difference is
the OS sandbox's price, measured in the same run as `run_bounded` of `true`
confined against unconfined (scripts/bench/confine.py measures it in depth),
not the checks'.
With `--interrupts N` it also times `/s` during a check through a real
pseudo-terminal (as scripts/bench/interrupt.py does for a stream): `gbr-node
run` against the test model server, whose model writes a new file each
time; its check (`sh -c "sleep 60"`) is running when `/s next` is typed;
from that Enter to the re-prompt's arrival at the server (budget of the
interrupt bench: p95 below 150 ms).
Prints medians in milliseconds, the added time, the ratio to the bare
command, the target (added <= 1.2 x bare + 5 ms for format; runner <= 1.2 x
bare + 5 ms for the check), and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gbr_node.checks.plan import CheckTarget  # noqa: E402 (needs the path above)
from gbr_node.config.profile import Profile  # noqa: E402
from gbr_node.confine import support  # noqa: E402
from gbr_node.confine.policy import for_commands  # noqa: E402
from gbr_node.sandbox import Sandbox  # noqa: E402
from gbr_node.tools.checkrunner import CheckRunner  # noqa: E402
from gbr_node.tools.files import EditFileParams, FileTools, WriteFileParams  # noqa: E402
from gbr_node.tools.process import run_bounded  # noqa: E402

RUFF = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
NAME = "module.py"


def source(lines: int = 300) -> str:
    """About `lines` lines of badly formatted Python (no lint errors): functions and a class."""
    out = ["import math\n", "\n"]
    n = 0
    while len(out) < lines:
        out += [
            f"def f{n}( a,b ):\n",
            f"  c=a*{n}+b\n",
            "  if c>10 :\n",
            "      return math.sqrt( c )\n",
            "  return c\n",
            "\n",
        ]
        n += 1
    return "".join(out[:lines])


def profile(confine: str) -> Profile:
    return Profile.model_validate(
        {
            "tools": {"run_command": {"confine": confine}},
            "checks": {
                "ruff": {
                    "files": ["**/*.py"],
                    "formatter": [RUFF, "format", "--stdin-filename", "{path}", "-"],
                    "check": [RUFF, "check", "--quiet", "--output-format", "concise", "{path}"],
                }
            },
        }
    )


def timed(action: Callable[..., object], *args: object, **kwargs: object) -> float:
    """Milliseconds `action(*args, **kwargs)` took."""
    started = time.perf_counter()
    action(*args, **kwargs)
    return (time.perf_counter() - started) * 1000


def interrupt_during_check(cycles: int) -> list[float]:
    """Enter on `/s` during a running check → the re-prompt at the model server, in ms."""
    import pexpect

    from tests.e2e.conftest import node_env, write_profile
    from tests.e2e.p2p_helpers import children_running
    from tests.e2e.terminal import COLS, ROWS, Terminal
    from tests.support.model_server import ModelServer
    from tests.support.replies import tool_call_reply

    shell = shutil.which("sh")
    checks = (
        f'[checks.slow]\nfiles = ["**/*.py"]\ncheck = ["{shell}", "-c", "sleep 60", "{{path}}"]\n'
        "timeout_s = 120\n"
    )
    took = []
    with ModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        write_profile(project, server.base_url, checks)
        server.enqueue(
            *(
                tool_call_reply("write_file", {"path": f"m{n}.py", "content": "x = 1\n"})
                for n in range(cycles + 1)
            )
        )
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
        assert child.pid is not None  # spawned: pexpect's stubs allow None before that
        pid = child.pid
        term = Terminal(child)
        try:
            term.expect("/help for commands", 60)  # a minute to start on a loaded machine
            child.send("go\r")
            for _ in range(cycles):
                deadline = time.monotonic() + 30
                while not children_running(pid, "sleep"):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"no check started:\n{term.text()[-2000:]}")
                    term.pump(0.005)
                child.send("/s next")
                term.expect(r"/s next")
                asked = len(server.chat_bodies)
                start = time.monotonic()
                child.send("\r")
                while len(server.chat_bodies) <= asked:
                    term.pump(0.002)
                chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
                took.append((chats[asked].at - start) * 1000)
        finally:
            child.terminate(force=True)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--interrupts", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 rounds, 1 interrupt")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.interrupts = 3, 1
    ugly = source()
    formatted = subprocess.run(
        [RUFF, "format", "--stdin-filename", NAME, "-"],
        input=ugly,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert formatted != ugly and formatted.count("\n") >= 300, "the file must need formatting"
    load_before = os.getloadavg()
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        sandbox = Sandbox(root)
        plain = FileTools(sandbox, 1 << 20)
        modes = {}
        for confine in ("auto", "off"):
            loaded = profile(confine)
            runner = CheckRunner(
                loaded.checks, sandbox, loaded.tools.run_command, os.environ["PATH"]
            )
            modes[confine] = (runner, FileTools(sandbox, 1 << 20, runner))
        target = (CheckTarget("ruff", NAME),)
        true = [shutil.which("true") or "/bin/true"]
        policies = {
            c: for_commands(profile(c).tools.run_command, sandbox, tuple(true)) for c in modes
        }

        def spawn_true(confine: str) -> None:
            run_bounded(
                true,
                cwd=root,
                env=os.environ,
                timeout_s=10,
                max_output_bytes=1024,
                policy=policies[confine],
            )

        bare_format = [RUFF, "format", "--stdin-filename", NAME, "-"]
        bare_check = [RUFF, "check", "--quiet", "--output-format", "concise", NAME]
        edit = EditFileParams(path=NAME, old_string="c = a * 7 + b", new_string="c = a * 7 - b")
        undo = EditFileParams(path=NAME, old_string="c = a * 7 - b", new_string="c = a * 7 + b")

        def add(key: str, value: float) -> None:
            samples.setdefault(key, []).append(value)

        for _ in range(args.rounds):
            (root / NAME).unlink(missing_ok=True)
            add(
                "write plain",
                timed(lambda: plain.write_file(WriteFileParams(path=NAME, content=ugly))),
            )
            add(
                "formatter alone",
                timed(
                    lambda: subprocess.run(
                        bare_format, input=ugly.encode(), capture_output=True, cwd=root
                    )
                ),
            )
            (root / NAME).write_text(formatted)
            add("edit plain", timed(lambda: plain.edit_file(edit)))
            plain.edit_file(undo)
            add(
                "check alone",
                timed(lambda: subprocess.run(bare_check, capture_output=True, cwd=root)),
            )
            for confine in modes:
                add(f"true {confine}", timed(spawn_true, confine))
            for confine, (runner, tools) in modes.items():
                (root / NAME).unlink(missing_ok=True)
                add(
                    f"write checked {confine}",
                    timed(tools.write_file, WriteFileParams(path=NAME, content=ugly)),
                )
                assert (root / NAME).read_text() == formatted
                add(f"edit checked {confine}", timed(tools.edit_file, edit))
                tools.edit_file(undo)
                add(f"check runner {confine}", timed(runner.run, target))
    cut = interrupt_during_check(args.interrupts) if args.interrupts else []
    load_after = os.getloadavg()
    med = {key: statistics.median(values) for key, values in samples.items()}
    print(f"write checks on a {formatted.count(chr(10))}-line Python file, ruff {RUFF}")
    print(f"confinement here: {support().describe()}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)}")
    print(
        f"{'measure':<40} {'median ms':>10} {'added ms':>9} {'bare ms':>8} {'ratio':>6} "
        f"{'target':>7}"
    )
    fmt, chk = med["formatter alone"], med["check alone"]
    print(f"{'formatter alone (subprocess.run)':<40} {fmt:>10.1f}")
    print(f"{'check alone (subprocess.run)':<40} {chk:>10.1f}")
    for confine in ("auto", "off"):
        for kind, plain_key in (("write", "write plain"), ("edit", "edit plain")):
            total = med[f"{kind} checked {confine}"]
            added = total - med[plain_key]
            ok = "met" if added <= 1.2 * fmt + 5 else "MISSED"
            label = f"{kind}_file + format (confine={confine})"
            print(
                f"{label:<40} {total:>10.1f} {added:>9.1f} {fmt:>8.1f} {added / fmt:>6.2f} {ok:>7}"
            )
        total = med[f"check runner {confine}"]
        ok = "met" if total <= 1.2 * chk + 5 else "MISSED"
        label = f"check run (confine={confine})"
        print(
            f"{label:<40} {total:>10.1f} {total - chk:>9.1f} {chk:>8.1f} "
            f"{total / chk:>6.2f} {ok:>7}"
        )
    price = med["true auto"] - med["true off"]
    print(
        f"{'confinement price (`true` confined - off)':<40} {price:>10.1f}   "
        f"(confined {med['true auto']:.1f}, off {med['true off']:.1f})"
    )
    print(f"{'write_file without checks':<40} {med['write plain']:>10.1f}")
    print(f"{'edit_file without checks':<40} {med['edit plain']:>10.1f}")
    if cut:
        ordered = sorted(cut)
        p95 = ordered[max(0, -(-95 * len(ordered) // 100) - 1)]
        print(
            f"{'/s during a check: Enter -> re-prompt':<40} {statistics.median(cut):>10.1f}   "
            f"(p95 {p95:.1f}, max {max(cut):.1f}; {len(cut)} cuts; budget p95 < 150 ms)"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in load_after)}")
    print(
        f"({args.rounds} rounds, interleaved; target: added <= 1.2 x bare + 5 ms; "
        "'added' for a check run is the runner over the bare command)"
    )


if __name__ == "__main__":
    main()
