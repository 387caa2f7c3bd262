"""The tool registry: name -> tool, built once from a profile, called by name.

A `Registry` is an immutable snapshot of the tools one profile enables; when the
profile hot-reloads (ADR-0012a) the node builds a new one and swaps it in.
`Registry.call` validates arguments, runs the handler and maps the tool layer's
errors to MCP-shaped outcomes:

    UnknownTool, InvalidArguments, SecurityViolation  raised to the caller
    ToolError                                         ToolResult(is_error=True)
    ApprovalRequired                                  on_approval(exc) (EVD-AI-01)
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

import trio
from pydantic import ValidationError

from gbr_node.checkpoints.store import CheckpointStore
from gbr_node.config.profile import ALL_LOCAL_TOOLS, ToolsConfig
from gbr_node.errors import ApprovalRequired, InvalidArguments, ToolError, UnknownTool
from gbr_node.library.index import LibraryIndex
from gbr_node.sandbox import Sandbox
from gbr_node.tools import commands, files, process, search, tree
from gbr_node.tools.base import CALLER, Tool, ToolResult
from gbr_node.tools.library import library_tools

__all__ = ["CALLER", "Registry", "Tool", "ToolResult", "approval_required_result", "build_registry"]

log = logging.getLogger(__name__)

ApprovalHandler = Callable[[ApprovalRequired], ToolResult]


def approval_required_result(exc: ApprovalRequired) -> ToolResult:
    """The default outcome of a change to a protected path, until the approval
    flow exists: nothing was changed, and the structured part says
    `{"status": "approval_required", "tool", "path"}` (EVD-AI-01)."""
    structured: dict[str, Any] = {"status": "approval_required", "tool": exc.tool, "path": exc.path}
    if exc.detail:
        structured["detail"] = dict(exc.detail)
    text = (
        f"{exc.tool} touches the protected path {exc.path!r}. Nothing was changed: "
        "the operator must approve this change before it happens."
    )
    return ToolResult.text(text, structured=structured)


def _describe_validation_error(tool: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "arguments"
        problems.append(f"{field}: {error['msg']}")
    return f"invalid arguments for {tool}: " + "; ".join(problems)


class Registry:
    """An immutable set of tools, looked up by name.

    `tools` are kept in the order given. `on_approval` turns an
    `ApprovalRequired` raised by a handler into the caller's result; the
    default is `approval_required_result` (the approval flow of issue 6
    plugs in here).
    """

    def __init__(self, tools: Iterable[Tool], *, on_approval: ApprovalHandler | None = None):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self._tools[tool.name] = tool
        # Specs are asked for on every inference and every tools/list; building
        # a JSON Schema costs milliseconds, so it is done once per snapshot.
        self._specs = {name: tool.spec() for name, tool in self._tools.items()}
        self._on_approval = on_approval or approval_required_result

    def names(self) -> list[str]:
        """Names of the tools, in registration order."""
        return list(self._tools)

    def has(self, name: str) -> bool:
        """True when tool `name` is here."""
        return name in self._tools

    def specs(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """MCP `tools/list` items for all tools, or for those of `names` that
        exist here (names this registry lacks are skipped, so a peer's grant
        may list tools the profile disables)."""
        wanted = self._specs.keys() if names is None else set(names)
        return [copy.deepcopy(spec) for name, spec in self._specs.items() if name in wanted]

    async def run(self, name: str, arguments: dict[str, Any] | None) -> ToolResult:
        """`call` from async code: on the event loop for a `quick` tool, else in a
        worker thread. Cancelled, the thread is abandoned and a program it runs
        is killed with its process group (`process.CANCEL`). Raises like `call`;
        the caller's context (`CALLER`) goes with it either way."""
        tool = self._tools.get(name)
        if tool is not None and tool.quick:
            return self.call(name, arguments)
        stop = threading.Event()
        token = process.CANCEL.set(stop)  # trio copies this context into the thread
        try:
            return await trio.to_thread.run_sync(self.call, name, arguments, abandon_on_cancel=True)  # type: ignore[call-arg]  # stale trio-typing stubs (see pyproject)
        except trio.Cancelled:
            stop.set()
            raise
        finally:
            process.CANCEL.reset(token)

    def call(self, name: str, arguments: dict[str, Any] | None) -> ToolResult:
        """Run tool `name` with JSON `arguments` (None counts as `{}`); blocking
        (from async code use `run`).

        Raises:
            UnknownTool: no tool `name` here (absent or disabled by the profile).
            InvalidArguments: `arguments` failed validation; the message names
                each bad field (maps to JSON-RPC -32602).
            SecurityViolation: a path or command argument would leave the
                sandbox (UBQ-DEV-01, UNW-DEV-01); nothing was done.
        A `ToolError` becomes `ToolResult(is_error=True)` with its message; an
        `ApprovalRequired` becomes `on_approval(exc)` (EVD-AI-01).
        """
        tool = self._tools.get(name)
        if tool is None:
            raise UnknownTool(f"no tool named {name!r}; available: {', '.join(self._tools)}")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidArguments(f"arguments for {name} must be a JSON object")
        try:
            params = tool.params.model_validate(arguments)
        except ValidationError as exc:
            raise InvalidArguments(_describe_validation_error(name, exc)) from exc
        try:
            return tool.handler(params)
        except ToolError as exc:
            return ToolResult.text(str(exc), is_error=True)
        except ApprovalRequired as exc:
            return self._on_approval(exc)


def build_registry(
    tools: ToolsConfig,
    sandbox: Sandbox,
    *,
    search_path: str | None = None,
    on_approval: ApprovalHandler | None = None,
    extra: Iterable[Tool] = (),
    library: LibraryIndex | None = None,
    checks: files.SaveChecks | None = None,
    verify: bool = True,
    checkpoints: CheckpointStore | None = None,
) -> Registry:
    """Build the registry of the tools `tools` enables, bound to `sandbox`.

    `run_command`'s allow-list is resolved here, once, to absolute executables
    looked up on `search_path` (default: the PATH environment variable at this
    moment); entries whose program is not found are left out with a logged
    warning. A later change of PATH, or a file planted in the root, has no
    effect on this registry (issue 2, "Local tools"). `run_command` exists
    only on POSIX (it kills process groups); elsewhere it is left out with a
    warning. `on_approval` is passed to `Registry`. `extra` tools (the node's
    own, such as `approval_status`) are added whatever `tools` says.
    `search_library` and `read_library` exist when a `library` index is given
    (issue 18). `checks` formats what write_file and edit_file save (UBQ-DEV-02,
    `files.SaveChecks`); `verify` (the profile's `[checks] builtin`) makes a write that
    leaves a file unparsable an error result (GBR-TRUTH-01, `checks.builtin`). With
    `checkpoints`, every change the tools make is checkpointed first (GBR-UNDO-01).
    """
    built = (
        *files.file_tools(tools, sandbox, checks, verify=verify, checkpoints=checkpoints),
        *tree.tree_tools(sandbox, checkpoints),
    )
    available = {tool.name: tool for tool in (*built, search.search_tool(tools, sandbox))}
    if library is not None:
        available.update((tool.name, tool) for tool in library_tools(library, sandbox))
    if tools.is_enabled("run_command"):
        if os.name == "posix":
            path = os.environ.get("PATH", os.defpath) if search_path is None else search_path
            available["run_command"] = commands.command_tool(
                tools.run_command, sandbox, path, checkpoints
            )
        else:
            log.warning("run_command needs POSIX process groups; left out on %s", os.name)
    names = [name for name in ALL_LOCAL_TOOLS if name in available and tools.is_enabled(name)]
    return Registry([*(available[name] for name in names), *extra], on_approval=on_approval)
