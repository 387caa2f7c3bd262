"""Real third-party MCP servers from PyPI mounted through the profile (GBR-MCP-01):
mcp-server-git served to a trusted peer through `gbr-node call`, mcp-server-time called
by the agent of `gbr-node run` (scripted model), and a crashing server restarted by serve."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from tests.e2e.conftest import write_profile
from tests.e2e.p2p_helpers import Identity, ServeProcess, gbr_call, write_serving_profile
from tests.mcp.conftest import alive, installed, support_server_argv, toml_array
from tests.support.replies import text_reply, tool_call_reply

pytestmark = pytest.mark.slow
WAIT_S = 30


def git_repo(path):
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(path.parent)}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return path


def gone(pid, timeout_s=WAIT_S):
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class Bob:
    """A `gbr-node serve` ("bob") mounting servers, and the identity that calls it ("alice")."""

    def __init__(self, tmp_path, tools, mounts):
        self.tmp = tmp_path
        self.alice = Identity(tmp_path / "alice.key")
        self.root = tmp_path / "bob"
        self.root.mkdir(exist_ok=True)
        extra = "".join(
            f"[mcp_servers.{name}]\ncommand = {toml_array(argv)}\n" for name, argv in mounts.items()
        )
        write_serving_profile(self.root, {"alice": (self.alice.peer_id, tools)}, extra=extra)
        self.server = ServeProcess(self.root, tmp_path / "bob-home", Identity(tmp_path / "bob.key"))

    def call(self, *args):
        return gbr_call(self.tmp, self.tmp / "alice-home", self.alice, self.server.addr, *args)

    def wait_listed(self, tool):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            listed = self.call("--list")
            if tool in listed.stdout:
                return listed.stdout
            time.sleep(0.3)
        raise AssertionError(f"{tool} never listed: {listed.stdout} {listed.stderr}")

    def wait_logged(self, pattern):
        """Wait for a line of bob's .gbr/node.log matching `pattern` (a state, not a time)."""
        log = self.root / ".gbr" / "node.log"
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if log.exists() and re.search(pattern, log.read_text(encoding="utf-8"), re.M):
                return
            time.sleep(0.1)
        raise AssertionError(f"bob's node.log never said {pattern!r}")


@pytest.fixture
def bob_factory(tmp_path):
    made = []

    def make(tools, mounts):
        made.append(Bob(tmp_path, tools, mounts))
        return made[-1]

    yield make
    for bob in made:
        bob.server.kill()


def test_a_trusted_peer_calls_the_mounted_git_servers_status_through_gbr_node_call(
    tmp_path, bob_factory
):
    repo = git_repo(tmp_path / "bob" / "repo")
    (repo / "new.txt").write_text("untracked\n", encoding="utf-8")
    git = [installed("mcp-server-git"), "--repository", str(repo)]
    bob = bob_factory(["read_file", "git__git_status"], {"git": git})
    listed = bob.wait_listed("git__git_status")
    assert "git__git_log" not in listed  # only what the grant names
    done = bob.call("git__git_status", f'{{"repo_path": "{repo}"}}')
    assert done.returncode == 0, done.stderr
    assert "Repository status" in done.stdout and "new.txt" in done.stdout
    bob.server.wait_line(r"^alice git__git_status ok \d+ ms")
    not_granted = bob.call("git__git_log", f'{{"repo_path": "{repo}"}}')
    assert not_granted.returncode == 1 and "unknown tool" in not_granted.stderr


@pytest.mark.parametrize(
    ("tools", "offered"), [("*", False), (["*", "mcp_servers"], True), (["mcp_servers"], True)]
)
def test_star_alone_never_grants_a_mounted_servers_tools(tmp_path, bob_factory, tools, offered):
    bob = bob_factory(tools, {"time": [installed("mcp-server-time")]})
    bob.server.wait_line(r"^trusted peers:")
    if offered:
        bob.wait_listed("time__get_current_time")
        done = bob.call("time__get_current_time", '{"timezone": "UTC"}')
        assert done.returncode == 0 and "UTC" in done.stdout, done.stderr
    else:
        bob.wait_logged(r"mcp server time up ")  # mounted: its tools would be listed now
        listed = bob.call("--list")
        assert "read_file" in listed.stdout and "time__" not in listed.stdout
        refused = bob.call("time__get_current_time", '{"timezone": "UTC"}')
        assert refused.returncode == 1 and "unknown tool" in refused.stderr


def test_a_server_added_to_the_profile_while_serve_runs_is_mounted(tmp_path, bob_factory):
    bob = bob_factory(["mcp_servers"], {})
    time_server = toml_array([installed("mcp-server-time")])
    write_serving_profile(
        bob.root,
        {"alice": (bob.alice.peer_id, ["mcp_servers"])},
        extra=f"[mcp_servers.time]\ncommand = {time_server}\n",
    )
    bob.server.wait_line(r"profile default reloaded: .*mcp_servers", WAIT_S)
    bob.wait_listed("time__get_current_time")
    write_serving_profile(bob.root, {"alice": (bob.alice.peer_id, ["mcp_servers"])})
    deadline = time.monotonic() + WAIT_S
    while "time__" in bob.call("--list").stdout:
        assert time.monotonic() < deadline, "the removed server's tools are still offered"
        time.sleep(0.3)


def test_serve_restarts_a_crashed_server_reports_it_and_stops_its_children(tmp_path, bob_factory):
    marks = tmp_path / "marks"
    bob = bob_factory(["mcp_servers"], {"t": support_server_argv(marks)})
    bob.wait_listed("t__crash")
    first = int((marks / "pid").read_text())
    crashed = bob.call("t__crash")
    assert crashed.returncode == 1
    bob.server.wait_line(r"mcp server t stopped: .*crashing on purpose.*; restarting it", WAIT_S)
    bob.server.wait_line(r"mcp server t is back", WAIT_S)
    assert sum("mcp server t stopped" in line for line in bob.server.lines) == 1
    assert bob.call("t__echo", '{"text": "hi"}').stdout.strip() == "hi"
    second = int((marks / "pid").read_text())
    assert second != first
    log = (bob.root / ".gbr" / "node.log").read_text()
    assert "mcp server t: crashing on purpose" in log  # its stderr, drained into the log
    bob.server.stop()  # SIGTERM
    assert gone(second), "the mounted server outlived serve"


def test_a_mounted_server_ends_when_serve_is_killed(tmp_path, bob_factory):
    marks = tmp_path / "marks"
    bob = bob_factory(["mcp_servers"], {"t": support_server_argv(marks)})
    bob.wait_listed("t__echo")
    pid = int((marks / "pid").read_text())
    bob.server.proc.send_signal(signal.SIGKILL)
    bob.server.proc.wait(timeout=10)
    assert gone(pid), "the mounted server outlived a killed serve (its stdin closed)"


def test_the_agent_calls_the_mounted_time_server(project, model_server, run_node):
    write_profile(
        project,
        model_server.base_url,
        extra=f"[mcp_servers.time]\ncommand = {toml_array([installed('mcp-server-time')])}\n",
    )
    model_server.enqueue(
        tool_call_reply("time__get_current_time", {"timezone": "UTC"}),
        text_reply("It is the time it is."),
    )
    term = run_node("--listen", "/ip4/127.0.0.1/tcp/0")
    deadline = time.monotonic() + WAIT_S
    while True:
        term.sendline("/tools")
        try:
            term.expect_new("time__get_current_time", timeout_s=2)
            break
        except AssertionError:
            assert time.monotonic() < deadline, "the mounted tools never appeared in /tools"
    term.sendline("what time is it in UTC?")
    term.expect_new(r"✓ time__get_current_time timezone=UTC \d+ ms")
    term.expect_new("It is the time it is.")
    first, second = model_server.chat_bodies
    assert "time__get_current_time" in {t["function"]["name"] for t in first["tools"]}
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and '"timezone": "UTC"' in tool_message["content"]


def test_gbr_node_tool_reaches_a_mounted_servers_tool(tmp_path):
    """issue 34: `gbr-node tool time__get_current_time` was "no tool named"; it now starts
    the profile's mounted server, calls the tool and stops it."""
    from tests.e2e.conftest import gbr

    project = tmp_path / "project"
    project.mkdir()
    time_server = toml_array([installed("mcp-server-time")])
    write_profile(
        project, "http://127.0.0.1:9/v1", extra=f"[mcp_servers.time]\ncommand = {time_server}\n"
    )
    done = gbr(project, "tool", "time__get_current_time", '{"timezone": "UTC"}')
    assert done.returncode == 0, done.stderr
    assert "UTC" in done.stdout
    missing = gbr(project, "tool", "time__no_such_tool", "{}")
    assert missing.returncode == 2 and "unknown tool" in missing.stderr


def test_gbr_node_tool_list_groups_every_tool_the_agent_has(tmp_path):
    """issue 34: `gbr-node tool --list` shows the local file and command tools, the
    library tools and each mounted server's NAME__TOOL tools, names aligned; a server
    that does not come up and the tools the profile does not grant are named."""
    from tests.e2e.conftest import gbr

    project = tmp_path / "project"
    project.mkdir()
    time_server = toml_array([installed("mcp-server-time")])
    enabled = '"read_file", "run_command", "search_library", "read_library"'
    write_profile(
        project,
        "http://127.0.0.1:9/v1",
        extra=f"[tools]\nenabled = [{enabled}]\n\n"
        f"[mcp_servers.time]\ncommand = {time_server}\n\n"
        '[mcp_servers.broken]\ncommand = ["/bin/false"]\n',
    )
    out = gbr(project, "tool", "--list")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    titles = [line for line in lines if not line.startswith(" ")]
    assert titles[:3] == [
        "local file and command tools:",
        "library tools:",
        "mounted MCP server time:",
    ]
    assert titles[3].startswith("mounted MCP server broken: not running (")
    assert "not granted by the profile's [tools] enabled: write_file, edit_file" in titles[4]
    tools = [line.split()[0] for line in lines if line.startswith("  ")]
    assert tools[:2] == ["read_file", "run_command"] and "write_file" not in tools
    assert {"search_library", "read_library", "time__get_current_time"} <= set(tools)
    columns = {
        line.index(line.split()[1], len(line.split()[0]) + 2)
        for line in lines
        if line.startswith("  ")
    }
    assert len(columns) == 1  # every description starts in one column
