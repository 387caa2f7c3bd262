"""Mounted MCP servers as owned, supervised children (GBR-MCP-01), in-process with real servers:
the third-party mcp-server-time from PyPI and tests/support/mcp_server.py (SDK-built)."""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

import pytest
import trio

from gbr_node.config.profile import McpServerConfig
from gbr_node.errors import CallTimeout, ToolError, UnknownTool
from gbr_node.mcp.mounts import Mounts
from tests.mcp.conftest import alive, installed, support_server_argv

WAIT_S = 30


class Running:
    """`Mounts` running in a nursery, with the notices and changes it reported."""

    def __init__(self) -> None:
        self.notices: list[str] = []
        self.changes = 0
        self.mounts = Mounts(self._changed, self.notices.append)

    def _changed(self) -> None:
        self.changes += 1

    async def wait_for(self, name: str) -> None:
        with trio.fail_after(WAIT_S):
            while not self.mounts.has(name) or self._server_of(name).state != "up":
                await trio.sleep(0.05)

    async def wait_notice(self, words: str, count: int = 1) -> None:
        with trio.fail_after(WAIT_S):
            while sum(words in n for n in self.notices) < count:
                await trio.sleep(0.05)

    def _server_of(self, tool: str):
        return self.mounts.servers[tool.partition("__")[0]]


async def start(nursery: trio.Nursery, configs: dict[str, McpServerConfig], cwd: Path) -> Running:
    running = Running()
    running.mounts.apply(configs, cwd)
    await nursery.start(running.mounts.run)
    return running


async def test_a_third_party_server_is_mounted_and_its_tools_called_as_name__tool(tmp_path):
    config = McpServerConfig(command=(installed("mcp-server-time"),))
    async with trio.open_nursery() as nursery:
        running = await start(nursery, {"time": config}, tmp_path)
        await running.wait_for("time__get_current_time")
        names = [spec["name"] for spec in running.mounts.specs()]
        assert names == ["time__get_current_time", "time__convert_time"]
        assert all("outputSchema" not in spec for spec in running.mounts.specs())
        result = await running.mounts.call("time__get_current_time", {"timezone": "UTC"})
        assert not result.is_error and '"timezone": "UTC"' in result.content[0]["text"]
        with pytest.raises(UnknownTool):
            await running.mounts.call("time__no_such_tool", {})
        nursery.cancel_scope.cancel()


async def test_only_the_tools_the_table_takes_are_offered(tmp_path):
    config = McpServerConfig(command=(installed("mcp-server-time"),), tools=("convert_time",))
    async with trio.open_nursery() as nursery:
        running = await start(nursery, {"time": config}, tmp_path)
        await running.wait_for("time__convert_time")
        assert [s["name"] for s in running.mounts.specs()] == ["time__convert_time"]
        with pytest.raises(UnknownTool):
            await running.mounts.call("time__get_current_time", {"timezone": "UTC"})
        nursery.cancel_scope.cancel()


async def test_a_crashed_server_is_restarted_and_reported_once(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="gbr_node.mcp")
    marks = tmp_path / "marks"
    config = McpServerConfig(command=support_server_argv(marks))
    async with trio.open_nursery() as nursery:
        running = await start(nursery, {"t": config}, tmp_path)
        await running.wait_for("t__crash")
        first_pid = int((marks / "pid").read_text())
        with pytest.raises(ToolError, match="MCP server t stopped"):
            await running.mounts.call("t__crash", {})
        await running.wait_notice("mcp server t stopped")
        assert "crashing on purpose" in running.notices[0]  # its last stderr line
        await running.wait_notice("mcp server t is back")
        await running.wait_for("t__echo")
        assert int((marks / "pid").read_text()) != first_pid
        echoed = await running.mounts.call("t__echo", {"text": "again"})
        assert echoed.content[0]["text"] == "again"
        stopped = [n for n in running.notices if "stopped" in n]
        assert len(stopped) == 1, running.notices
        nursery.cancel_scope.cancel()
    assert any("mcp server t: crashing on purpose" in r.getMessage() for r in caplog.records)


async def test_a_server_that_cannot_start_is_reported_once_and_retried(tmp_path):
    config = McpServerConfig(command=(str(tmp_path / "no-such-server"),))
    async with trio.open_nursery() as nursery:
        running = await start(nursery, {"ghost": config}, tmp_path)
        await running.wait_notice("mcp server ghost stopped")
        await trio.sleep(2.0)  # backoff 0.5 + 1 s: at least two more attempts
        assert len(running.notices) == 1 and "not found" in running.notices[0]
        assert running.mounts.servers["ghost"].state == "restarting"
        nursery.cancel_scope.cancel()


async def test_hot_reload_restarts_a_changed_table_and_stops_a_removed_one(tmp_path):
    marks_a, marks_b = tmp_path / "a", tmp_path / "b"
    first = McpServerConfig(command=support_server_argv(marks_a), env={"TAG": "one"})
    async with trio.open_nursery() as nursery:
        running = await start(nursery, {"a": first}, tmp_path)
        await running.wait_for("a__env")
        assert (await running.mounts.call("a__env", {"name": "TAG"})).content[0]["text"] == "one"
        old_pid = int((marks_a / "pid").read_text())

        changed = McpServerConfig(command=support_server_argv(marks_a), env={"TAG": "two"})
        added = McpServerConfig(command=support_server_argv(marks_b))
        running.mounts.apply({"a": changed, "b": added}, tmp_path)
        await running.wait_for("b__echo")
        assert running.mounts.has("a__env")  # still offered while it restarts
        with trio.fail_after(WAIT_S):
            while True:
                try:
                    tag = await running.mounts.call("a__env", {"name": "TAG"})
                except ToolError as exc:  # the new process is not up yet
                    assert "being restarted" in str(exc)
                    await trio.sleep(0.1)
                    continue
                if tag.content[0]["text"] == "two":
                    break
        assert not alive(old_pid)

        b_pid = int((marks_b / "pid").read_text())
        running.mounts.apply({"a": changed}, tmp_path)
        assert not running.mounts.has("b__echo")
        with trio.fail_after(WAIT_S):
            while alive(b_pid):
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()


async def test_servers_are_stopped_with_the_node(tmp_path):
    marks = tmp_path / "marks"
    config = McpServerConfig(command=support_server_argv(marks))
    async with trio.open_nursery() as nursery:
        running = await start(nursery, {"t": config}, tmp_path)
        await running.wait_for("t__echo")
        pid = int((marks / "pid").read_text())
        nursery.cancel_scope.cancel()
    assert not alive(pid)


async def test_a_cancelled_call_is_cancelled_on_the_server(tmp_path):
    marks = tmp_path / "marks"
    config = McpServerConfig(command=support_server_argv(marks))
    async with trio.open_nursery() as nursery:
        running = await start(nursery, {"t": config}, tmp_path)
        await running.wait_for("t__wait")
        with trio.move_on_after(0.5):
            await running.mounts.call("t__wait", {"seconds": 30})
        cancelled_at = time.time()
        with trio.fail_after(5):
            while not (marks / "cancelled").exists():
                await trio.sleep(0.01)
        assert float((marks / "cancelled").read_text()) - cancelled_at < 1.0
        nursery.cancel_scope.cancel()


async def test_a_call_past_timeout_s_is_a_timeout(tmp_path):
    config = McpServerConfig(command=support_server_argv(tmp_path / "m"), timeout_s=0.5)
    async with trio.open_nursery() as nursery:
        running = await start(nursery, {"t": config}, tmp_path)
        await running.wait_for("t__wait")
        with pytest.raises(CallTimeout, match="within 0.5 s"):
            await running.mounts.call("t__wait", {"seconds": 10})
        nursery.cancel_scope.cancel()


async def test_a_streamable_http_server_on_loopback_is_mounted_by_url(tmp_path):
    marks = tmp_path / "marks"
    proc = subprocess.Popen(
        [*support_server_argv(marks, "--http")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while not (marks / "url").exists() and time.monotonic() < deadline:
            await trio.sleep(0.05)
        url = (marks / "url").read_text()
        async with trio.open_nursery() as nursery:
            running = await start(nursery, {"web": McpServerConfig(url=url)}, tmp_path)
            await running.wait_for("web__echo")
            result = await running.mounts.call("web__echo", {"text": "over http"})
            assert result.content[0]["text"] == "over http"
            nursery.cancel_scope.cancel()
    finally:
        proc.kill()
        proc.wait(timeout=10)
