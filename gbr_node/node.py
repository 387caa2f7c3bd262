"""Running the node: each command opens one nursery for the services that `control.Node`
composes (issue 36), with the host, the agent and the REPL it needs. Only `cli.py` imports it.

- `run_interactive` (`gbr-node run`): profile → sandbox → tools → libp2p host
  serving `/gbr/mcp/1.0.0` → model client → journaled session → agent → REPL.
- `serve` (`gbr-node serve`): the same node without agent or REPL, serving
  its tools to trusted peers and logging one line per call.
- `mcp_stdio` (`gbr-node mcp`): the same node's tools and its trusted peers'
  for an MCP client on stdin/stdout (GBR-MCP-01); dials out, listens nowhere.
- `send_once` (`gbr-node send`). `call` and `id` are in `oneshot.py`.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TextIO

import trio

from gbr_node import __version__
from gbr_node.agent.context import Window
from gbr_node.agent.journal import Journal, latest_journal, new_journal_path, read_journal
from gbr_node.agent.machine import AgentMachine
from gbr_node.agent.model import EMBEDDED_FAILED, EMBEDDED_OFF, missing_model_help
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.agent.session import Session
from gbr_node.chat.server import ChatServer
from gbr_node.config.loader import LoadedProfile, load_profile, state_folder
from gbr_node.config.network import NodeConfig
from gbr_node.config.profile import ModelConfig
from gbr_node.control import Node
from gbr_node.errors import GbrError, ModelError
from gbr_node.llm.choice import ModelChoice, choose_model, with_ollama
from gbr_node.llm.client import ModelClient
from gbr_node.llm.local import describe as describe_local
from gbr_node.llm.local import (
    local_model_available,
    local_model_server,
    pick_local_model,
    read_meminfo,
)
from gbr_node.llm.settings import ClientSettings
from gbr_node.oneshot import EXIT_FAILED, EXIT_OK, EXIT_USAGE, NodeSettings, load_identity
from gbr_node.p2p.chat import serve_chat
from gbr_node.p2p.host import P2PHost, open_host
from gbr_node.p2p.relaybook import HopLimits
from gbr_node.p2p.service import describe_call, serve_mcp
from gbr_node.repl.app import Repl, open_screen
from gbr_node.repl.render import DIM, RED, RESET, YELLOW
from gbr_node.repl.screen import Screen
from gbr_node.repl.view import View
from gbr_node.rpc.server import CallRecord
from gbr_node.rpc.toolhost import ProfileToolHost

log = logging.getLogger("gbr_node")
OLLAMA_PROBE_TIMEOUT_S = 0.5
LISTEN_HINT = (
    "another node may be using that port: choose one with --listen /ip4/127.0.0.1/tcp/PORT "
    "(port 0 picks a free one) or [node] listen in the profile"
)


def setup_logging(project_dir: Path) -> logging.Handler:
    """Send every log record (ours and libraries') to `.gbr/node.log`, none to the terminal."""
    path = state_folder(project_dir) / "node.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    return handler


CallLog = Callable[[CallRecord, str | None], None]


@asynccontextmanager
async def _host(
    node: Node,
    settings: NodeSettings,
    log_handler: logging.Handler,
    on_call: CallLog,
    listen: Sequence[str] | None = None,
) -> AsyncIterator[P2PHost]:
    """Run the libp2p host serving `/gbr/mcp/1.0.0`; wire the peer directory into the node.

    A listen address that cannot be used raises GbrError with a hint of `--listen`."""
    keypair = load_identity(settings)
    if listen is None:
        listen = settings.listen if settings.listen is not None else node.loaded.profile.node.listen
    entered = False
    try:
        async with open_host(
            keypair,
            listen,
            is_trusted=node.peers.is_trusted,
            close_untrusted=False,
            log_handler=log_handler,
        ) as host:
            entered = True
            yield _serving(node, host, on_call)
    except GbrError as exc:
        if entered:
            raise
        raise GbrError(f"{exc}; {LISTEN_HINT}") from exc


def _hop_limits(node: NodeConfig) -> HopLimits:
    """A relay's limits from `[node] relay_*` (issue 23)."""
    return HopLimits(
        max_reservations=node.relay_max_reservations,
        max_circuits=node.relay_max_circuits,
        circuit_bytes=node.relay_circuit_bytes,
        circuit_s=node.relay_circuit_s,
        reservation_s=node.relay_reservation_s,
    )


def _relay_ids(relays: Sequence[str]) -> set[str]:
    """The peer IDs of `[node] relays` entries (each ends in /p2p/<peer ID>, config checks)."""
    return {addr.rsplit("/p2p/", 1)[1] for addr in relays}


async def _reach_further(
    node: Node, host: P2PHost, nursery: trio.Nursery, *, relay: bool = False
) -> None:
    """Start what issue 23's keys ask for ("Peers on other networks"), as the profile
    was at start (a change to them takes effect at the next start):

    - `[node] relay = true` (or `relay`, from `serve --relay`): serve as a relay;
    - `[node] relays`: keep a reservation on each, accept what they bring (from
      them only), and say where peers reach this node;
    - relays, or a trusted peer with a `/p2p-circuit` address: hole punching;
    - `[node] mdns = true`: find peers on the LAN.
    """
    config = node.loaded.profile.node
    if relay or config.relay:
        host.serve_relay(
            _hop_limits(config),
            serves_any=config.relay_for == "any",
            tell=_dim(node),
            name=lambda peer_id: _alias_or_short(node, peer_id),
        )
        whom = "any peer" if config.relay_for == "any" else "trusted peers only"
        node.notice(f"{DIM}relaying for {whom} (circuit relay v2){RESET}")
    circuits = any("/p2p-circuit" in a for p in node.loaded.profile.peers.values() for a in p.addrs)
    if config.relays or circuits:
        host.enable_hole_punching(lambda: node.loaded.profile.node.announce)
    if config.relays:
        host.accept_relayed(lambda: _relay_ids(node.loaded.profile.node.relays))
        nursery.start_soon(host.keep_reservations, config.relays, _dim(node))
    if config.mdns and not host.addrs:
        node.notice(f"{YELLOW}[node] mdns: not announced, this node listens nowhere{RESET}")
    elif config.mdns:
        await host.find_on_lan()
        node.notice(f"{DIM}finding peers on the LAN (mDNS): /peers lists them{RESET}")


def _alias_or_short(node: Node, peer_id: str) -> str:
    """A peer as serve's lines name it: its alias in the profile, else a short peer ID."""
    for alias, peer in node.loaded.profile.peers.items():
        if peer.peer_id == peer_id:
            return alias
    return f"{peer_id[:6]}…{peer_id[-6:]}"


def _dim(node: Node) -> Callable[[str], None]:
    """`node.notice` for lines of no urgency (dimmed on a colour terminal)."""
    return lambda text: node.notice(f"{DIM}{text}{RESET}")


def _serving(node: Node, host: P2PHost, on_call: CallLog) -> P2PHost:
    """Serve `/gbr/mcp/1.0.0` and `/gbr/mcp/1.1.0` on `host`; wire the peer directory (calling
    peers on kept 1.1.0 streams) into the node."""
    tool_host = ProfileToolHost(node.tools.snapshot, on_notify=node.approvals.on_notify)
    serve_mcp(
        host,
        tool_host,
        node.peers.limits,
        on_call=lambda record: on_call(record, tool_host.alias_of(record.peer_id)),
    )
    chat_limits = node.peers.chat_limits
    serve_chat(host, ChatServer(node.chat.desk.host, chat_limits()), chat_limits)
    node.agent.dispatcher.remote = node.peers.attach(host, node.chat.desk.send_message_tool)
    return host


def _log_call(record: CallRecord, alias: str | None) -> None:
    log.info("served %s", describe_call(record, alias))


async def serve(settings: NodeSettings, *, relay: bool = False) -> int:
    """`gbr-node serve`: serve this node's tools to trusted peers until interrupted;
    with `relay` (`--relay`), also be a relay as `[node] relay = true` makes it."""
    loaded = load_profile(settings.project_dir, settings.env)  # before .gbr/ is created
    handler = setup_logging(settings.project_dir)
    node = Node(loaded)
    node.approvals.color = _wants_color()
    node.notice = _notice_lines(sys.stdout, color=node.approvals.color)
    node.chat.answer_nobody()  # no agent here: messages are shown and kept for later

    def print_call(record: CallRecord, alias: str | None) -> None:
        # serve's stdout is its call log; `run` logs calls to .gbr/node.log instead
        print(describe_call(record, alias), flush=True)

    async with _host(node, settings, handler, print_call) as host, _closing(node):
        print(f"gbr-node {__version__} serving profile {node.loaded.name} as {host.peer_id}")
        for addr in host.addrs:
            print(f"  {addr}")
        trusted = ", ".join(node.loaded.profile.peers) or "none (every call is refused)"
        print(f"trusted peers: {trusted}", flush=True)
        confinement = await trio.to_thread.run_sync(node.tools.confinement_notice)
        if confinement is not None:
            node.notice(confinement)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_stop_on_sigterm, nursery.cancel_scope)
            await _reach_further(node, host, nursery, relay=relay)
            await node.start(nursery)
    return EXIT_OK


def _notice_lines(out: TextIO, *, color: bool) -> Callable[[str], None]:
    """The node's notices as plain lines on `out` (no live part: `serve`, `mcp`)."""
    screen = Screen(View(color=color, live=False), out)
    return lambda text: screen.apply(lambda view, width, now: view.notice(text, width))


@asynccontextmanager
async def _closing(node: Node) -> AsyncIterator[None]:
    """Stop the library index's refresh when leaving, so a cold build never holds the exit."""
    try:
        yield
    finally:
        node.close()


async def mcp_stdio(settings: NodeSettings, max_result_tokens: int) -> int:
    """`gbr-node mcp`: serve this node's and its trusted peers' tools to the MCP client
    that started it, on stdin/stdout, until the client closes stdin (GBR-MCP-01).

    Log records go to `.gbr/node.log` and to stderr (warnings and up, and the
    node's notices); stdout carries nothing but JSON-RPC.
    """
    from gbr_node.mcp.server import McpStdioServer  # the MCP SDK, only for this command

    loaded = load_profile(settings.project_dir, settings.env)
    handler = setup_logging(settings.project_dir)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.WARNING)
    to_stderr.setFormatter(logging.Formatter("gbr-node: %(message)s"))
    logging.getLogger().addHandler(to_stderr)
    node = Node(loaded)
    node.notice = _notice_lines(sys.stderr, color=False)
    node.chat.answer_nobody()  # the MCP client's agent is not ours: messages are only kept
    async with _host(node, settings, handler, _log_call, listen=()), _closing(node):
        server = McpStdioServer(
            lambda: node.tools.registry,
            node.peers.directory,
            node.tools.tool_listeners,
            instructions=_mcp_instructions(node.loaded),
            max_result_tokens=max_result_tokens,
            mounts_settled=lambda: all(
                server.state != "starting" for server in node.tools.mounts.servers.values()
            ),
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_stop_on_sigterm, nursery.cancel_scope)
            await node.start(nursery)
            await server.run()
            nursery.cancel_scope.cancel()
    return EXIT_OK


SEND_WAIT_S = 15.0
"""How long `gbr-node send` waits for the peer's answer before leaving the message queued."""


async def send_once(settings: NodeSettings, target: str, text: str, thread: str | None) -> int:
    """`gbr-node send PEER TEXT [--thread ID]`: queue `text` for a trusted peer in the
    project's durable outbox (`.gbr/chat.db`, as `/msg` does), try to deliver it from a
    dial-only host for up to SEND_WAIT_S seconds, and print where it stands. Exit
    status: 0 delivered or still queued (the next `run` or `serve` delivers it), 1
    refused or expired, 2 an unknown peer or an empty or too big message."""
    loaded = load_profile(settings.project_dir, settings.env)
    handler = setup_logging(settings.project_dir)
    node = Node(loaded)
    node.notice = _notice_lines(sys.stdout, color=_wants_color())
    node.chat.answer_nobody()
    try:
        entry = node.chat.desk.send(target, text, role="user", context_id=thread)
    except GbrError as exc:
        print(f"gbr-node: {exc}", file=sys.stderr)
        return EXIT_USAGE
    async with (
        _host(node, settings, handler, _log_call, listen=()),
        _closing(node),
        trio.open_nursery() as nursery,
    ):
        await nursery.start(node.chat.desk.outbox.run)
        settled = await node.chat.desk.outbox.wait_settled(entry.message.message_id, SEND_WAIT_S)
        nursery.cancel_scope.cancel()
    if settled is not None and settled.state == "queued":
        print("still queued: the next `gbr-node run` or `serve` of this project delivers it")
        return EXIT_OK
    return EXIT_OK if settled is not None and settled.state == "delivered" else EXIT_FAILED


def _mcp_instructions(loaded: LoadedProfile) -> str:
    return (
        f"gbr-node {__version__}, profile {loaded.name}, root {loaded.root}. Local tools act "
        "inside that root only; a change to a protected file answers pending_approval with an "
        "approval_id (ask approval_status later). ALIAS__TOOL runs on the trusted peer ALIAS, "
        "NAME__TOOL on the mounted MCP server NAME."
    )


async def _stop_on_sigterm(scope: trio.CancelScope) -> None:
    """SIGTERM (`kill PID`, a service manager) stops `serve` cleanly, as Ctrl-C does, so
    the process exits normally and the commands it still runs are killed (tools/process.py)."""
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            log.info("SIGTERM: stopping")
            scope.cancel()
            return


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


async def choose(settings: NodeSettings, profile_model: ModelConfig) -> ModelChoice:
    """The model endpoint for `run`: profile < environment < flags, then a local Ollama."""
    choice = choose_model(
        profile_model, os.environ, base_url=settings.base_url, model=settings.model
    )
    return choice if choice.configured else await _probe_ollama(choice)


async def describe_model(settings: NodeSettings) -> int:
    """`gbr-node model`: print which model `run` would use, and why (the same
    choice as `run`: `GBR_LOCAL_MODEL=0` rules the embedded model out here too)."""
    profile = load_profile(settings.project_dir, settings.env).profile
    choice = await choose(settings, profile.model)
    if not choice.configured and not embedded_allowed():
        print(f"none: {missing_model_help(choice, EMBEDDED_OFF)}")
    else:
        name, notice = pick_local_model(profile.local.model, read_meminfo())
        if notice and not choice.configured:
            print(notice)
        print(describe_local(choice, name))
    return EXIT_OK


async def run_interactive(settings: NodeSettings) -> int:
    """`gbr-node run`: the whole node with its REPL; returns the exit status.

    With no model configured and no Ollama answering, the embedded model
    (the `[local]` extra, issue 8) is started for the length of the session.
    """
    loaded = load_profile(settings.project_dir, settings.env)  # before .gbr/ is created
    handler = setup_logging(settings.project_dir)
    node = Node(loaded)
    choice = await choose(settings, node.loaded.profile.model)
    session, journal, resumed = _open_session(settings, node.loaded)
    # A resumed session's agent asked for the approvals its history names: still its own.
    node.approvals.desk.asked_here.update(
        int(e.meta["approval_id"])
        for e in session.entries
        if isinstance(e.meta.get("approval_id"), int)
    )
    machine = AgentMachine(session, node.agent.chat_tools, checks=node.checks.check_specs)
    repl = Repl(node.repl_control(), open_screen(color=_wants_color()))
    node.agent.runtime = AgentRuntime(
        machine,
        node.model.model,
        node.agent.dispatcher,
        repl.show,
        checks=lambda: node.tools.checks,
        changed=node.checkpoints.changed_by_turn,  # each turn's end names the files it changed
    )
    try:
        async with trio.open_nursery() as everything:

            async def repl_then_stop(
                task_status: trio.TaskStatus[None],  # type: ignore[name-defined]  # stale trio-typing stubs (see pyproject)
            ) -> None:
                await repl.run(task_status=task_status)
                everything.cancel_scope.cancel()  # the person left: stop the node

            # The input first, so that keys typed from now on are never echoed by the tty.
            await everything.start(repl_then_stop)
            # `kill PID` leaves like Ctrl-D: the terminal is put back out of raw mode.
            everything.start_soon(_stop_on_sigterm, everything.cancel_scope)
            await _run_node(settings, node, choice, handler, repl, resumed, len(session.entries))
    finally:
        journal.close()
        node.close()
    return EXIT_OK


async def _run_node(
    settings: NodeSettings,
    node: Node,
    choice: ModelChoice,
    handler: logging.Handler,
    repl: Repl,
    resumed: bool,
    entries: int,
) -> None:
    """The node's parts for `run`, until cancelled (the REPL cancels when the person leaves)."""
    runtime = node.agent.runtime
    model = node.model
    if runtime is None:  # a defect: run_interactive sets it before calling this
        raise RuntimeError("the node's agent runtime is not set")
    say = repl.line
    async with AsyncExitStack() as stack:
        if choice.configured:
            pass
        elif not embedded_allowed():
            model.no_model_reason = EMBEDDED_OFF
        elif local_model_available(local_name := _pick_local(node.loaded.profile.local.model, say)):
            say(f"{DIM}starting the embedded model (nothing else configured)…{RESET}")
            log_path = settings.project_dir / ".gbr" / "node.log"

            def progress(text: str) -> None:
                say(f"{DIM}{text}{RESET}")

            try:
                server = local_model_server(log_path, local_name, progress=progress)
                local = await stack.enter_async_context(server)
                choice = local.apply_to(choice)
                model.embedded = True
            except ModelError as exc:
                say(f"{RED}{exc}{RESET}")
                model.no_model_reason = EMBEDDED_FAILED
        model.choice = choice
        stack.push_async_callback(model.aclose)  # after the tasks using them end
        if choice.config.base_url and choice.config.model:
            model.client = ModelClient(model.client_settings(choice))
        try:
            host = await stack.enter_async_context(_host(node, settings, handler, _log_call))
        except GbrError as exc:
            say(f"{YELLOW}not listening for peers, dialing out only: {exc}{RESET}")
            host = await stack.enter_async_context(
                _host(node, settings, handler, _log_call, listen=())
            )
        nursery = await stack.enter_async_context(trio.open_nursery())
        window = await model.learn_window()
        _banner(node, host, say, resumed, entries - 1, window)
        confinement = await trio.to_thread.run_sync(node.tools.confinement_notice)
        if confinement is not None:
            say(f"{DIM}{confinement}{RESET}")
        await nursery.start(runtime.run)
        await nursery.start(node.chat.replies.run)
        node.notice = repl.notice
        node.approvals.color = repl.color
        await node.start(nursery)
        await _reach_further(node, host, nursery)
        nursery.start_soon(_dial_known, node)
        repl.ready()
        await trio.sleep_forever()


def _pick_local(configured: str | None, say: Callable[[str], None]) -> str:
    """The embedded model to run (`pick_local_model`), saying so when memory decided it."""
    name, notice = pick_local_model(configured, read_meminfo())
    if notice:
        say(f"{YELLOW}{notice}{RESET}")
    return name


async def _dial_known(node: Node) -> None:
    """Dial every trusted peer that has addresses, at once; one line says how each went
    (the banner could count only this node's tools)."""

    async def dial(alias: str) -> None:
        try:
            node.notice(f"{DIM}{await node.peers.dial(alias)}{RESET}")
        except GbrError as exc:
            node.notice(f"{YELLOW}peer {alias} not reached: {exc}{RESET}")
            log.info("could not reach peer %s: %s", alias, exc)

    async with trio.open_nursery() as nursery:
        for alias, peer in node.loaded.profile.peers.items():
            if peer.addrs:
                nursery.start_soon(dial, alias)


def _wants_color() -> bool:
    """ANSI colours on a terminal only, unless NO_COLOR is set (no-color.org)."""
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def embedded_allowed() -> bool:
    """False when `GBR_LOCAL_MODEL=0`: never start the embedded model (issue 8)."""
    return os.environ.get("GBR_LOCAL_MODEL", "1") != "0"


def _banner(
    node: Node,
    host: P2PHost | None,
    say: Callable[[str], None],
    resumed: bool,
    messages: int,
    window: Window,
) -> None:
    loaded = node.loaded
    say(f"gbr-node {__version__} · profile {loaded.name} · root {loaded.root}")
    model = node.model
    if model.client is None:
        say(f"{RED}{missing_model_help(model.choice, model.no_model_reason)}{RESET}")
    elif model.choice is not None:
        say(f"{DIM}model {model.choice.describe()}{RESET}")
        say(f"{DIM}context window {window.tokens} tokens ({window.source}){RESET}")
    if host is not None:
        addrs = ", ".join(host.addrs) or host.peer_id
        say(f"{DIM}peer {addrs}{RESET}")
    if resumed:
        say(f"{DIM}resumed the last session ({messages} messages){RESET}")
    count = len(node.agent.chat_tools())
    dialing = [alias for alias, peer in loaded.profile.peers.items() if peer.addrs]
    later = f" (more from {', '.join(dialing)} as they connect)" if dialing else ""
    say(f"{DIM}{count} tools{later} · /help for commands · Ctrl-D leaves{RESET}")
