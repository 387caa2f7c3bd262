"""End-to-end fixtures: a temporary project, the real test model server, and
`gbr-node` run as a separate process in a real pseudo-terminal (pexpect)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pexpect
import pytest

from tests.e2e.terminal import COLS, ROWS, Terminal
from tests.support.model_server import ModelServer

TIMEOUT_S = 20


def node_env(home: Path) -> dict[str, str]:
    """The environment of a node under test: no inherited model settings or keys."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "GBR_")) and not k.endswith("_API_KEY")
    }
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), TERM="xterm", NO_COLOR="1")
    env["GBR_TEST_KEY"] = "sk-test"
    return env


def write_profile(project: Path, base_url: str, extra: str = "", name: str = "default") -> Path:
    """A minimal profile pointing at the test model server."""
    folder = project / ".gbr_envs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(
        'system_prompt = "You are a test agent."\n'
        'protected_files = ["pyproject.toml"]\n'
        f"{extra}\n"
        "[model]\n"
        f'base_url = "{base_url}"\n'
        'model = "test-model"\n'
        'api_key_env = "GBR_TEST_KEY"\n'
        "[node]\n"
        'listen = ["/ip4/127.0.0.1/tcp/0"]\n',
        encoding="utf-8",
    )
    return path


def gbr(cwd: Path, *args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m gbr_node ARGS` in `cwd` to completion (one minute at most)."""
    home = home or cwd.parent / "home"
    home.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "gbr_node", *args],
        cwd=cwd,
        env=node_env(home),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def fresh(tmp_path) -> Path:
    """A folder where `gbr-node init` ran and nothing else: where the README's first
    command leaves a new user (`~/gbr-demo`)."""
    project = tmp_path / "gbr-demo"
    project.mkdir()
    assert gbr(project, "init").returncode == 0
    return project


@pytest.fixture
def model_server():
    with ModelServer(model="test-model") as server:
        yield server


@pytest.fixture
def project(tmp_path, model_server) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    write_profile(root, model_server.base_url)
    return root


def spawn_node(
    project: Path,
    *args: str,
    home: Path | None = None,
    identity: Path | None = None,
    env: dict[str, str] | None = None,
    dimensions: tuple[int, int] = (ROWS, COLS),
    color: bool = False,
    wrap: Sequence[str] = (),
) -> pexpect.spawn:
    """Start `python -m gbr_node [--identity KEY] ARGS` in `project` inside a pseudo-terminal
    of `dimensions` (rows, columns), under `wrap` when given (e.g. `ip netns exec NS`);
    `color` leaves NO_COLOR unset."""
    home = home or project.parent / "home"
    home.mkdir(exist_ok=True)
    flags = ["--identity", str(identity)] if identity else []
    environment = {**node_env(home), **(env or {})}
    if color:
        environment.pop("NO_COLOR", None)
    argv = [*wrap, sys.executable, "-m", "gbr_node", *flags, *args]
    child = pexpect.spawn(
        argv[0],
        argv[1:],
        cwd=str(project),
        env=environment,
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=dimensions,
    )
    return child


@pytest.fixture
def run_node(project):
    """Start `gbr-node run`; returns its `Terminal` once the banner shows."""
    children = []

    def start(
        *args: str, identity: Path | None = None, env: dict[str, str] | None = None
    ) -> Terminal:
        child = spawn_node(project, "run", *args, identity=identity, env=env)
        children.append(child)
        term = Terminal(child)
        term.expect("/help for commands")
        return term

    yield start
    for child in children:
        if child.isalive():
            child.terminate(force=True)
