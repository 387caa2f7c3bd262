"""The node's tools in force: the sandbox, the tool registry and the mounted MCP
servers, rebuilt for each profile put in force (ADR-0012a).

`Toolbox` is the service the others ask for "what may run now": the sandbox
(`sandbox`), the registry the agent, peers and MCP clients call (`registry`, a
`NodeTools` over the local tools and the mounted servers' tools) and the
checks writes go through (`checks`). It puts a profile in force in the order the
registry needs: the sandbox is built first (a broken one refuses the profile
before anything changed), then the library and the checkpoint store follow the
profile (`ProfilePart`), then the registry is built on them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from gbr_node.checkpoints.store import CheckpointStore
from gbr_node.config.loader import LoadedProfile, build_sandbox
from gbr_node.config.profile import ToolsConfig
from gbr_node.confine import in_force, support
from gbr_node.library.index import LibraryIndex
from gbr_node.mcp.mounts import Mounts
from gbr_node.mcp.toolset import NodeTools
from gbr_node.rpc.toolhost import Snapshot
from gbr_node.sandbox import Sandbox
from gbr_node.textcells import RESET, YELLOW
from gbr_node.tools.base import Tool
from gbr_node.tools.checkrunner import CheckRunner
from gbr_node.tools.registry import ApprovalHandler, build_registry


class LibraryPart(Protocol):
    """The library service as the toolbox needs it (`library.service.LibraryService`)."""

    @property
    def index(self) -> LibraryIndex: ...

    def apply_profile(self, loaded: LoadedProfile) -> None: ...


class CheckpointsPart(Protocol):
    """The checkpoint service as the toolbox needs it (`checkpoints.service`)."""

    @property
    def store(self) -> CheckpointStore: ...

    def apply_profile(self, loaded: LoadedProfile) -> None: ...


class Toolbox:
    """The sandbox, registry and mounted servers of the profile in force.

    `tool_listeners` are called (on the event loop, synchronously) whenever the
    node's own tools may have changed: a profile reload, a mounted MCP server
    coming up or going down (`gbr-node mcp` tells its clients, GBR-MCP-01).
    """

    def __init__(
        self,
        library: LibraryPart,
        checkpoints: CheckpointsPart,
        on_approval: ApprovalHandler,
        status_tools: Callable[[ToolsConfig], Iterable[Tool]],
        notice: Callable[[str], None],
    ) -> None:
        self._library = library
        self._checkpoints = checkpoints
        self._on_approval = on_approval
        self._status_tools = status_tools
        self.tool_listeners: list[Callable[[], None]] = []
        self.mounts = Mounts(self.tools_changed, notice)
        self.loaded: LoadedProfile | None = None

    def apply_profile(self, loaded: LoadedProfile) -> None:
        """Put a validated profile in force for every call that starts from now on;
        mounted MCP servers whose table changed are restarted, new ones started."""
        sandbox = build_sandbox(loaded)
        self._library.apply_profile(loaded)
        self._checkpoints.apply_profile(loaded)
        checks = CheckRunner.of_profile(loaded.profile, sandbox)
        registry = build_registry(
            loaded.profile.tools,
            sandbox,
            on_approval=self._on_approval,
            extra=self._status_tools(loaded.profile.tools),
            library=self._library.index,
            checks=checks if loaded.profile.checks else None,
            verify=loaded.profile.builtin_checks,
            checkpoints=self._checkpoints.store,
        )  # as save_checks(), for the profile being put in force
        self.loaded, self.sandbox, self.checks = loaded, sandbox, checks
        self.registry = NodeTools(registry, self.mounts)
        self.mounts.apply(loaded.profile.mcp_servers, loaded.root)

    def snapshot(self) -> Snapshot:
        """Trusted peers and tools in force, for the RPC server."""
        if self.loaded is None:
            raise RuntimeError("the toolbox has no profile yet")
        return Snapshot(self.loaded.profile.peers, self.registry)

    def tools_changed(self) -> None:
        """Tell every `tool_listeners` entry that the node's tools may have changed."""
        for listener in list(self.tool_listeners):
            listener()

    def save_checks(self) -> CheckRunner | None:
        """The formatters and checks writes go through (None: the profile has no
        `[checks]`), for approved writes too (issue 17)."""
        if self.loaded is None or not self.loaded.profile.checks:
            return None
        return self.checks

    def current_sandbox(self) -> Sandbox:
        """The sandbox in force (a getter for the parts built before the first profile)."""
        return self.sandbox

    def confinement_notice(self) -> str | None:
        """The start line about commands (GBR-CONF-01): confined, unconfined and
        why, or refused; None when the profile lets no command run. Blocking: the
        first call probes the OS sandbox (about 0.1 s)."""
        if self.loaded is None:
            return None
        commands = self.loaded.profile.tools
        if not commands.is_enabled("run_command") or not commands.run_command.allow:
            return None
        text = in_force(commands.run_command.confine, support())
        return text if text.startswith("commands run confined") else f"{YELLOW}{text}{RESET}"
