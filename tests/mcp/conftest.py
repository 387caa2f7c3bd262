"""Fixtures for mounted MCP servers: the test server's command line, and real third-party ones."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def support_server_argv(marks: Path, *flags: str) -> tuple[str, ...]:
    """argv of `tests/support/mcp_server.py` noting its marks in `marks`."""
    return (sys.executable, str(REPO / "tests" / "support" / "mcp_server.py"), str(marks), *flags)


def installed(script: str) -> str:
    """The absolute path of a console script of this virtualenv (e.g. mcp-server-time)."""
    path = BIN / script
    if not os.access(path, os.X_OK):
        pytest.fail(f"{script} is not installed: README.md's test command installs it")
    return str(path)


def alive(pid: int) -> bool:
    """True while process `pid` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "\nState:\tZ" in status.read_text())


def toml_array(items) -> str:
    """`items` as a TOML array of strings (paths here hold no quotes or backslashes)."""
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"
