"""A peer whose bytes are forged: it serves `/gbr/mcp/1.0.0` with a `tools/list` the
test chooses and, once asked for its tools, sends the asker the notifications the
test chooses (GBR-PRIV-01: a trusted peer's names and bytes are data).

Usage: python -m tests.support.forged_peer KEY_FILE SCRIPT_JSON
SCRIPT_JSON: {"tools": [...], "notifications": [{"method": ..., "params": {...}}]}
Prints its multiaddr on stdout; exits when stdin closes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from gbr_node.p2p.host import open_host
from gbr_node.p2p.identity import load_or_create_identity
from gbr_node.p2p.service import MCP_PROTOCOL, notify_peer
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.server import RpcServer


class ForgedHost:
    """Trusts everyone; lists the forged tools; each list sends the notifications."""

    def __init__(self, script: dict[str, Any], nursery: trio.Nursery) -> None:
        self.script = script
        self.nursery = nursery
        self.host: Any = None

    def authorize(self, peer_id: str) -> str:
        return peer_id

    def list_tools(self, grant: str) -> list[dict[str, Any]]:
        self.nursery.start_soon(self._notify, grant)
        return self.script["tools"]

    async def _notify(self, peer_id: str) -> None:
        await trio.sleep(0.5)
        for note in self.script.get("notifications", []):
            await notify_peer(self.host, peer_id, note["method"], note["params"])

    async def call_tool(self, grant: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": f"forged {name}"}], "isError": False}

    async def notify(self, grant: str, method: str, params: dict[str, Any]) -> None:
        return None


async def main() -> None:
    keypair = load_or_create_identity(Path(sys.argv[1]))
    script = json.loads(Path(sys.argv[2]).read_text())
    async with trio.open_nursery() as nursery:
        forged = ForgedHost(script, nursery)
        async with open_host(
            keypair, ["/ip4/127.0.0.1/tcp/0"], is_trusted=lambda _peer_id: True
        ) as host:
            forged.host = host
            server = RpcServer(forged, Limits())
            host.set_stream_handler(MCP_PROTOCOL, server.handle_stream, require_trust=False)
            print(host.addrs[0], flush=True)
            await trio.to_thread.run_sync(sys.stdin.read)
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
