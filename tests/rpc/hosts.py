"""In-test `ToolHost`s and a helper that drives one stream through an `RpcServer`."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
import trio.testing

from gbr_node.errors import InvalidArguments, SecurityViolation, ToolError, UnknownTool
from gbr_node.rpc.server import RpcServer, StreamServer

VECTORS = Path(__file__).resolve().parents[2] / "protocols" / "vectors"
HOST_SPEC: dict[str, Any] = json.loads((VECTORS / "host.json").read_text())
TRUSTED = HOST_SPEC["trusted_peer"]
UNTRUSTED = HOST_SPEC["untrusted_peer"]
VECTORS_1_1 = VECTORS.parent / "mcp-1.1.0-vectors"
HOST_1_1: dict[str, Any] = json.loads((VECTORS_1_1 / "host.json").read_text())


class VectorHost:
    """The reference host of protocols/vectors/host.json; records every call that ran."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.notifications: list[tuple[str, dict[str, Any]]] = []

    def authorize(self, peer_id: str) -> frozenset[str] | None:
        return frozenset(HOST_SPEC["granted"]) if peer_id == TRUSTED else None

    def list_tools(self, grant: frozenset[str]) -> list[dict[str, Any]]:
        return [tool for tool in HOST_SPEC["tools"] if tool["name"] in grant]

    async def call_tool(
        self, grant: frozenset[str], name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        if name not in grant:
            raise UnknownTool(f"unknown tool: {name}")
        self.calls.append((name, arguments))
        if name == "echo":
            if set(arguments) != {"text"} or not isinstance(arguments["text"], str):
                raise InvalidArguments("echo: 'text' (a string) is required, nothing else")
            return {"content": [{"type": "text", "text": arguments["text"]}], "isError": False}
        if name == "fail":
            raise ToolError("fail: this tool always fails")
        raise SecurityViolation("path escapes the allowed root", arguments.get("path"))

    async def notify(self, grant: frozenset[str], method: str, params: dict[str, Any]) -> None:
        self.notifications.append((method, params))


class PipelinedVectorHost(VectorHost):
    """The reference host of protocols/mcp-1.1.0-vectors/host.json: the 1.0.0 host plus
    `wait {seconds}`, which answers "waited" after that many seconds (trio's clock)."""

    def authorize(self, peer_id: str) -> frozenset[str] | None:
        return frozenset(HOST_1_1["granted"]) if peer_id == TRUSTED else None

    def list_tools(self, grant: frozenset[str]) -> list[dict[str, Any]]:
        tools = HOST_SPEC["tools"] + HOST_1_1["tools"]
        return [tool for tool in tools if tool["name"] in grant]

    async def call_tool(
        self, grant: frozenset[str], name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        if name != "wait" or name not in grant:
            return await super().call_tool(grant, name, arguments)
        self.calls.append((name, arguments))
        seconds = arguments.get("seconds")
        if set(arguments) != {"seconds"} or not isinstance(seconds, int | float) or seconds < 0:
            raise InvalidArguments("wait: 'seconds' (a number >= 0) is required, nothing else")
        await trio.sleep(seconds)
        return {"content": [{"type": "text", "text": "waited"}], "isError": False}


CallTool = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class ScriptedHost:
    """Trusts every peer; `call_tool` runs the coroutine function given by the test."""

    def __init__(self, call_tool: CallTool, tools: list[dict[str, Any]] | None = None) -> None:
        self._call_tool = call_tool
        self.tools = tools or []
        self.notifications: list[tuple[str, dict[str, Any]]] = []

    def authorize(self, peer_id: str) -> str:
        return peer_id

    def list_tools(self, grant: str) -> list[dict[str, Any]]:
        return self.tools

    async def call_tool(self, grant: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self._call_tool(name, arguments)

    async def notify(self, grant: str, method: str, params: dict[str, Any]) -> None:
        self.notifications.append((method, params))


async def exchange(
    server: StreamServer[Any], peer_id: str, data: bytes, *, timeout_s: float = 5
) -> bytes:
    """Send `data` on a fresh stream served by `server`; return all bytes until it closes."""
    client, served = trio.testing.memory_stream_pair()
    received = bytearray()
    with trio.fail_after(timeout_s):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.handle_stream, served, peer_id)
            await client.send_all(data)
            while chunk := await client.receive_some():
                received += chunk
    return bytes(received)


def open_served_stream(
    nursery: trio.Nursery, server: RpcServer, peer_id: str
) -> trio.StapledStream:
    """A fresh in-memory stream whose far end `server` serves as a stream from `peer_id`."""
    client, served = trio.testing.memory_stream_pair()
    nursery.start_soon(server.handle_stream, served, peer_id)
    return client
