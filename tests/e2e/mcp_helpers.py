"""Helpers for the end-to-end MCP tests: `gbr-node mcp` driven by the SDK's real stdio client.

The client is `mcp.ClientSession` over `mcp.client.stdio.stdio_client`, which
starts `python -m gbr_node ... mcp` as a child process, as Claude Desktop or
Cursor would; `era` picks the handshake: "modern" (`server/discover`,
2026-07-28) or "legacy" (`initialize`).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.client.session
import trio
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.e2e.conftest import node_env

ERAS = ("modern", "legacy")
WAIT_S = 45
MODERN_VERSION = "2026-07-28"

# The SDK gives `server/discover` a fixed 10 s from the moment it spawns the server; at
# a load average of 15 on 2 cores, `gbr-node mcp` takes longer than that to import the
# SDK and start (2.7 s when the machine is free). The tests are about what the server
# answers, so the modern handshake gets the same patience as the legacy one.
mcp.client.session.DISCOVER_TIMEOUT_SECONDS = WAIT_S


def write_mcp_profile(project: Path, extra: str = "") -> Path:
    """A profile for the node that `gbr-node mcp` runs: `pyproject.toml` protected,
    loopback only, `extra` appended (peers, mounted servers)."""
    folder = project / ".gbr_envs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "default.toml"
    path.write_text(
        'system_prompt = "An MCP test node."\nprotected_files = ["pyproject.toml"]\n'
        f'[node]\nlisten = ["/ip4/127.0.0.1/tcp/0"]\n{extra}\n',
        encoding="utf-8",
    )
    return path


@asynccontextmanager
async def mcp_session(
    project: Path,
    era: str,
    *,
    home: Path | None = None,
    identity: Path | None = None,
    args: Sequence[str] = (),
    message_handler: Callable[[Any], Any] | None = None,
) -> AsyncIterator[ClientSession]:
    """An MCP client session to `gbr-node mcp` started in `project`, after its handshake.

    The node's stderr is appended to `project/../mcp-stderr.txt`.
    """
    home = home or project.parent / "home"
    home.mkdir(exist_ok=True)
    flags = ["--identity", str(identity)] if identity else []
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gbr_node", *flags, "mcp", *args],
        cwd=str(project),
        env=node_env(home),
    )
    with open(project.parent / "mcp-stderr.txt", "a", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read_stream, write_stream),
            ClientSession(
                read_stream,
                write_stream,
                read_timeout_seconds=WAIT_S,
                message_handler=message_handler,  # type: ignore[arg-type]  # any callable the test passes
            ) as session,
        ):
            with trio.fail_after(WAIT_S):
                if era == "modern":
                    await session.discover()
                else:
                    await session.initialize()
            yield session


async def tool_names(session: ClientSession) -> list[str]:
    """The names `tools/list` gives now."""
    return [tool.name for tool in (await session.list_tools()).tools]


async def wait_for_tool(session: ClientSession, name: str, timeout_s: float = WAIT_S) -> None:
    """Poll `tools/list` until it offers `name` (peers and mounted servers come up later)."""
    with trio.fail_after(timeout_s):
        while name not in await tool_names(session):
            await trio.sleep(0.2)


def text_of(result: Any) -> str:
    """The text items of a `CallToolResult`, joined by newlines."""
    return "\n".join(item.text for item in result.content if item.type == "text")
