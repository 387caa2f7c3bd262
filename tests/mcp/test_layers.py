"""What the MCP package loads (STYLE.md "Pure cores"; GBR-MCP-01: the SDK costs ~20 MB, so a
node that mounts nothing and runs no `gbr-node mcp` never imports it)."""

from __future__ import annotations

import subprocess
import sys

FOREIGN = ("mcp", "mcp_types", "trio", "anyio", "libp2p", "httpx")


def loaded(*modules: str) -> set[str]:
    code = (
        f"import sys; import {', '.join(modules)}; "
        f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split()) & set(FOREIGN)


def test_naming_and_results_are_pure():
    assert loaded("gbr_node.mcp.names", "gbr_node.mcp.results") == set()


def test_the_node_loads_the_sdk_only_when_mcp_is_used():
    assert "mcp" not in loaded("gbr_node.node", "gbr_node.mcp.mounts", "gbr_node.mcp.toolset")
    assert "mcp" in loaded("gbr_node.mcp.client")
