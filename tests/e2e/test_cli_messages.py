"""Messages a new user meets on the command line, each as it should read (issue 14).

Every test runs the real `gbr-node` in a fresh folder, as the README's first
command leaves a person: `gbr-node init` done, nothing else.
"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from gbr_node.config.profile import ALL_LOCAL_TOOLS
from tests.e2e.conftest import gbr, node_env, spawn_node, write_profile
from tests.e2e.terminal import Terminal

ROOT = Path(__file__).resolve().parents[2]


def subcommands() -> list[list[str]]:
    from gbr_node.cli import build_parser

    found = []

    def walk(parser, path):
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for name, child in action.choices.items():
                    found.append([*path, name])
                    walk(child, [*path, name])

    walk(build_parser(), [])
    return found


@pytest.mark.parametrize("command", subcommands(), ids=" ".join)
def test_every_command_s_help_has_a_description_and_an_example(fresh, command):
    out = gbr(fresh, *command, "--help")
    assert out.returncode == 0, out.stderr
    usage, _, rest = out.stdout.partition("\n\n")
    description = rest.split("\n\n", 1)[0]
    assert description.strip() and not description.startswith(("positional", "options")), rest
    assert re.search(r"^examples?:\n  .*gbr-node ", out.stdout, re.M), out.stdout


def test_global_options_work_after_the_command_too(fresh):
    (fresh / ".gbr_envs" / "reviewer.toml").write_text('system_prompt = "review only"\n')
    after = gbr(fresh, "env", "check", "--env", "reviewer")
    assert after.returncode == 0, after.stderr
    assert "review only" in after.stdout and "'reviewer' is valid" in after.stderr
    key = fresh.parent / "other.key"
    before = gbr(fresh, "--identity", str(key), "id")
    later = gbr(fresh, "id", "--identity", str(key))
    assert before.stdout.split()[0] == later.stdout.split()[0]
    elsewhere = gbr(fresh.parent, "env", "list", "--project", str(fresh))
    assert elsewhere.stdout.split() == ["default", "reviewer"]


def test_tool_help_lists_every_tool_with_its_arguments(fresh):
    out = gbr(fresh, "tool", "--help")
    assert out.returncode == 0
    listed = re.findall(r"^  (\w+) +\S.*\n +arguments: (.*)$", out.stdout, re.M)
    names = [name for name, _ in listed]
    # the library tools need the node's library index (run, serve): `tool` has none
    runnable = [name for name in ALL_LOCAL_TOOLS if name not in ("search_library", "read_library")]
    assert names == [*runnable, "approval_status"]
    assert dict(listed)["read_file"] == "path, offset?, limit?"


def test_gbr_local_model_0_says_the_same_in_model_and_run(tmp_path):
    project = tmp_path / "bare"
    (project / ".gbr_envs").mkdir(parents=True)
    (project / ".gbr_envs" / "default.toml").write_text('system_prompt = "x"\n')
    env = node_env(tmp_path / "home") | {"GBR_LOCAL_MODEL": "0"}
    (tmp_path / "home").mkdir()
    model = subprocess.run(
        [sys.executable, "-m", "gbr_node", "model"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert model.stdout.startswith("none: ")
    assert "GBR_LOCAL_MODEL=0 keeps the embedded model off" in model.stdout
    assert "not installed" not in model.stdout
    term = Terminal(spawn_node(project, "run", env={"GBR_LOCAL_MODEL": "0"}))
    try:
        term.expect("/help for commands")
        banner = term.transcript()
        assert "GBR_LOCAL_MODEL=0 keeps the embedded model off" in banner
        assert "not installed" not in banner
        exports = re.findall(r"^ *(export .*)$", banner, re.M)
        assert len(exports) == 3
        for line in exports:  # each pasteable on its own: one complete command
            assert re.fullmatch(r"export [A-Z_]+=\S+", line), line
            assert shlex.split(line)[0] == "export"
    finally:
        term.child.terminate(force=True)


def test_invalid_tool_arguments_read_once_at_char(fresh):
    from gbr_node.llm.events import parse_arguments

    with pytest.raises(ValueError) as caught:
        parse_arguments('{"path": "unterminated')
    assert "at at" not in str(caught.value)
    assert "Unterminated string starting at: line 1 column 10 (char 9)" in str(caught.value)


def test_rejecting_a_rejected_approval_says_it_already_is(fresh):
    (fresh / "pyproject.toml").write_text("[project]\n")
    gbr(fresh, "tool", "write_file", '{"path": "pyproject.toml", "content": "x"}')
    assert gbr(fresh, "approvals", "reject", "1", "--reason", "no").returncode == 0
    again = gbr(fresh, "approvals", "reject", "1")
    assert again.stdout.strip() == "approval #1 already rejected: no"
    assert "cannot record" not in again.stdout


def test_a_call_target_that_is_no_peer_names_the_aliases_not_a_multihash(fresh):
    out = gbr(fresh, "call", "nobody", "read_file")
    assert out.returncode == 2
    assert "'nobody' is not an alias of profile default" in out.stderr
    assert "multihash" not in out.stderr.lower()


def test_a_missing_profile_names_its_path_once(fresh):
    out = gbr(fresh, "--env", "nope", "env", "check")
    assert out.returncode == 1
    assert out.stderr.count("nope.toml") == 1, out.stderr
    assert "available profiles: default" in out.stderr


def test_a_port_in_use_hints_at_listen(fresh, model_server):
    write_profile(fresh, model_server.base_url)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = gbr(fresh, "serve", "--listen", f"/ip4/127.0.0.1/tcp/{port}")
        assert out.returncode == 1
        assert "Address already in use" in out.stderr and "--listen" in out.stderr
        term = Terminal(spawn_node(fresh, "run", "--listen", f"/ip4/127.0.0.1/tcp/{port}"))
        try:
            term.expect("/help for commands")
            assert re.search(r"not listening for peers.*Address already in use", term.transcript())
            assert "--listen /ip4/127.0.0.1/tcp/PORT" in term.transcript()
        finally:
            term.child.terminate(force=True)


def test_the_banner_counts_the_tools_it_has_and_says_which_peers_come_later(fresh, model_server):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    peer = (
        "[peers.bob]\n"
        'peer_id = "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"\n'
        f'addrs = ["/ip4/127.0.0.1/tcp/{port}"]\n'
    )
    write_profile(fresh, model_server.base_url, extra=peer)
    term = Terminal(spawn_node(fresh, "run"))
    try:
        term.expect(r"\d+ tools \(more from bob as they connect\) · /help for commands")
        term.expect(r"peer bob not reached: ")
    finally:
        term.child.terminate(force=True)


def test_the_init_template_counts_the_folders_it_lists(fresh):
    text = (fresh / ".gbr_envs" / "default.toml").read_text()
    assert ".gbr_envs/, .git/ and .gbr/" in text
    assert "nothing beyond those three" in text and "those two" not in text


def test_tools_enabled_empty_leaves_the_model_no_tool_of_this_node(fresh, model_server):
    from tests.support.replies import text_reply

    write_profile(fresh, model_server.base_url, extra="[tools]\nenabled = []\n")
    model_server.enqueue(text_reply("no tools"))
    term = Terminal(spawn_node(fresh, "run"))
    try:
        term.expect("/help for commands")
        term.sendline("hi")
        term.expect("no tools")
        (body,) = model_server.chat_bodies
        offered = {tool["function"]["name"] for tool in body.get("tools", [])}
        assert offered <= {"list_peers", "dial_peer", "send_message"}, offered  # reach peers
    finally:
        term.child.terminate(force=True)
    guide = (ROOT / "docs" / "guide" / "profiles.md").read_text()  # README's section moved there
    assert "`[tools] enabled = []` turns off every tool of this node" in guide


def test_the_readme_examples_work_where_its_first_command_leaves_you(fresh):
    readme = (ROOT / "README.md").read_text()
    first = re.search(r"```sh\n(.*)\n```", readme).group(1)
    assert first.endswith("cd ~/gbr-demo && gbr-node init && gbr-node run")
    commands = [" ".join(c.split()) for c in re.findall(r"`((?:echo|gbr-node) [^`]*)`", readme)]
    offline = r"(echo |gbr-node (tool|env|id|model|approvals list))"
    placeholder = r"\b[A-Z]{2,}\b|\||\.\.\.$"  # NAME, PEER, `a | b`, ...
    runnable = [c for c in commands if re.match(offline, c) and not re.search(placeholder, c)]
    assert any(c.startswith("gbr-node tool read_file") for c in runnable)
    for command in runnable:
        out = subprocess.run(
            command.replace("gbr-node", f"{sys.executable} -m gbr_node"),
            shell=True,
            cwd=fresh,
            env=node_env(fresh.parent / "home"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        refusal = "outside.txt" in command
        assert (out.returncode == 1) if refusal else (out.returncode == 0), (command, out)


def test_a_defect_after_the_repl_started_is_one_line_on_screen_and_logged_whole(
    fresh, model_server, tmp_path
):
    """A node that stops on an unexpected exception once the REPL is drawn says so in one
    line naming it, not a page of nested exception-group traceback, and not nothing."""
    write_profile(fresh, model_server.base_url)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(  # the defect: learning the window fails
        "import gbr_node.agent.model as m\n"
        "async def boom(self):\n"
        "    raise RuntimeError('injected defect')\n"
        "m.ModelService.learn_window = boom\n",
        encoding="utf-8",
    )
    term = Terminal(spawn_node(fresh, "run", env={"PYTHONPATH": str(site)}))
    # The node closes its host and the REPL first: under load that took longer than the
    # default 20 s once (the screen still showed the idle prompt).
    term.expect(r"stopped on an internal error: RuntimeError: injected defect", timeout_s=90)
    term.child.expect(pexpect.EOF)
    term.child.close()
    assert term.child.exitstatus == 1
    assert "Traceback" not in term.transcript()
    assert "node.log" in term.transcript()
    log = (fresh / ".gbr" / "node.log").read_text(encoding="utf-8")
    assert "Traceback" in log and "RuntimeError: injected defect" in log
