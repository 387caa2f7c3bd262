"""GBR-CTX-01: which context window and step limit the node gives its agent."""

from __future__ import annotations

import pytest

from gbr_node.agent.context import DEFAULT_WINDOW
from gbr_node.agent.dispatch import Dispatcher
from gbr_node.agent.machine import AgentMachine
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.agent.session import Session
from gbr_node.config.loader import load_profile
from gbr_node.control import Node
from gbr_node.llm.choice import choose_model
from gbr_node.llm.client import ModelClient
from gbr_node.llm.settings import ClientSettings
from tests.support.model_server import ModelServer


def make_node(tmp_path, server: ModelServer, profile: str = "") -> Node:
    (tmp_path / ".gbr_envs").mkdir()
    (tmp_path / ".gbr_envs" / "default.toml").write_text(
        f'{profile}\n[model]\nbase_url = "{server.base_url}"\nmodel = "test-model"\n'
    )
    node = Node(load_profile(tmp_path, "default"))
    node.model.choice = choose_model(node.loaded.profile.model, {})
    node.model.client = ModelClient(ClientSettings(base_url=server.base_url, model="test-model"))
    machine = AgentMachine(Session("x"), lambda: [])
    dispatcher = Dispatcher(lambda: node.tools.registry)
    node.agent.runtime = AgentRuntime(machine, node.model.model, dispatcher, print)
    return node


@pytest.mark.parametrize(
    ("server_window", "profile", "embedded", "tokens", "source", "steps"),
    [
        (4096, "", False, 4096, "llama.cpp /props of the model server", 8),
        (None, "", False, DEFAULT_WINDOW.tokens, DEFAULT_WINDOW.source, 25),
        (None, "", True, DEFAULT_WINDOW.tokens, DEFAULT_WINDOW.source, 8),
        (4096, "max_steps = 3", False, 4096, "llama.cpp /props of the model server", 3),
        (131072, "", False, 131072, "llama.cpp /props of the model server", 25),
    ],
)
async def test_the_window_comes_from_profile_server_or_default_and_sets_the_step_limit(
    tmp_path, server_window, profile, embedded, tokens, source, steps
):
    with ModelServer(context_tokens=server_window) as server:
        node = make_node(tmp_path, server, profile)
        node.model.embedded = embedded
        window = await node.model.learn_window()
        await node.model.client.aclose()
    assert (window.tokens, window.source) == (tokens, source)
    assert node.agent.runtime.machine.context.window == window
    assert node.agent.runtime.machine.max_steps == steps


async def test_the_profile_context_tokens_wins_over_the_server(tmp_path):
    with ModelServer(context_tokens=4096) as server:
        (tmp_path / ".gbr_envs").mkdir()
        (tmp_path / ".gbr_envs" / "default.toml").write_text(
            f'[model]\nbase_url = "{server.base_url}"\nmodel = "m"\ncontext_tokens = 32768\n'
        )
        node = Node(load_profile(tmp_path, "default"))
        node.model.choice = choose_model(node.loaded.profile.model, {})
        window = await node.model.learn_window()
    assert (window.tokens, window.source) == (32768, "profile [model] context_tokens")
