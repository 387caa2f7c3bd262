"""Composition root: one nursery wiring the node's parts. Only `cli.py` imports it.

`run_interactive` is `gbr-node run`: profile → sandbox → tool registry →
model client → session (journaled) → agent runtime → REPL.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import trio

from gbr_node import __version__
from gbr_node.agent.dispatch import Dispatcher
from gbr_node.agent.journal import Journal, latest_journal, new_journal_path, read_journal
from gbr_node.agent.machine import AgentMachine
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.agent.session import Session
from gbr_node.config.loader import LoadedProfile, load_profile, render_effective
from gbr_node.errors import GbrError, ModelError
from gbr_node.llm.choice import ModelChoice, choose_model, with_ollama
from gbr_node.llm.client import ClientSettings, ModelClient
from gbr_node.repl.app import Repl
from gbr_node.repl.render import DIM, RED, RESET, Renderer
from gbr_node.sandbox import Sandbox
from gbr_node.tools.registry import Registry, build_registry

log = logging.getLogger("gbr_node")
OLLAMA_PROBE_TIMEOUT_S = 0.5


@dataclass(frozen=True)
class RunSettings:
    """What `gbr-node run` was asked for on the command line."""

    project_dir: Path
    env: str
    resume: bool = False
    base_url: str | None = None
    model: str | None = None


def setup_logging(project_dir: Path) -> Path:
    """Send every log record (ours and libraries') to `.gbr/node.log`, none to the terminal."""
    path = project_dir / ".gbr" / "node.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    return path


class Node:
    """The running node as the REPL sees it (`repl.app.NodeControl`)."""

    def __init__(self, loaded: LoadedProfile, choice: ModelChoice, client: ModelClient | None):
        self.loaded = loaded
        self.choice = choice
        self.client = client
        self.sandbox = Sandbox(loaded.root, loaded.profile.protected_files)
        self.registry: Registry = build_registry(loaded.profile.tools, self.sandbox)
        self.dispatcher = Dispatcher(lambda: self.registry)
        self.runtime: AgentRuntime

    def model(self) -> ModelClient:
        """The current model client; ModelError when none is configured."""
        if self.client is None:
            raise ModelError(no_model_help(self.choice))
        return self.client

    def tools_lines(self) -> list[str]:
        """`/tools`: one line per tool the model can call."""
        lines = []
        for tool in self.dispatcher.chat_tools():
            fn = tool["function"]
            first = (fn.get("description") or "").strip().splitlines()[0:1]
            lines.append(f"  {fn['name']:<16} {first[0] if first else ''}")
        return lines

    def peers_lines(self) -> list[str]:
        """`/peers`: trusted peers of the active profile."""
        lines = []
        for alias, peer in self.loaded.profile.peers.items():
            tools = "*" if peer.tools == "*" else ", ".join(peer.tools) or "-"
            lines.append(f"  {alias:<12} {peer.peer_id}  tools: {tools}")
        return lines

    async def dial(self, multiaddr: str) -> str:
        """`/dial`: not available until the P2P plane runs in `run`."""
        raise GbrError("this node runs without a libp2p host yet; use `gbr-node call`")

    async def env_command(self, args: str) -> str:
        """`/env`: the active profile."""
        return f"profile {self.loaded.name} ({self.loaded.file})\n" + render_effective(self.loaded)


def no_model_help(choice: ModelChoice) -> str:
    """What to configure when no model is reachable."""
    return (
        "no model configured and no local Ollama answered at http://127.0.0.1:11434. Set one:\n"
        "  export OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-...\n"
        "         OPENAI_MODEL=gpt-4o-mini\n"
        "  or [model] base_url / model in the profile, or --base-url / --model"
    )


async def _probe_ollama(choice: ModelChoice) -> ModelChoice:
    settings = ClientSettings(
        base_url="http://127.0.0.1:11434/v1",
        model="probe",
        connect_timeout_s=0.3,
        idle_timeout_s=OLLAMA_PROBE_TIMEOUT_S,
        max_retries=0,
    )
    try:
        with trio.move_on_after(OLLAMA_PROBE_TIMEOUT_S * 2):
            async with ModelClient(settings) as probe:
                models = await probe.list_models()
                if models:
                    return with_ollama(choice, models[0])
    except ModelError:
        pass
    return choice


def _open_session(settings: RunSettings, loaded: LoadedProfile) -> tuple[Session, Journal, bool]:
    previous = latest_journal(settings.project_dir) if settings.resume else None
    session = Session(loaded.system_prompt)
    if previous is not None:
        for op, payload in read_journal(previous):
            session.apply(op, payload)
        session.apply("system", {"content": loaded.system_prompt})
        journal = Journal(previous)
    else:
        journal = Journal(new_journal_path(settings.project_dir))
    session.on_change = journal.record
    return session, journal, previous is not None


async def run_interactive(settings: RunSettings) -> int:
    """`gbr-node run`: the whole node with its REPL; returns the exit status."""
    setup_logging(settings.project_dir)
    loaded = load_profile(settings.project_dir, settings.env)
    choice = choose_model(
        loaded.profile.model, os.environ, base_url=settings.base_url, model=settings.model
    )
    if not choice.configured:
        choice = await _probe_ollama(choice)
    client = None
    if choice.config.base_url and choice.config.model:
        client = ModelClient(
            ClientSettings.from_model_config(choice.config, api_key=choice.api_key)
        )
    node = Node(loaded, choice, client)
    session, journal, resumed = _open_session(settings, loaded)
    machine = AgentMachine(session, node.dispatcher.chat_tools)
    renderer = Renderer(color=sys.stdout.isatty())
    node.runtime = AgentRuntime(machine, node.model, node.dispatcher, renderer)
    _banner(node, renderer, resumed, len(session.entries) - 1)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.runtime.run)
            await Repl(node, renderer).run()
            nursery.cancel_scope.cancel()
    finally:
        journal.close()
        if client is not None:
            with trio.CancelScope(shield=True):
                await client.aclose()
    return 0


def _banner(node: Node, renderer: Renderer, resumed: bool, messages: int) -> None:
    loaded = node.loaded
    renderer.line(f"gbr-node {__version__} · profile {loaded.name} · root {loaded.root}")
    if node.client is None:
        renderer.line(f"{RED}{no_model_help(node.choice)}{RESET}")
    else:
        renderer.line(f"{DIM}model {node.choice.describe()}{RESET}")
    if resumed:
        renderer.line(f"{DIM}resumed the last session ({messages} messages){RESET}")
    renderer.line(
        f"{DIM}{len(node.registry.names())} tools · /help for commands · Ctrl-D leaves{RESET}"
    )
