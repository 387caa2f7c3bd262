"""No MCP client and no peer can undo (GBR-UNDO-01): over the real `gbr-node mcp` and a
real `gbr-node serve` granting every tool, nothing offered is named like undo or
checkpoint, and a peer's call of such a name is an unknown tool."""

from __future__ import annotations

import json

import pytest
from mcp.shared.exceptions import MCPError

from tests.checkpoints.test_person_only import UNDOING
from tests.e2e.mcp_helpers import mcp_session, tool_names, write_mcp_profile
from tests.e2e.p2p_helpers import Identity, ServeProcess, gbr_call, write_serving_profile

pytestmark = pytest.mark.slow


async def test_tools_list_over_mcp_offers_no_undo(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    write_mcp_profile(project)
    async with mcp_session(project, "modern") as session:
        names = await tool_names(session)
        assert "write_file" in names
        assert not [n for n in names if UNDOING.search(n)], names
        for name in ("undo", "checkpoints", "take_back"):
            with pytest.raises(MCPError, match="Unknown tool"):
                await session.call_tool(name, {})


def test_a_peer_granted_every_tool_is_offered_no_undo(tmp_path):
    alice, bob = Identity(tmp_path / "alice.key"), Identity(tmp_path / "bob.key")
    served = tmp_path / "alice"
    served.mkdir()
    write_serving_profile(served, {"bob": (bob.peer_id, "*")})
    server = ServeProcess(served, tmp_path / "home", alice)
    try:
        listed = gbr_call(tmp_path, tmp_path / "bobhome", bob, server.addr, "--list")
        assert listed.returncode == 0 and "write_file" in listed.stdout, listed.stderr
        assert not UNDOING.search(listed.stdout), listed.stdout
        tried = gbr_call(tmp_path, tmp_path / "bobhome", bob, server.addr, "undo", json.dumps({}))
        assert tried.returncode != 0 and "undo" in tried.stderr + tried.stdout
    finally:
        server.kill()
