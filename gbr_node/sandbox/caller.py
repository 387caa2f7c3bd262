"""Who the tool call being run is for: the one fact the sandbox needs beyond the path.

`CALLER` holds ("local", None) for this node's own agent, ("cli", None) for
the person's `gbr-node tool` command, (peer ID, alias) when the RPC host runs a tool for a peer, and
("mcp", client name or None) when `gbr-node mcp` runs one for an MCP client.
Set by whoever runs the tool, in that task's context only; trio carries it
into the worker thread. The sandbox reads it to keep the profiles from
remote callers (GBR-PRIV-01); approvals record it as the requester.
"""

from __future__ import annotations

import contextvars

LOCAL = "local"
CLI = "cli"
MCP = "mcp"

CALLER: contextvars.ContextVar[tuple[str, str | None]] = contextvars.ContextVar(
    "gbr_caller", default=(LOCAL, None)
)


def caller_is_remote() -> bool:
    """True when the call being run is for a peer or an MCP client, not this node's
    agent or the person's own command."""
    return CALLER.get()[0] not in (LOCAL, CLI)
