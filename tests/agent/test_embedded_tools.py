"""Issue 32: the embedded model is offered the same tools as any model (as many as its
window holds), and its calls are grammar-constrained by the tool schemas and the project.

Through the node's own agent (Node, AgentMachine, AgentRuntime, ModelClient) against the
real loopback model server: what the request carries, and that a call the model writes as
`<tool_call>` text runs as a tool call (the file appears on disk).
"""

from __future__ import annotations

import json

import trio

from gbr_node.agent.machine import AgentMachine
from gbr_node.agent.messages import UserPrompt
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.agent.session import Session
from gbr_node.config.loader import load_profile
from gbr_node.control import Node
from gbr_node.llm.choice import choose_model
from gbr_node.llm.client import ModelClient
from tests.support.gbnf import Gbnf
from tests.support.model_server import ModelServer
from tests.support.replies import text_reply

WRITE = (
    '<tool_call>\n{"name": "write_file", "arguments": {"path": "hello.txt", "content": "Hello"}}'
)


async def run_turn(
    tmp_path, server: ModelServer, embedded: bool, said: str = "Create hello.txt saying Hello"
) -> list:
    """One turn of the person's `said` through the node's path (`Node.with_turn_context`,
    as the REPL sends it); returns what was shown."""
    (tmp_path / ".gbr_envs").mkdir()
    (tmp_path / ".gbr_envs" / "default.toml").write_text(
        f'[model]\nbase_url = "{server.base_url}"\nmodel = "test-model"\n'
    )
    node = Node(load_profile(tmp_path, "default"))
    node.model.embedded = embedded
    node.model.choice = choose_model(node.loaded.profile.model, {})
    shown: list = []
    session = Session(node.loaded.system_prompt)
    async with ModelClient(node.model.client_settings(node.model.choice)) as client:
        node.model.client = client
        machine = AgentMachine(session, node.agent.chat_tools)
        runtime = AgentRuntime(machine, node.model.model, node.agent.dispatcher, shown.append)
        async with trio.open_nursery() as nursery:
            await nursery.start(runtime.run)
            await runtime.inbox.send(await node.agent.with_turn_context(UserPrompt(said)))
            with trio.fail_after(20):
                await trio.sleep(0.05)
                await runtime.wait_idle()
            nursery.cancel_scope.cancel()
    node.approvals.close()
    return shown


async def test_the_embedded_model_gets_the_same_tools_and_a_written_call_runs(
    tmp_path,
) -> None:
    with ModelServer() as server:
        server.enqueue(text_reply(WRITE + "\n</tool_call>", pieces=6), text_reply("Done."))
        shown = await run_turn(tmp_path, server, embedded=True)
        first, second = server.chat_bodies
        server.enqueue(text_reply("Hi."))
        (tmp_path / "configured").mkdir()
        await run_turn(tmp_path / "configured", server, embedded=False)
        configured = server.chat_bodies[-1]
    assert (tmp_path / "hello.txt").read_text() == "Hello"
    assert not any("<tool_call>" in s.text for s in shown if s.kind == "text")  # never shown
    assert first["tools"] == configured["tools"]  # no list of exceptions (issue 32)
    assert first["tool_choice"] == "none" and first["grammar"].startswith("root ::= call\n")
    # After a successful write the model may call again or answer: nothing forces either.
    assert second["grammar"].startswith("root ::= call | answer\n")
    assert second["messages"][-1]["role"] == "tool"


async def test_a_configured_model_gets_every_tool_and_no_grammar(tmp_path) -> None:
    with ModelServer() as server:
        server.enqueue(text_reply("Hi."))
        await run_turn(tmp_path, server, embedded=False)
        [body] = server.chat_bodies
    names = {t["function"]["name"] for t in body["tools"]}
    assert {"read_file", "write_file", "edit_file", "move_path", "delete_path"} <= names
    assert "grammar" not in body and "tool_choice" not in body


def call(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


async def test_the_embedded_model_s_grammar_names_what_the_project_holds(tmp_path) -> None:
    """Issue 15b, as issue 32 left it: each request's grammar is bounded by the project as
    it is then (paths that must exist do; edits only of files read in the turn), never by
    the request's words."""
    (tmp_path / "notes.txt").write_text("colour: red\n")
    (tmp_path / "docs").mkdir()
    with ModelServer() as server:
        server.enqueue(text_reply(WRITE + "\n</tool_call>", pieces=6), text_reply("Done."))
        await run_turn(tmp_path, server, embedded=True)
        first, second = (Gbnf(body["grammar"]) for body in server.chat_bodies)
    assert first.matches(call("write_file", {"path": "hello.txt", "content": "Hello"}))
    assert first.matches(call("write_file", {"path": "hi.txt", "content": "print('hi')\n"}))
    assert first.matches(call("read_file", {"path": "notes.txt"}))
    assert first.matches(call("list_dir", {"path": "docs"}))
    assert not first.matches("Which text should hello.txt hold?")  # the first answer: a call
    assert not first.matches(call("read_file", {"path": "nope.txt"}))
    assert not first.matches(call("list_dir", {"path": "notes.txt"}))
    edit = {"path": "notes.txt", "old_string": "red", "new_string": "blue"}
    assert not first.matches(call("edit_file", edit))  # not read in this turn
    assert second.matches("Done.")
    assert second.matches(call("read_file", {"path": "hello.txt"}))


async def test_the_library_note_is_left_out_when_no_library_tool_is_offered(tmp_path) -> None:
    """Issue 32: the model is not told about tools it is not offered."""
    (tmp_path / ".gbr_envs").mkdir()
    (tmp_path / ".gbr_envs" / "default.toml").write_text(
        '[tools]\nenabled = ["read_file", "write_file"]\n'
    )
    node = Node(load_profile(tmp_path, "default"))
    session = Session(node.loaded.system_prompt)
    session.append({"role": "user", "content": "hi"})
    machine = AgentMachine(session, node.agent.chat_tools)
    tools = node.agent.chat_tools()
    prepared = machine.context.prepare(session, tools)
    assert "search_library" not in prepared.messages[0]["content"]
    with_library = [*tools, {"type": "function", "function": {"name": "search_library"}}]
    prepared = machine.context.prepare(session, with_library)
    assert "search_library" in prepared.messages[0]["content"]
    node.approvals.close()


async def test_the_files_ride_along_and_a_file_read_in_the_turn_is_edited(tmp_path) -> None:
    """Issue 32, through the node's path against the loopback server: the person's message
    carries the project's files (private state left out); after a read the grammar offers
    the edit of that file, which runs."""
    (tmp_path / "mathutils.py").write_text("def square(n):\n    return n * n\n")
    read = call("read_file", {"path": "mathutils.py"})
    edit = {
        "path": "mathutils.py",
        "old_string": "    return n * n\n",
        "new_string": "    return n * n\n\n\ndef is_even(n):\n    return n % 2 == 0\n",
    }
    with ModelServer() as server:
        server.enqueue(
            text_reply(read), text_reply(call("edit_file", edit)), text_reply("I added is_even.")
        )
        await run_turn(tmp_path, server, embedded=True, said="add an is_even function")
        first, after, _ = server.chat_bodies
    assert "def is_even(n):" in (tmp_path / "mathutils.py").read_text()
    person = first["messages"][-1]["content"]
    assert person.splitlines()[1:3] == ["mathutils.py", "]"]  # the files, then the message
    assert person.endswith("add an is_even function")
    assert ".gbr" not in person and "default.toml" not in person
    assert not Gbnf(first["grammar"]).matches(call("edit_file", edit))  # not read yet
    assert Gbnf(after["grammar"]).matches(call("edit_file", edit))
