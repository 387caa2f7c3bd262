"""Mounted MCP servers (`[mcp_servers.NAME]`, GBR-MCP-01): owned, supervised, offered as tools.

`Mounts` holds one `MountedServer` per table of the active profile. Each runs
in its own task of `Mounts.run`'s nursery, so every server dies with the node:

- a stdio server is the node's child (its stderr drained into the log); it is
  stopped when the node stops, when its table is removed, and restarted when
  its table changes (hot reload, ADR-0012a: `apply` compares tables), the new
  process started only once the old one is stopped;
- a server that dies, or cannot start, is restarted with exponential backoff
  (`RESTART_BACKOFF_S`); its death is reported once (`notice`), and again only
  after it came back and died anew; its tools stay listed meanwhile, and a
  call to them says it is restarting;
- its tools (those its `tools` key takes) are offered as `NAME__TOOL`, named
  by `names.offer` (MCP's rule, at most 64 characters, collisions settled).

The SDK (`client.py`) is imported only when a server starts: a node with no
mounted server never loads it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from gbr_node.config.network import MOUNT_SEPARATOR
from gbr_node.config.profile import McpServerConfig
from gbr_node.errors import ToolError, UnknownTool
from gbr_node.mcp import names
from gbr_node.mcp.results import text_only
from gbr_node.tools.base import ToolResult

log = logging.getLogger("gbr_node.mcp")
RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
"""Waits before restart attempts 1, 2, ...; the last repeats. Reset after `STABLE_S` up."""
STABLE_S = 30.0


class MountedServer:
    """One `[mcp_servers.NAME]` server: its state, its tools, and the task that keeps it up.

    Attributes:
        name, config, cwd: the table and the folder it runs in (`allowed_root`).
        state: "starting", "up", "restarting" or "stopped".
        tools: the server's own tool specs (MCP dicts) that `config.tools` takes,
            as last listed; kept while it restarts (also after a change of its
            table, until the new process has listed its own).
        reason: why it is not up, in words ("" when up).
    """

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        cwd: Path,
        on_change: Callable[[], None],
        notice: Callable[[str], None],
    ) -> None:
        self.name = name
        self.config = config
        self.cwd = cwd
        self.state = "starting"
        self.tools: tuple[dict[str, Any], ...] = ()
        self.reason = "starting"
        self.scope = trio.CancelScope()
        self.ended = trio.Event()  # its task is over: the child is stopped
        self._on_change = on_change
        self._notice = notice
        self._connection: Any = None
        self._last_stderr = ""

    async def run(self) -> None:
        """Keep the server up until cancelled: connect, list, wait for its end, back off."""
        from gbr_node.mcp.client import connect  # the SDK, only now

        failures = 0
        reported = False
        while True:
            started = trio.current_time()
            try:
                async with connect(self.name, self.config, self.cwd, self._stderr) as connection:
                    self._set_tools(await connection.list_tools())
                    self._connection, self.state, self.reason = connection, "up", ""
                    came_back = reported
                    self._on_change()
                    log.info(
                        "mcp server %s up (MCP %s): %s",
                        self.name,
                        connection.protocol_version,
                        ", ".join(t["name"] for t in self.tools) or "no tools",
                    )
                    if came_back:
                        self._notice(f"mcp server {self.name} is back ({len(self.tools)} tools)")
                    reported = False
                    await connection.lost.wait()
                why = "it stopped"
            except Exception as exc:
                why = _describe(exc)
            self._connection, self.state = None, "restarting"
            if self._last_stderr:
                why += f" (last stderr line: {self._last_stderr})"
            self.reason = why
            self._on_change()
            failures = 1 if trio.current_time() - started >= STABLE_S else failures + 1
            wait = RESTART_BACKOFF_S[min(failures, len(RESTART_BACKOFF_S)) - 1]
            log.warning("mcp server %s: %s; restarting in %.1f s", self.name, why, wait)
            if not reported:
                self._notice(f"mcp server {self.name} stopped: {why}; restarting it")
                reported = True
            await trio.sleep(wait)

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Run the server's `tool`; its `isError` results come back as such.

        Raises UnknownTool when the server does not offer `tool` (or the table
        does not take it), ToolError when the server is down or breaks, and
        CallTimeout after `config.timeout_s` seconds.
        """
        if not any(t["name"] == tool for t in self.tools):
            raise UnknownTool(f"unknown tool {self.name}{MOUNT_SEPARATOR}{tool}")
        connection = self._connection
        if connection is None:
            raise ToolError(
                f"MCP server {self.name} is not running ({self.reason}); it is being restarted, "
                "try again shortly"
            )
        result = await connection.call_tool(tool, arguments, timeout_s=self.config.timeout_s)
        structured = result.get("structuredContent")
        return ToolResult(
            tuple(text_only(result.get("content") or [])),
            is_error=bool(result.get("isError")),
            structured=structured if isinstance(structured, dict) else None,
        )

    def stop(self) -> None:
        """Cancel its task: the connection closes and a child is stopped."""
        self.state, self.reason = "stopped", "removed from the profile"
        self.scope.cancel()

    def _set_tools(self, listed: list[dict[str, Any]]) -> None:
        taken = tuple(t for t in listed if self.config.takes(t.get("name", "")))
        if self.config.tools != "*":
            missing = sorted(set(self.config.tools) - {t["name"] for t in taken})
            if missing:
                log.warning(
                    "mcp server %s does not offer %s (in its tools list)",
                    self.name,
                    ", ".join(missing),
                )
        self.tools = taken

    def _stderr(self, line: str) -> None:
        if line:
            self._last_stderr = line
            log.info("mcp server %s: %s", self.name, line)


class Mounts:
    """The mounted MCP servers of the profile in force, and their tools as `NAME__TOOL`.

    Args:
        on_change: called (synchronously, on the event loop) whenever the
            offered tools may have changed: a server came up, went down,
            was added or removed.
        notice: one line for the person (a server died, came back, a tool
            was renamed).
    """

    def __init__(
        self,
        on_change: Callable[[], None] = lambda: None,
        notice: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.servers: dict[str, MountedServer] = {}
        self.on_change = on_change
        self.notice = notice
        self._nursery: trio.Nursery | None = None
        self._naming = names.Naming()
        self._reported: set[str] = set()

    def apply(self, configs: Mapping[str, McpServerConfig], cwd: Path) -> None:
        """Make the mounted servers those of `configs` (hot reload): start new ones,
        stop removed ones, restart those whose table (or folder) changed."""
        replaced: dict[str, MountedServer] = {}
        for name, server in list(self.servers.items()):
            if name not in configs or (server.config, server.cwd) != (configs[name], cwd):
                server.stop()
                replaced[name] = self.servers.pop(name)
        for name, config in configs.items():
            if name in self.servers:
                continue
            server = MountedServer(name, config, cwd, self._changed, lambda text: self.notice(text))
            if name in replaced:  # its tools stay offered while the new one starts
                server.tools = tuple(t for t in replaced[name].tools if config.takes(t["name"]))
                server.reason = "restarting after a profile change"
            self.servers[name] = server
            if self._nursery is not None:
                self._nursery.start_soon(self._supervise, server, replaced.get(name))
        self._changed()

    async def run(
        self,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,  # type: ignore[name-defined]  # stale trio-typing stubs (see pyproject)
    ) -> None:
        """Run the servers until cancelled (then every child is stopped)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for server in self.servers.values():
                nursery.start_soon(self._supervise, server)
            task_status.started()
            await trio.sleep_forever()

    def specs(self) -> list[dict[str, Any]]:
        """MCP specs of every mounted tool, named `NAME__TOOL` (`outputSchema` left out:
        results are passed on as text, so the node cannot promise their structure)."""
        return self._naming.specs()

    def has(self, name: str) -> bool:
        """True when `name` is a mounted tool offered now."""
        return self._naming.find(name) is not None

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run the mounted tool offered as `name`. Raises like `MountedServer.call`."""
        offered = self._naming.find(name)
        server = self.servers.get(offered.candidate.owner or "") if offered else None
        if offered is None or server is None:
            raise UnknownTool(f"unknown tool {name!r}")
        return await server.call(offered.candidate.tool, arguments)

    def lines(self) -> list[str]:
        """One line per server: name, state and tools, for a status display."""
        return [
            f"  {s.name:<12} {s.state:<11} {', '.join(t['name'] for t in s.tools) or '-'}"
            + (f"  ({s.reason})" if s.reason and s.state != "up" else "")
            for s in self.servers.values()
        ]

    async def _supervise(self, server: MountedServer, after: MountedServer | None = None) -> None:
        # A changed table's new process starts once the old one is stopped: never two
        # copies of one server at once (a lock file or a port would make the new one fail).
        try:
            with server.scope:
                if after is not None:
                    await after.ended.wait()
                await server.run()
        finally:
            server.ended.set()

    def _changed(self) -> None:
        candidates = [
            names.Candidate(
                "mcp",
                server.name,
                tool["name"],
                {k: v for k, v in tool.items() if k not in ("name", "outputSchema")},
            )
            for server in self.servers.values()
            for tool in server.tools
        ]
        self._naming = names.offer(candidates)
        for note in self._naming.notes:
            if note not in self._reported:
                self._reported.add(note)
                self.notice(note)
        self.on_change()


def _describe(exc: BaseException) -> str:
    """A failure in plain words: the one leaf of nested exception groups, with its type."""
    while len(members := tuple(getattr(exc, "exceptions", ()))) == 1:  # an exception group
        exc = members[0]
    if isinstance(exc, FileNotFoundError):
        return f"its command was not found ({exc.filename or exc})"
    if isinstance(exc, ToolError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
