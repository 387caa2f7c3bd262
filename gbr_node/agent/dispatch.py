"""Tool dispatch for the agent: routes one tool call to the local registry or a peer.

Every call ends in exactly one `ToolExecutionFeedback` sent to the agent's
inbox, whatever happens (ADR-0012b): a local tool runs in a worker thread, a
mounted MCP server's (`NAME__TOOL`) on its connection; a peer's (`ALIAS__TOOL`)
goes to the `RemoteTools` the node provides. The agent itself never awaits a tool.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

import trio

from gbr_node.agent.messages import REMOTE_SEPARATOR, ToolExecutionFeedback
from gbr_node.errors import GbrError
from gbr_node.llm.events import ToolCall
from gbr_node.tools.base import ToolResult

log = logging.getLogger("gbr_node.agent")


class LocalTools(Protocol):
    """What the dispatcher needs of the node's own tools (`mcp.toolset.NodeTools`)."""

    def specs(self) -> list[dict[str, Any]]: ...

    def has(self, name: str) -> bool: ...

    async def run(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run a tool; returns a `tools.base.ToolResult` (its `to_mcp()` is what is sent)."""
        ...


class RemoteTools(Protocol):
    """Tools of trusted peers, as the node's P2P side offers them (`p2p.remote.PeerDirectory`).

    `specs()` gives MCP tool specs (peers' tools named `ALIAS__TOOL`);
    `handles(name)` says which names are its; `call` returns the MCP result
    dict or raises a `GbrError` (unreachable, refused, timed out, ...).
    """

    def specs(self) -> list[dict[str, Any]]: ...

    def handles(self, name: str) -> bool: ...

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]: ...


def chat_tool(spec: dict[str, Any]) -> dict[str, Any]:
    """An MCP tool spec as a chat-completions `tools` entry."""
    return {
        "type": "function",
        "function": {
            "name": spec["name"],
            "description": spec.get("description", ""),
            "parameters": spec.get("inputSchema") or {"type": "object", "properties": {}},
        },
    }


class Dispatcher:
    """Runs tool calls and reports each outcome as a `ToolExecutionFeedback`.

    Args:
        local: returns the current registry snapshot (it changes on hot reload;
            a call keeps the snapshot it started with).
        remote: the P2P side, or None on a node without peers (may be set
            later, once the host runs).
    """

    def __init__(self, local: Callable[[], LocalTools], remote: RemoteTools | None = None):
        self._local = local
        self.remote = remote

    def chat_tools(self) -> list[dict[str, Any]]:
        """Every tool the model may call, as chat-completions `tools` entries."""
        specs = list(self._local().specs())
        if self.remote is not None:
            specs += self.remote.specs()
        return [chat_tool(s) for s in specs]

    async def run(
        self, prompt_id: int, call: ToolCall, send: trio.MemorySendChannel[object]
    ) -> None:
        """Run `call` and send its feedback tagged with `prompt_id`.

        Never raises (except trio.Cancelled): every failure becomes feedback
        with `error` set.
        """
        started = time.monotonic()
        peer = None
        result: dict[str, Any] | None = None
        error: str | None = None
        local = self._local()
        try:
            remote = self.remote
            if remote is not None and not local.has(call.name) and remote.handles(call.name):
                if REMOTE_SEPARATOR in call.name:
                    peer = call.name.partition(REMOTE_SEPARATOR)[0]
                result = await remote.call(call.name, call.arguments)
            else:
                result = (await local.run(call.name, call.arguments)).to_mcp()
        except GbrError as exc:
            error = str(exc)
        except Exception as exc:  # a bug in a tool must not take the node down
            log.exception("tool %s failed unexpectedly", call.name)
            error = f"internal error in {call.name}: {type(exc).__name__}: {exc}"
        feedback = ToolExecutionFeedback(
            prompt_id,
            call.id,
            call.name,
            result=result,
            error=error,
            peer=peer,
            elapsed_s=time.monotonic() - started,
        )
        await send.send(feedback)
