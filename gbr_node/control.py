"""The running node as a composition of services, one per concern (issue 36).

`Node` builds the services, wires the profile keeper's updates (`UpdateEnv`)
to each and starts their tasks; it holds no logic of its own. Each service
owns its state, its tasks and its slash commands, in the package of its concern:

- `config.keeper.ProfileKeeper`: the profile in force, hot reload (ADR-0012a), `/env`;
- `mcp.service.Toolbox`: the sandbox, tool registry and mounted MCP servers;
- `agent.service.AgentService`: the agent's runtime, `/tools`, a turn's context;
- `agent.model.ModelService`: the model client, its window and step limit;
- `chat.service.ChatService`: conversations with other agents, `/msg`, `/inbox`;
- `approvals.service.ApprovalService`: protected writes and their outcomes;
- `library.service.LibraryService`: the library index, its lookup, `/lib`;
- `checkpoints.service.CheckpointService`: `/undo`, `/checkpoints`;
- `tools.checking.ChecksService`: the checks in force, `/check`;
- `p2p.peers.PeerService`: the host, trusted peers, `/peers`, `/dial`.

Services reach each other only through what the root hands them (getters,
callables, small `Protocol`s), never by importing one another (the
"services" contract in pyproject.toml). `node.py` runs the node.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from gbr_node.agent.model import ModelService
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.agent.service import AgentService
from gbr_node.approvals.service import ApprovalService
from gbr_node.chat.service import ChatService
from gbr_node.checkpoints.service import CheckpointService
from gbr_node.config.keeper import ProfileKeeper
from gbr_node.config.loader import LoadedProfile
from gbr_node.library.lookup import Prelookup
from gbr_node.library.service import LibraryService
from gbr_node.mcp.service import Toolbox
from gbr_node.p2p.peers import PeerService
from gbr_node.repl.app import NodeControl
from gbr_node.repl.commands import CONVERSATION_COMMANDS, command_table
from gbr_node.sandbox import Sandbox
from gbr_node.slash import Command
from gbr_node.tools.checking import ChecksService

SERVICE_COMMANDS: tuple[tuple[Command, ...], ...] = (
    AgentService.commands,
    PeerService.commands,
    ProfileKeeper.commands,
    ChecksService.commands,
    CheckpointService.commands,
    ApprovalService.commands,
    LibraryService.commands,
    ChatService.commands,
)
REPL_COMMANDS = command_table(*SERVICE_COMMANDS[:2], CONVERSATION_COMMANDS, *SERVICE_COMMANDS[2:])
"""The REPL's command table: its own commands and each service's, in `/help` order."""


class Node:
    """The services of one running node, wired together (see the module docstring).

    `notice` shows one line to the person: `print` until the REPL is drawn, then
    the REPL's (every service calls it late-bound, through `say`).
    """

    def __init__(self, loaded: LoadedProfile) -> None:
        self.notice: Callable[[str], None] = print
        say = self.say
        self.keeper = ProfileKeeper(loaded, say)
        self.peers = PeerService(self.profile)
        self.agent = AgentService(
            lambda: self.tools.registry, self.profile, self.sandbox, self._lookup
        )
        self.model = ModelService(self.profile, self.sandbox, self.runtime)
        self.library = LibraryService(self.profile, say)
        self.checkpoints = CheckpointService(
            self.sandbox, self.agent.turn_running, self.agent.tell_model
        )
        self.approvals = ApprovalService(
            loaded.project_dir,
            self.sandbox,
            lambda: self.tools.save_checks(),
            lambda: self.checkpoints.store,
            self.peers,
            say,
            self.runtime,
        )
        self.tools = Toolbox(
            self.library,
            self.checkpoints,
            self.approvals.desk.on_approval,
            self.approvals.desk.status_tools,
            say,
        )
        self.checks = ChecksService(lambda: self.tools.checks, self.runtime)
        self.keeper.appliers.append(self.tools.apply_profile)
        self.keeper.apply(loaded)
        self.keeper.reactions += [
            self.agent.profile_changed,
            self.model.profile_changed,
            self.peers.profile_changed,
        ]
        self.chat = ChatService(
            loaded.project_dir,
            lambda: self.profile().profile.peers,
            lambda: self.profile().profile.chat,
            self.peers.deliver_chat,
            say,
            self.peers.connected_peers,
            lambda: self.tools.registry,
            self.model.model,
        )

    def say(self, text: str) -> None:
        """Show one line to the person, by whatever `notice` is now."""
        self.notice(text)

    @property
    def loaded(self) -> LoadedProfile:
        """The profile in force (`ProfileKeeper.loaded`)."""
        return self.keeper.loaded

    def profile(self) -> LoadedProfile:
        return self.keeper.loaded

    def sandbox(self) -> Sandbox:
        return self.tools.sandbox

    def runtime(self) -> AgentRuntime | None:
        return self.agent.runtime

    async def _lookup(
        self, text: str, window: int | None, local: frozenset[str]
    ) -> Prelookup | None:
        return await self.library.lookup(text, window, local)

    def repl_control(self) -> NodeControl:
        """What the REPL drives: the agent, and the services that answer its commands
        (`REPL_COMMANDS`, assembled from their own lists)."""
        return NodeControl(
            self.agent,
            self.approvals.pending_approval_ids,
            self.approvals.agent_approval_ids,
            self.peers.peer_aliases,
            self.keeper.profile_names,
            self.model.prices,
            services=(
                self.agent,
                self.peers,
                self.keeper,
                self.checks,
                self.checkpoints,
                self.approvals,
                self.library,
                self.chat,
            ),
            table=REPL_COMMANDS,
        )

    async def start(self, nursery: trio.Nursery) -> None:
        """Start the services' tasks in `nursery`: the mounted MCP servers (GBR-MCP-01),
        the approval desk and outcome redelivery (EVD-AI-01), the chat outbox
        (EVD-AI-02), the library refresh and hot reload (ADR-0012a)."""
        await nursery.start(self.tools.mounts.run)
        await nursery.start(self.approvals.desk.run)
        await nursery.start(self.chat.desk.outbox.run)
        nursery.start_soon(self.approvals.redeliver_forever)
        nursery.start_soon(self.library.keep_current)
        await nursery.start(self.keeper.run)

    def close(self) -> None:
        """Stop the library index's refresh, so a cold build never holds the exit."""
        self.library.close()
