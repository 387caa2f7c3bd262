"""One connection to a mounted MCP server, through the official `mcp` SDK (GBR-MCP-01).

`connect(name, config, cwd, on_stderr)` starts a stdio server as a child
(`mcp.client.stdio.stdio_client`: its own session and process group, stdin
closed then the whole group killed when the connection ends) or reaches a
streamable-HTTP one on loopback, negotiates the protocol with `mcp.Client`
(`server/discover` first, the legacy `initialize` handshake if the server
predates 2026-07-28), and yields a `Connection`.

The child's stderr goes through a pipe that the connection drains line by line
into `on_stderr` (the node's log), so a chatty server can never block on it.
`Connection.lost` is set when the server's stdout ends (the process died or
closed it) or when a call finds the transport broken: the supervisor in
`mounts.py` then restarts it.

Errors are translated at this boundary (errors.py): a call that runs out of
`timeout_s` raises `CallTimeout`; one the server refuses, or that breaks on a
dying server, raises `ToolError` naming the server.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

import anyio
import mcp_types as types
import trio
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gbr_node import __version__
from gbr_node.config.profile import McpServerConfig
from gbr_node.errors import CallTimeout, ToolError

log = logging.getLogger("gbr_node.mcp")
MAX_LIST_PAGES = 100
"""`tools/list` pages read at most: a server whose cursor never ends cannot hang the mount."""
_STDERR_LINE_CHARS = 2_000
CLIENT_INFO = types.Implementation(name="gbr-node", version=__version__)


class Connection:
    """A live MCP client session to one mounted server.

    `lost` is set once the connection is known to be dead; `protocol_version`
    is what the handshake settled on.
    """

    def __init__(self, name: str, client: Client, lost: trio.Event) -> None:
        self.name = name
        self.client = client
        self.lost = lost

    @property
    def protocol_version(self) -> str | None:
        """The negotiated MCP version, e.g. "2026-07-28" or "2025-11-25"."""
        return self.client.session.protocol_version

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server lists (all pages, at most `MAX_LIST_PAGES`), as MCP dicts.

        Raises ToolError when the server refuses or the connection breaks.
        """
        tools: list[dict[str, Any]] = []
        cursor = None
        for _ in range(MAX_LIST_PAGES):
            try:
                page = await self.client.list_tools(cursor=cursor, cache_mode="refresh")
            except Exception as exc:
                raise self._broken("tools/list", exc) from exc
            tools += [_wire(tool) for tool in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], *, timeout_s: float
    ) -> dict[str, Any]:
        """`tools/call` `tool` there; returns the MCP result dict (`isError` results too).

        A caller's cancellation reaches the server as `notifications/cancelled`
        (the SDK sends it). Raises CallTimeout after `timeout_s` seconds,
        ToolError when the server refuses the call or the connection breaks.
        """
        try:
            result = await self.client.call_tool(tool, arguments, read_timeout_seconds=timeout_s)
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                raise CallTimeout(
                    f"MCP server {self.name}: {tool} did not answer within {timeout_s} s"
                ) from exc
            raise self._broken(tool, exc) from exc
        except Exception as exc:  # the SDK's transport errors (OSError, anyio, httpx2, ...)
            raise self._broken(tool, exc) from exc
        return _wire(result)

    def _broken(self, what: str, exc: Exception) -> ToolError:
        if isinstance(exc, MCPError) and exc.code != types.CONNECTION_CLOSED:
            return ToolError(f"MCP server {self.name} refused {what}: {exc.message}")
        self.lost.set()
        return ToolError(f"MCP server {self.name} stopped answering ({what}: {exc or type(exc)})")


def _wire(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


@asynccontextmanager
async def connect(
    name: str, config: McpServerConfig, cwd: Path, on_stderr: Callable[[str], None]
) -> AsyncIterator[Connection]:
    """Start (or reach) server `name` and yield its `Connection`; stop it on exit.

    Raises OSError when the command cannot be started, ToolError when the
    handshake fails or takes over `config.timeout_s` seconds (possibly inside
    an exception group: the SDK's task groups wrap what they raise).
    Leaving the block closes the server's stdin, then kills its process
    group if it has not exited within the SDK's grace period (about 2 s).
    """
    lost = trio.Event()
    async with AsyncExitStack() as stack:
        nursery = await stack.enter_async_context(trio.open_nursery())
        stack.callback(nursery.cancel_scope.cancel)  # runs first on exit: stop drain and relay
        if config.command is not None:
            transport = _stdio(config, cwd, on_stderr, nursery)
        else:
            assert config.url is not None
            transport = streamable_http_client(config.url)
        client = Client(
            _watched(transport, lost, nursery),
            mode="auto",
            cache=None,
            client_info=CLIENT_INFO,
            read_timeout_seconds=config.timeout_s,
        )
        # No cancel scope around this enter: the client's task groups outlive it. Its
        # handshake is bounded by `read_timeout_seconds` instead.
        try:
            await stack.enter_async_context(client)
        except MCPError as exc:
            raise ToolError(f"MCP server {name} failed its handshake: {exc.message}") from exc
        yield Connection(name, client, lost)


@asynccontextmanager
async def _stdio(
    config: McpServerConfig, cwd: Path, on_stderr: Callable[[str], None], nursery: trio.Nursery
) -> AsyncIterator[Any]:
    """`stdio_client` with the child's stderr on a pipe drained into `on_stderr`."""
    assert config.command is not None
    argv0, *args = config.command
    params = StdioServerParameters(command=argv0, args=args, env=dict(config.env), cwd=cwd)
    read_fd, write_fd = os.pipe()
    nursery.start_soon(_drain_lines, read_fd, on_stderr)
    with os.fdopen(write_fd, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as streams:
            errlog.close()  # the child holds its copy: EOF comes when it (and its group) exits
            yield streams


@asynccontextmanager
async def _watched(transport: Any, lost: trio.Event, nursery: trio.Nursery) -> AsyncIterator[Any]:
    """`transport`'s streams, with its read stream relayed so that its end sets `lost`."""
    async with transport as (read_stream, write_stream):
        relay_send, relay_receive = anyio.create_memory_object_stream[Any](0)

        async def relay() -> None:
            async with relay_send:
                with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    async for item in read_stream:
                        await relay_send.send(item)
            lost.set()

        nursery.start_soon(relay)
        yield relay_receive, write_stream


async def _drain_lines(fd: int, on_line: Callable[[str], None]) -> None:
    """Read `fd` to its end (then close it), handing each line (cut to 2,000 chars) to `on_line`."""
    async with trio.lowlevel.FdStream(fd) as stream:
        pending = b""
        while chunk := await stream.receive_some(65536):
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                on_line(line.decode("utf-8", "replace").rstrip()[:_STDERR_LINE_CHARS])
            pending = pending[-_STDERR_LINE_CHARS * 4 :]
        if pending:
            on_line(pending.decode("utf-8", "replace").rstrip()[:_STDERR_LINE_CHARS])
