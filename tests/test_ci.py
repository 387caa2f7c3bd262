"""CI runs what the README tells a developer to run (issue 22): `.ci/run`'s last line
is README.md's test command, so the checker and the quick benchmarks run in CI."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_test_command() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"```sh\n(python3 -m venv .*pytest -q)\n```", text)
    assert match, "README.md names no test command"
    return match.group(1)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    last = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert last == readme_test_command()


def test_the_readme_test_command_type_checks_before_the_tests() -> None:
    steps = [step.strip() for step in readme_test_command().split("&&")]
    assert steps.index("ruff check .") < steps.index("mypy") < steps.index("pytest -q")
