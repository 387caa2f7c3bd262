"""`gbr-node mcp` as a real process, driven by the SDK's real stdio client (GBR-MCP-01):
both handshakes, local tools under the profile, approvals, list_changed, capped results,
and a stdout that carries nothing but JSON-RPC."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
import trio
from mcp.client.subscriptions import listen
from mcp.types import ToolListChangedNotification

from tests.e2e.conftest import gbr, node_env
from tests.e2e.mcp_helpers import (
    ERAS,
    MODERN_VERSION,
    WAIT_S,
    mcp_session,
    text_of,
    tool_names,
    write_mcp_profile,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    write_mcp_profile(root)
    (root / "README.md").write_text("hello from the project\n", encoding="utf-8")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_of_either_era_lists_and_calls_local_tools(project, era):
    async with mcp_session(project, era) as session:
        if era == "modern":
            assert session.protocol_version == MODERN_VERSION
        else:
            assert session.protocol_version != MODERN_VERSION and session.initialize_result
        names = await tool_names(session)
        assert {"read_file", "write_file", "list_dir", "approval_status"} <= set(names)
        assert "list_peers" not in names and "dial_peer" not in names
        result = await session.call_tool("read_file", {"path": "README.md"})
        assert not result.is_error and "hello from the project" in text_of(result)
        escape = await session.call_tool("read_file", {"path": "../../etc/passwd"})
        assert escape.is_error and "refused by the sandbox" in text_of(escape)
        bad = await session.call_tool("read_file", {"nope": 1})
        assert bad.is_error and "invalid arguments" in text_of(bad)


@pytest.mark.parametrize("era", ERAS)
async def test_a_protected_write_is_pending_and_approval_status_follows_it(project, era):
    async with mcp_session(project, era) as session:
        asked = await session.call_tool(
            "write_file", {"path": "pyproject.toml", "content": "[project]\nname = 'y'\n"}
        )
        structured = asked.structured_content
        assert not asked.is_error and structured["status"] == "pending_approval"
        number = structured["approval_id"]
        assert "name = 'x'" in (project / "pyproject.toml").read_text()
        waiting = await session.call_tool("approval_status", {"approval_id": number})
        assert waiting.structured_content["status"] == "pending"

        decided = gbr(project, "approvals", "approve", str(number))
        assert decided.returncode == 0, decided.stderr
        with trio.fail_after(WAIT_S):
            while (
                await session.call_tool("approval_status", {"approval_id": number})
            ).structured_content["status"] != "applied":
                await trio.sleep(0.2)
        assert "name = 'y'" in (project / "pyproject.toml").read_text()


async def test_a_modern_client_hears_list_changed_on_its_listen_stream(project):
    async with mcp_session(project, "modern") as session:
        assert "write_file" in await tool_names(session)
        async with listen(session, tools_list_changed=True) as subscription:
            write_mcp_profile(project, '[tools]\nenabled = ["read_file"]')
            with trio.fail_after(WAIT_S):
                event = await subscription.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
        # approval_status goes with the writing tools (issue 14)
        assert await tool_names(session) == ["read_file"]


async def test_a_legacy_client_hears_list_changed_on_its_connection(project):
    heard = trio.Event()

    async def on_message(message):
        if isinstance(getattr(message, "root", message), ToolListChangedNotification):
            heard.set()

    async with mcp_session(project, "legacy", message_handler=on_message) as session:
        caps = session.initialize_result.capabilities
        assert caps.tools is not None and caps.tools.list_changed
        assert "write_file" in await tool_names(session)
        write_mcp_profile(project, '[tools]\nenabled = ["read_file", "list_dir"]')
        with trio.fail_after(WAIT_S):
            await heard.wait()
        assert await tool_names(session) == ["read_file", "list_dir"]  # no writing tool


async def test_a_big_result_is_capped_with_a_note_on_paging(project):
    lines = "".join(f"{n:06d} " + "z" * 93 + "\n" for n in range(3000))  # 300,000 characters
    (project / "big.txt").write_text(lines, encoding="utf-8")
    async with mcp_session(project, "modern") as session:
        result = await session.call_tool("read_file", {"path": "big.txt", "limit": 3000})
        *body, note = [item.text for item in result.content]
        assert sum(len(text) for text in body) <= 20_000 * 4
        assert "result cut to about" in note and "offset" in note
    async with mcp_session(project, "modern", args=["--max-result-tokens", "500"]) as session:
        result = await session.call_tool("read_file", {"path": "big.txt", "limit": 3000})
        assert len(result.content[0].text) <= 2_000


def test_stdout_carries_only_json_rpc_and_logs_go_to_stderr_and_the_log(project, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "write_file",
                "arguments": {"path": "pyproject.toml", "content": "x"},
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "no_such_tool", "arguments": {}},
        },
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gbr_node", "mcp"],
        cwd=project,
        env=node_env(home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    replies, stderr_lines = [], []
    threading.Thread(target=lambda: stderr_lines.extend(proc.stderr), daemon=True).start()
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            if "id" in message:
                replies.append(json.loads(proc.stdout.readline()))  # a line is one JSON message
        deadline = time.monotonic() + 30  # the desk announces the approval within a poll
        while not any("approval #1 requested by the MCP client" in line for line in stderr_lines):
            assert time.monotonic() < deadline, stderr_lines
            time.sleep(0.05)
        proc.stdin.close()  # the client leaves
        rest = proc.stdout.read()
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr_lines
    replies += [json.loads(line) for line in rest.splitlines()]
    assert all(reply["jsonrpc"] == "2.0" for reply in replies)
    by_id = {reply["id"]: reply for reply in replies}
    assert set(by_id) == {1, 2, 3, 4}
    assert by_id[3]["result"]["structuredContent"]["status"] == "pending_approval"
    assert by_id[4]["error"]["code"] == -32602
    assert "gbr_node" in (project / ".gbr" / "node.log").read_text()


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_first_tools_list_already_holds_the_mounted_servers_tools(project, era):
    """issue 34: the first `tools/list` lacked the mounted tools, which came ~2 s later;
    it now waits (bounded) for the servers starting."""
    from tests.mcp.conftest import installed, toml_array

    time_server = toml_array([installed("mcp-server-time")])
    write_mcp_profile(project, f"[mcp_servers.time]\ncommand = {time_server}\n")
    async with mcp_session(project, era) as session:
        assert "time__get_current_time" in await tool_names(session)
