"""CI runs what the README tells a developer to run (issue 22): `.ci/run`'s last line
is README.md's test command, so the checker and the quick benchmarks run in CI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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


# --- the locks the README installs from (issue 34, docs/adr/0018-no-compiler-lock.md) ---

LOCKS = {  # lock file -> (extras it holds, the oldest Python it is resolved for)
    "node.txt": (("local",), "3.10"),
    "test.txt": (("test", "local"), "3.11"),
}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def lock_entries(name: str) -> list[tuple[str, str, int]]:
    """(canonical name, version, number of hashes) for every pin of requirements/NAME."""
    entries: list[tuple[str, str, int]] = []
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        if match := PIN.match(line):
            entries.append((canonicalize_name(match[1]), match[2], 0))
        elif line.strip().startswith("--hash=sha256:") and entries:
            package, pinned, hashes = entries[-1]
            entries[-1] = (package, pinned, hashes + 1)
    return entries


def direct_requirements(extras: tuple[str, ...], python: str) -> list[str]:
    """pyproject.toml's dependencies plus those of `extras` that apply on `python`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in extras:
        wanted += project["optional-dependencies"][extra]
    env = {"python_version": python, "python_full_version": f"{python}.0"}
    applying = []
    for text in wanted:
        marker = Requirement(text).marker
        if marker is None or marker.evaluate(env):
            applying.append(text)
    return applying


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_the_lock_pins_every_direct_dependency_of_pyproject(lock: str) -> None:
    from packaging.requirements import Requirement

    extras, python = LOCKS[lock]
    pinned: dict[str, set[str]] = {}
    for package, at, _ in lock_entries(lock):
        pinned.setdefault(package, set()).add(at)
    drifted = []
    for text in direct_requirements(extras, python):
        requirement = Requirement(text)
        versions = pinned.get(canonicalize_name(requirement.name), set())
        if not any(requirement.specifier.contains(v, prereleases=True) for v in versions):
            drifted.append(f"{text}: locked {sorted(versions) or 'nothing'}")
    assert drifted == [], "run scripts/lock.sh"


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_the_lock_holds_the_overrides_and_a_hash_for_every_pin(lock: str) -> None:
    from packaging.requirements import Requirement

    entries = lock_entries(lock)
    assert [package for package, _, hashes in entries if hashes == 0] == []
    for line in (ROOT / "requirements" / "overrides.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            override = Requirement(line)
            name = canonicalize_name(override.name)
            locked = {at for package, at, _ in entries if package == name}
            assert locked == {str(override.specifier).removeprefix("==")}, line


def test_the_readme_installs_only_from_the_hashed_locks() -> None:
    text = (ROOT / "README.md").read_text()
    install = re.search(r"```sh\n(.*?)\n```", text, re.S)
    assert install
    for command in (install.group(1), readme_test_command()):
        pips = [s.strip() for s in command.split("&&") if s.strip().startswith("pip install")]
        locked, project = pips
        assert "--no-deps --require-hashes" in locked and "-r requirements/" in locked
        assert project.startswith("pip install --no-deps ") and project.endswith(" .")


def test_ci_proves_the_readme_install_needs_no_compiler() -> None:
    run = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "bash .ci/install-nocc" in run
    script = (ROOT / ".ci" / "install-nocc").read_text()
    assert "CC=false" in script and "/usr/include" in script and "gbr-node init" in script


def test_the_server_install_hint_pins_the_locked_xllamacpp() -> None:
    from gbr_node.llm.local import INSTALL_HINT

    locked = {at for package, at, _ in lock_entries("node.txt") if package == "xllamacpp"}
    hint = f"pip install --no-deps xllamacpp=={locked.pop()}"
    assert hint == INSTALL_HINT
