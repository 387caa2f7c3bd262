"""Issue 15: the embedded model is offered few tools, and its calls are grammar-constrained.

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
from gbr_node.llm.local import EMBEDDED_TOOLS
from tests.support.gbnf import Gbnf
from tests.support.model_server import ModelServer
from tests.support.replies import text_reply

WRITE = (
    '<tool_call>\n{"name": "write_file", "arguments": {"path": "hello.txt", "content": "Hello"}}'
)


async def run_turn(tmp_path, server: ModelServer, embedded: bool) -> list:
    (tmp_path / ".gbr_envs").mkdir()
    (tmp_path / ".gbr_envs" / "default.toml").write_text(
        f'[model]\nbase_url = "{server.base_url}"\nmodel = "test-model"\n'
    )
    node = Node(load_profile(tmp_path, "default"))
    node.embedded = embedded
    node.choice = choose_model(node.loaded.profile.model, {})
    shown: list = []
    session = Session(node.loaded.system_prompt)
    async with ModelClient(node.client_settings(node.choice)) as client:
        node.client = client
        machine = AgentMachine(session, node.chat_tools)
        runtime = AgentRuntime(machine, node.model, node.dispatcher, shown.append)
        async with trio.open_nursery() as nursery:
            await nursery.start(runtime.run)
            await runtime.inbox.send(UserPrompt("Create hello.txt saying Hello"))
            with trio.fail_after(20):
                await trio.sleep(0.05)
                await runtime.wait_idle()
            nursery.cancel_scope.cancel()
    node.approvals.close()
    return shown


async def test_the_embedded_model_gets_its_few_tools_and_a_written_call_runs(tmp_path) -> None:
    with ModelServer() as server:
        server.enqueue(text_reply(WRITE + "\n</tool_call>", pieces=6), text_reply("Done."))
        shown = await run_turn(tmp_path, server, embedded=True)
        first, second = server.chat_bodies
    assert (tmp_path / "hello.txt").read_text() == "Hello"
    assert not any("<tool_call>" in s.text for s in shown if s.kind == "text")  # never shown
    assert [t["function"]["name"] for t in first["tools"]] == list(EMBEDDED_TOOLS)
    for tool in first["tools"]:
        function = tool["function"]
        offered = tuple(function["parameters"]["properties"])
        assert offered == EMBEDDED_TOOLS[function["name"]]
        assert "." not in function["description"]  # the short form: one sentence
    assert first["tool_choice"] == "none" and first["grammar"].startswith("root ::= call\n")
    # After a successful write the embedded model reports (no more calls in the turn).
    assert second["grammar"].startswith("root ::= answer\n")
    assert second["messages"][-1]["role"] == "tool"


async def test_a_configured_model_gets_every_tool_and_no_grammar(tmp_path) -> None:
    with ModelServer() as server:
        server.enqueue(text_reply("Hi."))
        await run_turn(tmp_path, server, embedded=False)
        [body] = server.chat_bodies
    names = {t["function"]["name"] for t in body["tools"]}
    assert set(EMBEDDED_TOOLS) < names and {"move_path", "delete_path"} <= names
    assert "grammar" not in body and "tool_choice" not in body


def call(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


async def test_the_embedded_model_s_grammar_names_what_the_project_holds(tmp_path) -> None:
    """Issue 15b: each request's grammar is bounded by the project as it is then."""
    (tmp_path / "notes.txt").write_text("colour: red\n")
    (tmp_path / "docs").mkdir()
    with ModelServer() as server:
        server.enqueue(text_reply(WRITE + "\n</tool_call>", pieces=6), text_reply("Done."))
        await run_turn(tmp_path, server, embedded=True)
        first, second = (Gbnf(body["grammar"]) for body in server.chat_bodies)
    # The request names hello.txt, which does not exist, and spells its text: that write is
    # the one call (the tiny model edited the file it had read instead, or wrote "The text
    # is Hello. The text is ..." until its token limit).
    assert first.matches(call("write_file", {"path": "hello.txt", "content": "Hello"}))
    assert not first.matches(call("write_file", {"path": "hi.txt", "content": "Hello"}))
    assert not first.matches(call("write_file", {"path": "hello.txt", "content": "Hello!"}))
    edit = {"path": "notes.txt", "old_string": "red", "new_string": "blue"}
    assert not first.matches(call("edit_file", edit))
    assert not first.matches(call("read_file", {"path": "notes.txt"}))
    assert not first.matches(call("list_dir", {"path": "docs"}))
    # The write succeeded: the next answer reports it, it calls nothing more.
    assert second.matches("Done.")
    assert not second.matches(call("read_file", {"path": "hello.txt"}))
    assert not second.matches(call("write_file", {"path": "hi.txt", "content": "x"}))
