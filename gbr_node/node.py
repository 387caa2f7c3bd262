"""Composition root: one nursery wiring the node's parts. Only `cli.py` imports it.

- `run_interactive` (`gbr-node run`): profile → sandbox → tools → libp2p host
  serving `/gbr/mcp/1.0.0` → model client → journaled session → agent → REPL.
- `serve` (`gbr-node serve`): the same node without agent or REPL, serving
  its tools to trusted peers and logging one line per call.
- `call_once` (`gbr-node call`) and `identity` (`gbr-node id`).
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from gbr_node import __version__
from gbr_node.agent.dispatch import Dispatcher
from gbr_node.agent.journal import Journal, latest_journal, new_journal_path, read_journal
from gbr_node.agent.machine import AgentMachine
from gbr_node.agent.messages import ApprovalResolved
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.agent.session import Session
from gbr_node.approvals import ApprovalLog, default_path, outcome_text, pending_diff
from gbr_node.approvals import cli as approvals_cli
from gbr_node.approvals.desk import LOCAL, ApprovalDesk
from gbr_node.approvals.review import colour_diff
from gbr_node.approvals.state import Approval
from gbr_node.config.events import ProfileRejected
from gbr_node.config.loader import LoadedProfile, load_profile, render_effective
from gbr_node.config.watcher import ProfileWatcher
from gbr_node.errors import GbrError, ModelError, PeerUnreachable
from gbr_node.llm.choice import ModelChoice, choose_model, with_ollama
from gbr_node.llm.client import ClientSettings, ModelClient
from gbr_node.p2p.host import P2PHost, open_host
from gbr_node.p2p.identity import load_or_create_identity, peer_id_of
from gbr_node.p2p.remote import PeerDirectory
from gbr_node.p2p.service import call_tool, describe_call, list_tools, notify_peer, serve_mcp
from gbr_node.repl.app import Repl
from gbr_node.repl.render import DIM, RED, RESET, YELLOW, Renderer
from gbr_node.rpc.codes import UnauthorizedPeer
from gbr_node.rpc.server import CallRecord, Limits
from gbr_node.rpc.toolhost import Grant, ProfileToolHost, Snapshot
from gbr_node.sandbox import Sandbox
from gbr_node.tools.registry import Registry, build_registry

log = logging.getLogger("gbr_node")
OLLAMA_PROBE_TIMEOUT_S = 0.5
REDELIVERY_INTERVAL_S = 2.0
APPROVAL_RESOLVED = "notifications/approval_resolved"
EXIT_OK, EXIT_FAILED, EXIT_UNREACHABLE = 0, 1, 3


@dataclass(frozen=True)
class NodeSettings:
    """What the command line asked for. `listen` None means the profile's `[node] listen`."""

    project_dir: Path
    env: str
    identity: Path | None = None
    listen: tuple[str, ...] | None = None
    resume: bool = False
    base_url: str | None = None
    model: str | None = None


def setup_logging(project_dir: Path) -> logging.Handler:
    """Send every log record (ours and libraries') to `.gbr/node.log`, none to the terminal."""
    path = project_dir / ".gbr" / "node.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    return handler


class Node:
    """The rules in force (profile, sandbox, tool registry) and the parts built on them."""

    def __init__(self, loaded: LoadedProfile) -> None:
        self.approvals = ApprovalLog(default_path(loaded.project_dir))
        self.desk = ApprovalDesk(
            self.approvals, lambda: self.sandbox, self._announce_approval, self._approval_settled
        )
        self.undelivered: dict[str, list[Approval]] = {}
        self.apply_profile(loaded)
        self.dispatcher = Dispatcher(lambda: self.registry)
        self.peers: PeerDirectory | None = None
        self.host: P2PHost | None = None
        self.choice: ModelChoice | None = None
        self.client: ModelClient | None = None
        self.retired_clients: list[ModelClient] = []
        self.runtime: AgentRuntime | None = None
        self.watcher: ProfileWatcher | None = None
        self.notice: Callable[[str], None] = print
        self.color = False

    def apply_profile(self, loaded: LoadedProfile) -> None:
        """Put a validated profile in force for every call that starts from now on."""
        self.loaded = loaded
        self.sandbox = Sandbox(loaded.root, loaded.profile.protected_files)
        self.registry: Registry = build_registry(
            loaded.profile.tools, self.sandbox, on_approval=self.desk.on_approval
        )

    def snapshot(self) -> Snapshot:
        """Trusted peers and tools in force, for the RPC server."""
        return Snapshot(self.loaded.profile.peers, self.registry)

    def limits(self) -> Limits:
        """The RPC limits of the profile's `[node]` table."""
        return Limits.from_config(self.loaded.profile.node)

    def is_trusted(self, peer_id: str) -> bool:
        """True when the active profile trusts `peer_id`."""
        return any(p.peer_id == peer_id for p in self.loaded.profile.peers.values())

    # -- what the REPL asks (repl.app.NodeControl) ---------------------------

    def model(self) -> ModelClient:
        """The current model client; ModelError when none is configured."""
        if self.client is None:
            raise ModelError(NO_MODEL_HELP)
        return self.client

    def tools_lines(self) -> list[str]:
        """`/tools`: one line per tool the model can call."""
        lines = []
        for tool in self.dispatcher.chat_tools():
            fn = tool["function"]
            first = (fn.get("description") or "").strip().splitlines()[:1]
            lines.append(f"  {fn['name']:<20} {first[0] if first else ''}")
        return lines

    def peers_lines(self) -> list[str]:
        """`/peers`: trusted peers and whether they are connected."""
        return self.peers.lines() if self.peers else []

    async def dial(self, target: str) -> str:
        """`/dial ALIAS|MULTIADDR`: connect to a trusted peer and learn its tools."""
        if self.peers is None:
            raise GbrError("this node has no libp2p host")
        return await self.peers.dial(target)

    async def env_command(self, args: str) -> str:
        """`/env` shows the active profile; `/env use NAME` switches; `/env reload` checks now.

        Switching and reloading follow the hot-reload rules (ADR-0012a): the
        outcome is announced like any reload, and a broken profile changes nothing.
        """
        word, _, rest = args.strip().partition(" ")
        if not word:
            return f"profile {self.loaded.name} ({self.loaded.file})\n" + render_effective(
                self.loaded
            )
        if self.watcher is None:
            raise GbrError("profile watching is not running")
        if word == "use" and rest.strip():
            await self.watcher.switch(rest.strip())
            return ""
        if word == "reload":
            outcome = await self.watcher.check_now()
            return "" if outcome is not None else f"profile {self.loaded.name} is unchanged"
        raise GbrError("usage: /env, /env use NAME, /env reload")

    async def follow_profile(self, receive: trio.MemoryReceiveChannel) -> None:
        """Apply what the watcher sends (ADR-0012a): a valid profile is put in force
        for every call that starts after it, the agent's system message is
        replaced, peers no longer trusted are disconnected, and one line says
        what changed; a rejected profile is reported and the old one stays."""
        async for message in receive:
            if isinstance(message, ProfileRejected):
                self.notice(
                    f"{YELLOW}profile not reloaded, the previous one stays: {message}{RESET}"
                )
                continue
            previous = self.loaded
            try:
                self.apply_profile(message.snapshot)
            except GbrError as exc:
                self.notice(f"{YELLOW}profile not applied, the previous one stays: {exc}{RESET}")
                self.apply_profile(previous)
                continue
            if self.runtime is not None:
                await self.runtime.inbox.send(message)
            if message.snapshot.profile.model != previous.profile.model and self.client:
                self._replace_client()
            if self.host is not None:
                await self.host.drop_untrusted()
            name = message.snapshot.name
            if name != previous.name:
                self.notice(f"switched to profile {name}")
            else:
                what = ", ".join(message.changed) or "no effective change"
                self.notice(f"profile {name} reloaded: {what}")

    # -- approvals (EVD-AI-01, EVD-DEV-01/02) -------------------------------

    def _announce_approval(self, approval: Approval) -> None:
        who = "the agent" if approval.requester == LOCAL else approval.requester_alias or "a peer"
        what = f"{approval.tool} {approval.path}"
        lines = [f"{YELLOW}approval #{approval.id} requested by {who}: {what}{RESET}"]
        diff = pending_diff(approval, self.sandbox)
        if diff:
            lines.append(colour_diff(diff, colour=self.color))
        lines.append(
            f"{DIM}/approve {approval.id} · /reject {approval.id} [reason] · /edit {approval.id}"
            f"  (or: gbr-node approvals ...){RESET}"
        )
        self.notice("\n".join(lines))

    async def _approval_settled(self, approval: Approval) -> None:
        text = outcome_text(approval)
        if approval.requester == LOCAL:
            self.notice(f"approval #{approval.id}: {approval.status}")
            if self.runtime is not None:
                await self.runtime.inbox.send(ApprovalResolved(approval.id, text))
            return
        self.undelivered.setdefault(approval.requester, []).append(approval)
        await self.deliver_outcomes(approval.requester)

    async def approvals_command(self, name: str, args: str) -> str:
        """`/approvals`, `/show N`, `/approve N`, `/reject N [reason]` (as `gbr-node approvals`)."""
        return await trio.to_thread.run_sync(self._approvals_cli, name, args)

    def edit_approval(self, args: str) -> str:
        """`/edit N`: opens `$EDITOR`; called from the REPL's input thread (EVD-DEV-02)."""
        return self._approvals_cli("edit", args)

    def _approvals_cli(self, name: str, args: str) -> str:
        words = args.split()
        ns = argparse.Namespace(
            approvals_action="list" if name == "approvals" else name,
            all="--all" in words,
            force="--force" in words,
            reason=" ".join(words[1:]) or None,
        )
        if name != "approvals":
            if not words or not words[0].lstrip("#").isdigit():
                return f"/{name} needs an approval number, e.g. /{name} 3"
            ns.id = int(words[0].lstrip("#"))
        out = io.StringIO()
        approvals_cli.main(self.loaded.project_dir, lambda: self.sandbox, ns, out=out)
        return out.getvalue().rstrip()

    async def deliver_outcomes(self, peer_id: str) -> None:
        """Send pending approval outcomes to the peer that asked; kept for later on failure."""
        waiting = self.undelivered.pop(peer_id, [])
        for n, approval in enumerate(waiting):
            params = {
                "approval_id": approval.id,
                "status": approval.status,
                "tool": approval.tool,
                "path": approval.path,
                "text": outcome_text(approval),
            }
            try:
                if self.host is None:
                    raise GbrError("no libp2p host")
                await notify_peer(self.host, peer_id, APPROVAL_RESOLVED, params)
            except GbrError as exc:
                log.info("approval #%s outcome not delivered to %s: %s", approval.id, peer_id, exc)
                self.undelivered[peer_id] = waiting[n:]
                return

    async def redeliver_forever(self) -> None:
        """Every few seconds, retry outcomes for peers that are connected again."""
        while True:
            await trio.sleep(REDELIVERY_INTERVAL_S)
            connected = set(self.host.connected_peers()) if self.host else set()
            for peer_id in list(self.undelivered):
                if peer_id in connected:
                    await self.deliver_outcomes(peer_id)

    async def on_notify(self, grant: Grant, method: str, params: dict[str, Any]) -> None:
        """A notification from a trusted peer: an approval outcome for our agent."""
        if method != APPROVAL_RESOLVED:
            log.info("ignored %s from %s", method, grant.alias)
            return
        text = f"[from peer {grant.alias}] {params.get('text', '')}"
        self.notice(
            f"peer {grant.alias}: approval #{params.get('approval_id')} {params.get('status')}"
        )
        if self.runtime is not None:
            await self.runtime.inbox.send(ApprovalResolved(params.get("approval_id", 0), text))

    def _replace_client(self) -> None:
        choice = choose_model(self.loaded.profile.model, os.environ)
        if not (choice.config.base_url and choice.config.model):
            return
        if self.client is not None:
            self.retired_clients.append(self.client)
        self.choice = choice
        self.client = ModelClient(
            ClientSettings.from_model_config(choice.config, api_key=choice.api_key)
        )


NO_MODEL_HELP = (
    "no model configured and no local Ollama answered at http://127.0.0.1:11434. Set one:\n"
    "  export OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-...\n"
    "         OPENAI_MODEL=gpt-4o-mini\n"
    "  or [model] base_url / model in the profile, or --base-url / --model"
)


CallLog = Callable[[CallRecord, str | None], None]


@asynccontextmanager
async def _host(
    node: Node,
    settings: NodeSettings,
    log_handler: logging.Handler,
    on_call: CallLog,
    listen: Sequence[str] | None = None,
) -> AsyncIterator[P2PHost]:
    """Run the libp2p host serving `/gbr/mcp/1.0.0`; wire the peer directory into the node."""
    keypair = load_or_create_identity(settings.identity)
    if listen is None:
        listen = settings.listen if settings.listen is not None else node.loaded.profile.node.listen
    async with open_host(
        keypair, listen, is_trusted=node.is_trusted, close_untrusted=False, log_handler=log_handler
    ) as host:
        tool_host = ProfileToolHost(node.snapshot, on_notify=node.on_notify)
        serve_mcp(
            host,
            tool_host,
            node.limits,
            on_call=lambda record: on_call(record, tool_host.alias_of(record.peer_id)),
        )
        node.host = host
        node.peers = PeerDirectory(host, lambda: node.loaded.profile.peers, node.limits)
        node.dispatcher.remote = node.peers
        yield host


def _log_call(record: CallRecord, alias: str | None) -> None:
    log.info("served %s", describe_call(record, alias))


async def serve(settings: NodeSettings) -> int:
    """`gbr-node serve`: serve this node's tools to trusted peers until interrupted."""
    handler = setup_logging(settings.project_dir)
    node = Node(load_profile(settings.project_dir, settings.env))

    def print_call(record: CallRecord, alias: str | None) -> None:
        _log_call(record, alias)
        print(describe_call(record, alias), flush=True)

    async with _host(node, settings, handler, print_call) as host:
        print(f"gbr-node {__version__} serving profile {node.loaded.name} as {host.peer_id}")
        for addr in host.addrs:
            print(f"  {addr}")
        trusted = ", ".join(node.loaded.profile.peers) or "none (every call is refused)"
        print(f"trusted peers: {trusted}", flush=True)
        async with trio.open_nursery() as nursery:
            await _start_background(node, nursery)
    return EXIT_OK


async def call_once(
    settings: NodeSettings, target: str, tool: str | None, arguments: dict[str, Any]
) -> int:
    """`gbr-node call TARGET TOOL ARGS` (or `--list` when `tool` is None); prints the result.

    `target` is a `/p2p/` multiaddr, a peer ID, or an alias of the active
    profile's `[peers]` (if the project has profiles). Exit status: 0 ok,
    1 tool error or refused call, 3 unreachable or unauthorized.
    """
    peer_addrs: tuple[str, ...] = ()
    try:
        peers = load_profile(settings.project_dir, settings.env).profile.peers
    except GbrError:
        peers = {}
    if target in peers:
        target, peer_addrs = peers[target].peer_id, peers[target].addrs
    keypair = load_or_create_identity(settings.identity)
    async with open_host(keypair, [], is_trusted=lambda _: False) as host:
        if peer_addrs:
            host.add_addrs(target, peer_addrs)
        # Errors are handled inside the host's context: leaving it wraps them
        # in the library's exception groups.
        return await _call_and_print(host, target, tool, arguments)


async def _call_and_print(
    host: P2PHost, target: str, tool: str | None, arguments: dict[str, Any]
) -> int:
    limits = Limits()
    try:
        if tool is None:
            for info in await list_tools(host, target, limits=limits):
                summary = info.description.splitlines()[0] if info.description else ""
                print(f"{info.name:<16} {summary}")
            return EXIT_OK
        result = await call_tool(host, target, tool, arguments, limits=limits)
    except (PeerUnreachable, UnauthorizedPeer) as exc:
        print(f"gbr-node: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except GbrError as exc:
        print(f"gbr-node: refused: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for item in result["content"]:
        print(item.get("text", ""))
    return EXIT_FAILED if result.get("isError") else EXIT_OK


def identity(settings: NodeSettings) -> int:
    """`gbr-node id`: print the peer ID and the multiaddrs peers would dial."""
    peer_id = peer_id_of(load_or_create_identity(settings.identity))
    print(peer_id)
    try:
        listen = (
            settings.listen or load_profile(settings.project_dir, settings.env).profile.node.listen
        )
    except GbrError:
        listen = ()
    for addr in listen:
        print(f"  {addr}/p2p/{peer_id}")
    return EXIT_OK


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


def _open_session(settings: NodeSettings, loaded: LoadedProfile) -> tuple[Session, Journal, bool]:
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


async def run_interactive(settings: NodeSettings) -> int:
    """`gbr-node run`: the whole node with its REPL; returns the exit status."""
    handler = setup_logging(settings.project_dir)
    node = Node(load_profile(settings.project_dir, settings.env))
    choice = choose_model(
        node.loaded.profile.model, os.environ, base_url=settings.base_url, model=settings.model
    )
    if not choice.configured:
        choice = await _probe_ollama(choice)
    node.choice = choice
    if choice.config.base_url and choice.config.model:
        node.client = ModelClient(
            ClientSettings.from_model_config(choice.config, api_key=choice.api_key)
        )
    session, journal, resumed = _open_session(settings, node.loaded)
    machine = AgentMachine(session, node.dispatcher.chat_tools)
    renderer = Renderer(color=sys.stdout.isatty() and "NO_COLOR" not in os.environ)
    node.runtime = AgentRuntime(machine, node.model, node.dispatcher, renderer)
    try:
        async with AsyncExitStack() as stack:
            try:
                host = await stack.enter_async_context(_host(node, settings, handler, _log_call))
            except GbrError as exc:
                renderer.line(f"{YELLOW}not listening for peers ({exc}); dialing out only{RESET}")
                host = await stack.enter_async_context(
                    _host(node, settings, handler, _log_call, listen=())
                )
            nursery = await stack.enter_async_context(trio.open_nursery())
            _banner(node, host, renderer, resumed, len(session.entries) - 1)
            await nursery.start(node.runtime.run)
            node.notice = renderer.line
            node.color = renderer.color
            await _start_background(node, nursery)
            if node.peers is not None:
                nursery.start_soon(node.peers.dial_known)
            await Repl(node, renderer).run()
            nursery.cancel_scope.cancel()
    finally:
        journal.close()
        with trio.CancelScope(shield=True):
            for client in [node.client, *node.retired_clients]:
                if client is not None:
                    await client.aclose()
    return EXIT_OK


async def _start_background(node: Node, nursery: trio.Nursery) -> None:
    """Start hot reload (ADR-0012a) and the approval desk (EVD-AI-01) in `nursery`."""
    await nursery.start(node.desk.run)
    nursery.start_soon(node.redeliver_forever)
    await _start_watcher(node, nursery)


async def _start_watcher(node: Node, nursery: trio.Nursery) -> None:
    """Start hot reload of the active profile (ADR-0012a) in `nursery`."""
    send, receive = trio.open_memory_channel(16)
    node.watcher = ProfileWatcher(node.loaded, send)
    nursery.start_soon(node.follow_profile, receive)
    await nursery.start(node.watcher.run)


def _banner(
    node: Node, host: P2PHost | None, renderer: Renderer, resumed: bool, messages: int
) -> None:
    loaded = node.loaded
    renderer.line(f"gbr-node {__version__} · profile {loaded.name} · root {loaded.root}")
    if node.client is None:
        renderer.line(f"{RED}{NO_MODEL_HELP}{RESET}")
    elif node.choice is not None:
        renderer.line(f"{DIM}model {node.choice.describe()}{RESET}")
    if host is not None:
        addrs = ", ".join(host.addrs) or host.peer_id
        renderer.line(f"{DIM}peer {addrs}{RESET}")
    if resumed:
        renderer.line(f"{DIM}resumed the last session ({messages} messages){RESET}")
    count = len(node.registry.names())
    renderer.line(f"{DIM}{count} tools · /help for commands · Ctrl-D leaves{RESET}")
