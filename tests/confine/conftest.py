"""A world to attack: a temp HOME with secrets, a project root with protected paths, a
folder outside, and run_command with python3 on the allow-list, under each
confinement mode this machine offers (GBR-CONF-01)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gbr_node.config.profile import ToolsConfig
from gbr_node.confine import support
from gbr_node.confine.support import Support, self_test
from gbr_node.sandbox import Sandbox
from gbr_node.tools import build_registry, process
from gbr_node.tools.base import ToolResult

SYSTEM_PATH = "/usr/bin:/bin"
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- ssh-secret-4242"
IDENTITY_KEY = "identity-secret-ed25519-4242"
APPROVALS = "approvals-db-secret-4242"
ORIGINAL = "# original content\n"  # valid TOML and git config alike

MODES = ("namespaces", "landlock", "off")


@functools.cache
def offered(mode: str) -> Support | None:
    """The Support that runs `mode` here, or None when this machine cannot."""
    found = support()
    if mode == "off" or found.abi < 1:
        return None
    if mode == found.mode:
        return found
    if mode == "landlock" and found.abi >= 3 and self_test(found.abi, namespaces=False) is None:
        return Support(found.abi, "landlock", "forced by the test")
    return None


@dataclass
class World:
    """The paths of one attack test and the tool to attack them with."""

    home: Path
    root: Path
    outside: Path
    mode: str
    run: Callable[..., ToolResult]
    helpers: list[Any] = field(default_factory=list)  # processes, sockets: whatever has close

    def guarded(self) -> dict[str, bytes]:
        """Every file an attack must leave alone: outside, the home folder, and the
        root's protected and private paths (not root/work, the scratch folder)."""
        found = {}
        for top in (self.outside, self.home, self.root):
            for dirpath, dirnames, filenames in os.walk(top):
                if Path(dirpath) == self.root:
                    dirnames[:] = [d for d in dirnames if d != "work"]
                    filenames = [f for f in filenames if f != "attack.py"]
                for name in filenames:
                    path = Path(dirpath, name)
                    found[str(path)] = path.read_bytes() if not path.is_symlink() else b"->"
                for name in dirnames:
                    found[str(Path(dirpath, name))] = b"dir"
        return found

    def helper(self, *, cwd: Path | None = None, env: dict | None = None) -> int:
        """A sleeping unconfined process (its pid), stopped at the end of the test."""
        proc = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            cwd=cwd,
            env=env,
        )
        self.helpers.append(proc)
        return proc.pid


def build_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> World:
    home, root, outside = tmp_path / "home", tmp_path / "root", tmp_path / "outside"
    for folder in (home / ".ssh", home / ".config" / "gbr-node", outside, root / "work"):
        folder.mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SSH_KEY)
    (home / ".config" / "gbr-node" / "identity.key").write_text(IDENTITY_KEY)
    (outside / "target.txt").write_text(ORIGINAL)
    for relative in (".gbr_envs/default.toml", ".git/config", ".git/hooks/pre-commit"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(ORIGINAL)
    (root / "pyproject.toml").write_text(ORIGINAL)
    (root / ".gbr").mkdir()
    (root / ".gbr" / "approvals.db").write_text(APPROVALS)
    monkeypatch.setenv("HOME", str(home))
    if mode != "off":
        forced = offered(mode)
        if forced is None:
            pytest.skip(f"this machine offers no {mode} confinement")
        monkeypatch.setattr(process, "support", lambda: forced)
    sandbox = Sandbox(root, ["pyproject.toml"])
    venv_pytest = Path(sys.prefix) / "bin" / "pytest"
    allow = [{"name": "python3"}, {"name": "git", "subcommands": ["status"]}]
    if venv_pytest.exists():
        allow.append({"name": "pytest", "path": str(venv_pytest)})
    tools = ToolsConfig.model_validate(
        {"run_command": {"allow": allow, "confine": "off" if mode == "off" else "required"}}
    )
    registry = build_registry(tools, sandbox, search_path=SYSTEM_PATH)

    def run(*argv: str, timeout_s: float = 20, cwd: str = ".") -> ToolResult:
        arguments = {"argv": list(argv), "timeout_s": timeout_s, "cwd": cwd}
        return registry.call("run_command", arguments)

    return World(home, Path(sandbox.root), Path(os.path.realpath(outside)), mode, run)


@pytest.fixture(params=MODES)
def world(request, tmp_path, monkeypatch) -> Iterator[World]:
    """The attack world under each mode: namespaces, Landlock only, and off (where
    every attack must succeed, which shows it is a real one)."""
    made = build_world(tmp_path, monkeypatch, request.param)
    yield made
    for proc in made.helpers:
        proc.kill()
        proc.wait()


def python_copy(folder: Path) -> Path:
    """A copy of the system python3 binary in `folder` (for the setuid helper)."""
    source = os.path.realpath(shutil.which("python3", path=SYSTEM_PATH) or "/usr/bin/python3")
    target = folder / "helper"
    shutil.copy2(source, target)
    return target
