"""`gbr-node run` through a real pseudo-terminal against the real test model server."""

import signal

from tests.e2e.conftest import spawn_node, write_profile
from tests.e2e.terminal import Terminal
from tests.support.replies import Drop, ErrorReply, SseReply, text_reply, tool_call_reply
from tests.support.said import said

CHUNK = {"object": "chat.completion.chunk"}


def content_chunk(text):
    return {**CHUNK, "choices": [{"index": 0, "delta": {"content": text}}]}


def test_plain_answer_streams_into_the_terminal(run_node, model_server):
    model_server.enqueue(text_reply("Hello from the test model", pieces=6, delay_s=0.01))
    term = run_node()
    term.sendline("hi there")
    term.expect_new("Hello from the test model")
    (body,) = model_server.chat_bodies
    assert body["stream"] is True
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][-1]["role"] == "user"
    assert said(body["messages"][-1]["content"]) == "hi there"
    assert {t["function"]["name"] for t in body["tools"]} >= {"read_file", "edit_file"}


def test_a_turn_reads_and_edits_a_local_file(run_node, model_server, project):
    (project / "notes.txt").write_text("colour: red\n", encoding="utf-8")
    model_server.enqueue(
        tool_call_reply("read_file", {"path": "notes.txt"}),
        tool_call_reply(
            "edit_file", {"path": "notes.txt", "old_string": "red", "new_string": "blue"}
        ),
        text_reply("Changed the colour to blue."),
    )
    term = run_node()
    term.sendline("make it blue")
    term.expect_new(r"✓ read_file path=notes.txt \d+ ms")
    term.expect_new(r"✓ edit_file path=notes.txt old_string=red new_string=blue \d+ ms")
    term.expect_new("Changed the colour to blue.")
    assert (project / "notes.txt").read_text(encoding="utf-8") == "colour: blue\n"
    bodies = model_server.chat_bodies
    assert len(bodies) == 3
    tool_msg = bodies[1]["messages"][-1]
    assert tool_msg["role"] == "tool" and "colour: red" in tool_msg["content"]
    assert all(r.problem is None for r in model_server.requests)


def test_bad_key_is_reported_and_a_retried_429_then_answers(run_node, model_server):
    model_server.enqueue(
        ErrorReply(401, {"error": {"message": "Incorrect API key provided", "type": "auth"}}),
        ErrorReply(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "20"}),
        text_reply("second try worked"),
    )
    term = run_node()
    term.sendline("first")
    term.expect_new(r"error: .*(401|API key)")
    term.sendline("second")
    term.expect_new("second try worked")
    assert len(model_server.chat_bodies) == 3


def test_server_dying_mid_stream_keeps_the_partial_text_and_the_repl(run_node, model_server):
    model_server.enqueue(
        SseReply([content_chunk("Half an ans"), Drop()], done=False),
        text_reply("still here"),
    )
    term = run_node()
    term.sendline("go")
    term.expect_new("Half an ans")
    term.expect_new("error: ")
    term.sendline("again")
    term.expect_new("still here")
    last = model_server.chat_bodies[-1]["messages"]
    assert any("Half an ans" in (m.get("content") or "") for m in last)


def test_resume_after_kill_restores_the_conversation(run_node, model_server, project):
    model_server.enqueue(text_reply("The secret word is pineapple."), text_reply("pineapple!"))
    term = run_node()
    term.sendline("remember a word")
    term.expect_new("The secret word is pineapple.")
    term.child.kill(signal.SIGKILL)
    term.child.wait()
    again = Terminal(spawn_node(project, "run", "--resume"))
    try:
        again.expect(r"resumed the last session \(2 messages\)")
        again.expect("/help for commands")
        again.sendline("what was the word?")
        again.expect_new("pineapple!")
        contents = [said(m.get("content")) for m in model_server.chat_bodies[-1]["messages"]]
        assert contents[1:] == [
            "remember a word",
            "The secret word is pineapple.",
            "what was the word?",
        ]
    finally:
        again.child.terminate(force=True)


def _run_without_a_model(tmp_path, **env: str) -> Terminal:
    """`gbr-node run` in a project whose profile sets no model, embedded model off."""
    project = tmp_path / "bare"
    (project / ".gbr_envs").mkdir(parents=True)
    (project / ".gbr_envs" / "default.toml").write_text('system_prompt = "x"\n')
    return Terminal(spawn_node(project, "run", env={"GBR_LOCAL_MODEL": "0", **env}))


def test_slash_commands_work_without_a_model(tmp_path):
    term = _run_without_a_model(tmp_path)
    try:
        term.expect("no model configured")
        term.expect("/help for commands")
        term.sendline("/tools")
        term.expect_new("read_file")
        term.sendline("hello?")
        term.expect_new("error: no model configured")
        term.sendline("/quit")
        while not term.eof:
            term.pump()
        term.child.wait()
        assert term.child.exitstatus == 0
        # the last thing on screen is the /quit line: no fresh prompt drawn after it
        assert term.text().splitlines()[-1].strip() == "› /quit"
    finally:
        term.child.terminate(force=True)


def test_a_server_url_without_a_model_name_says_what_is_missing(tmp_path):
    term = _run_without_a_model(tmp_path, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    try:
        term.expect(r"a model server is set \(http://127\.0\.0\.1:9/v1, base_url from ")
        term.expect("OPENAI_MODEL=NAME")
        term.sendline("hello?")
        term.expect_new("error: a model server is set")
        term.sendline("/quit")
        term.child.wait()
    finally:
        term.child.terminate(force=True)


def test_tools_shows_what_is_withheld_and_why(project, model_server, run_node):
    """issue 34: /tools listed only what the model is offered; a peer not connected and a
    mounted server not running are now named, dimmed, with the reason."""
    write_profile(
        project,
        model_server.base_url,
        extra='[peers.bob]\npeer_id = "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"\n'
        'tools = "*"\n[mcp_servers.ghost]\ncommand = ["/nonexistent/ghost-server"]\n',
    )
    term = run_node()
    term.sendline("/tools")
    term.expect_new("read_file")
    term.expect_new("withheld:")
    term.expect_new(r"bob__\*: peer not connected \(its tools come when it is: /dial bob\)")
    term.expect_new(r"ghost__\*: MCP server not running")


def test_tools_names_tools_left_out_for_the_window_and_turned_off(project, model_server, run_node):
    """issue 34: /tools says which tools the model's window leaves out and which the
    profile's [tools] enabled does not grant, dimmed under "withheld:"."""
    profile = write_profile(
        project,
        model_server.base_url,
        extra='[tools]\nenabled = ["read_file", "write_file", "list_dir", "search_text"]\n',
    )
    text = profile.read_text().replace(
        'model = "test-model"\n', 'model = "test-model"\ncontext_tokens = 512\n'
    )
    profile.write_text(text)
    term = run_node()
    term.sendline("/tools")
    term.expect_new("withheld:")
    term.expect_new(r"\w+: left out for the model's window")
    term.expect_new(r"edit_file, .*run_command.*: not granted by the profile's \[tools\] enabled")
