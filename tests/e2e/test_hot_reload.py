"""Hot reload of the active profile while `gbr-node run` / `serve` keep running (ADR-0012a)."""

import os

from tests.e2e.conftest import write_profile
from tests.e2e.p2p_helpers import Identity, ServeProcess, gbr_call
from tests.support.replies import text_reply, tool_call_reply
from tests.support.said import said

FAST = "[watch]\npoll_interval_s = 0.1\n"


def rewrite(path, old, new, *, atomic):
    text = path.read_text(encoding="utf-8").replace(old, new)
    if atomic:  # vim / VS Code style: write a new file, rename it over the old one
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    else:
        with open(path, "r+", encoding="utf-8") as f:
            f.truncate(0)
            f.write(text)


def test_new_system_prompt_reaches_the_next_request_and_nothing_else_changes(
    project, model_server, run_node
):
    profile = write_profile(project, model_server.base_url, extra=FAST)
    model_server.enqueue(text_reply("first answer"), text_reply("second answer"))
    term = run_node()
    term.sendline("one")
    term.expect_new("first answer")
    term.mark()
    rewrite(profile, "You are a test agent.", "You are a pirate.", atomic=True)
    term.expect_new("profile default reloaded: system_prompt")
    term.sendline("two")
    term.expect_new("second answer")
    before, after = model_server.chat_bodies
    assert after["messages"][0]["content"].startswith("You are a pirate.")
    assert after["messages"][1:3] == before["messages"][1:] + [after["messages"][2]]
    assert said(after["messages"][1]["content"]) == "one"
    assert after["messages"][2] == {"role": "assistant", "content": "first answer"}


def test_protecting_a_file_live_turns_the_next_write_into_an_approval(
    project, model_server, run_node
):
    profile = write_profile(project, model_server.base_url, extra=FAST)
    target = project / "notes.txt"
    model_server.enqueue(
        tool_call_reply("write_file", {"path": "notes.txt", "content": "v1"}),
        text_reply("wrote v1"),
        tool_call_reply("read_file", {"path": "notes.txt"}),  # replaced only once read
        tool_call_reply("write_file", {"path": "notes.txt", "content": "v2"}),
        text_reply("asked for v2"),
    )
    term = run_node()
    term.sendline("write v1")
    term.expect_new("wrote v1")
    assert target.read_text() == "v1"
    term.mark()
    rewrite(profile, '["pyproject.toml"]', '["pyproject.toml", "notes.txt"]', atomic=False)
    term.expect_new("profile default reloaded: protected_files")
    term.sendline("write v2")
    term.expect_new("asked for v2")
    assert target.read_text() == "v1"
    assert "approv" in model_server.chat_bodies[4]["messages"][-1]["content"]


def test_a_broken_save_is_reported_and_the_old_profile_keeps_working(
    project, model_server, run_node
):
    profile = write_profile(project, model_server.base_url, extra=FAST)
    model_server.enqueue(text_reply("still answering"))
    term = run_node()
    term.mark()
    rewrite(profile, "[model]", "[model]\ntemperatur = 0.5", atomic=True)
    term.expect_new(r"profile not reloaded.*default\.toml:\d+\s+\[model\.temperatur\]")
    term.sendline("are you there?")
    term.expect_new("still answering")
    assert model_server.chat_bodies[0]["messages"][0]["content"].startswith("You are a test agent")


def serve_trusting_a_caller(tmp_path, name: str, text: str):
    """A `serve` node whose root holds file `name`, trusting `caller` with every tool:
    (home, caller, root, profile file, trust table text, server)."""
    home = tmp_path / "home"
    caller = Identity(tmp_path / "caller.key")
    root = tmp_path / "server"
    root.mkdir()
    (root / name).write_text(text)
    trust = f'[peers.caller]\npeer_id = "{caller.peer_id}"\ntools = "*"\n'
    profile = write_profile(root, "http://127.0.0.1:9/v1", extra=FAST + trust)
    server = ServeProcess(root, home, Identity(tmp_path / "server.key"))
    return home, caller, root, profile, trust, server


def test_a_peer_removed_from_peers_is_refused_on_its_next_call(tmp_path):
    home, caller, _, profile, trust, server = serve_trusting_a_caller(tmp_path, "a.txt", "hello\n")
    try:
        read = ("read_file", '{"path": "a.txt"}')
        assert gbr_call(tmp_path, home, caller, server.addr, *read).returncode == 0
        rewrite(profile, trust, "", atomic=True)
        reloaded = server.wait_line("profile default reloaded: peers")
        assert "\x1b[" not in reloaded  # not a terminal: no colour codes
        profile.write_text("[node\n")  # a broken save is reported, plainly too
        assert "\x1b[" not in server.wait_line("profile not reloaded")
        rewrite(profile, "[node\n", "", atomic=True)
        refused = gbr_call(tmp_path, home, caller, server.addr, *read)
        assert refused.returncode == 3
        assert "does not trust" in refused.stderr
    finally:
        server.kill()


def test_unprotecting_a_file_live_lets_the_next_write_through(project, model_server, run_node):
    extra = FAST.replace("[watch]", 'protected_files = ["notes.txt"]\n[watch]')
    profile = write_profile(project, model_server.base_url, extra=extra)
    profile.write_text(profile.read_text().replace('protected_files = ["pyproject.toml"]\n', ""))
    target = project / "notes.txt"
    target.write_text("v0")
    model_server.enqueue(
        tool_call_reply("read_file", {"path": "notes.txt"}),  # replaced only once read
        tool_call_reply("write_file", {"path": "notes.txt", "content": "v1"}),
        text_reply("asked for v1"),
        tool_call_reply("read_file", {"path": "notes.txt"}),
        tool_call_reply("write_file", {"path": "notes.txt", "content": "v2"}),
        text_reply("wrote v2"),
    )
    term = run_node()
    term.sendline("write v1")
    term.expect_new("asked for v1")
    assert target.read_text() == "v0"
    term.mark()
    rewrite(profile, 'protected_files = ["notes.txt"]', "protected_files = []", atomic=False)
    term.expect_new(
        'profile default reloaded: protected_files; LOOSER RULES: "notes.txt" no longer protected'
    )
    term.sendline("write v2")
    term.expect_new("wrote v2")
    assert target.read_text() == "v2"


def test_a_profile_truncated_to_nothing_keeps_a_peers_protected_write_waiting_for_approval(
    tmp_path,
):
    served = serve_trusting_a_caller(tmp_path, "pyproject.toml", "[project]\n")
    home, caller, root, profile, _, server = served
    try:
        with open(profile, "r+", encoding="utf-8") as f:
            f.truncate(0)  # an in-place save caught after its first step, or a wiped file
        assert "holds no settings" in server.wait_line("profile not reloaded")
        write = ("write_file", '{"path": "pyproject.toml", "content": "[project]\\nevil\\n"}')
        done = gbr_call(tmp_path, home, caller, server.addr, *write)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("pending approval #1: write_file on pyproject.toml")
        assert (root / "pyproject.toml").read_text() == "[project]\n"
    finally:
        server.kill()
