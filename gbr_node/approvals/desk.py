"""The running node's side of approvals (EVD-AI-01, EVD-DEV-01/02).

- Asking: `on_approval` is the tool registry's hook. A write that touches a
  protected path is logged as `PendingApproval` (committed first) and the
  caller gets, at once, `{"status": "pending_approval", "approval_id": N}`.
  Who asked comes from `tools.registry.CALLER`, which the RPC host sets for
  remote calls (trio carries it into the worker thread that runs the tool).
- Deciding happens elsewhere (the REPL, or `gbr-node approvals` in another
  process), always through the log.
- Telling: `run` polls the log (every `POLL_INTERVAL_S`), announces new
  requests, applies decisions that no one applied yet (exactly once, see
  `apply.py`), and hands every settled approval to `on_settled` — the node
  tells the local agent or notifies the remote requester. An applied write
  whose check is still running (`Applied.checking`, issue 17) is handed on
  once its `Checked` event is in, so the requester learns the check's
  outcome with it; after `CHECK_REPORT_WAIT_S` without one (the applying
  process died), without it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import trio
from pydantic import Field

from gbr_node.approvals.apply import apply, fingerprint
from gbr_node.approvals.log import ApprovalLog
from gbr_node.approvals.state import (
    Applied,
    Approval,
    Approved,
    Checked,
    Event,
    Failed,
    PendingApproval,
    Rejected,
    UnknownApproval,
    outcome_text,
)
from gbr_node.checkpoints.store import CheckpointStore
from gbr_node.config.profile import ToolsConfig
from gbr_node.errors import ApprovalRequired, GbrError, RpcError, ToolError
from gbr_node.rpc import codes
from gbr_node.sandbox import Sandbox
from gbr_node.sandbox.caller import LOCAL
from gbr_node.tools.base import TURN, Params, Tool
from gbr_node.tools.files import SaveChecks
from gbr_node.tools.registry import CALLER, ToolResult

POLL_INTERVAL_S = 0.25
MAX_PENDING_PER_REQUESTER = 8
"""Pending approvals one requester (a peer, this node's agent, the command line, an MCP
client) may have at once; past it a request is refused with JSON-RPC BUSY (GBR-PRIV-01)."""
MAX_PROPOSED_BYTES = 256 * 1024
"""Largest proposed content (UTF-8 bytes) an approval may hold; past it the request is
refused with JSON-RPC TOO_LARGE."""
COMPACT_AFTER_S = 7 * 24 * 3600.0
"""Decided approvals older than this (seconds) are removed from the log (`ApprovalLog.compact`)
when the node starts and every COMPACT_EVERY_S while it runs."""
COMPACT_EVERY_S = 3600.0
CHECK_REPORT_WAIT_S = 120.0
"""How long (seconds) an applied write's requester waits for its check's outcome
before being told without it (the process that applied it died mid-check)."""
WRITING_TOOLS = ("write_file", "edit_file", "move_path", "delete_path")

log = logging.getLogger("gbr_node.approvals")


class ApprovalStatusParams(Params):
    """Arguments of approval_status."""

    approval_id: int = Field(ge=1, description="The approval_id of a pending_approval result.")


class ApprovalDesk:
    """Connects the approval log to the running node.

    Args:
        approvals: the project's log (`.gbr/approvals.db`).
        sandbox: returns the sandbox in force (decisions apply under it).
        on_new: called with each new pending approval (announce it).
        on_settled: awaited with each approval that became applied, failed
            or rejected while the node runs (tell the requester).
        checks: returns the formatters and checks in force (None: none); the
            decisions the desk applies are formatted and checked with them.
        checkpoints: returns the checkpoint store in force (None: none); what the
            desk applies is checkpointed in it first (GBR-UNDO-01).
    All are used only by `run`; a desk that never runs (as in `gbr-node
    tool`) needs none.
    """

    def __init__(
        self,
        approvals: ApprovalLog,
        sandbox: Callable[[], Sandbox],
        on_new: Callable[[Approval], None] = lambda approval: None,
        on_settled: Callable[[Approval], Awaitable[None]] | None = None,
        *,
        checks: Callable[[], SaveChecks | None] = lambda: None,
        checkpoints: Callable[[], CheckpointStore | None] = lambda: None,
    ) -> None:
        self.log = approvals
        self._sandbox = sandbox
        self._on_new = on_new
        self._on_settled = on_settled or _ignore
        self._checks = checks
        self._checkpoints = checkpoints
        self.asked_here: set[int] = set()
        """Ids of the approvals this process's own agent (`LOCAL`) asked for."""
        self._seq = 0
        self._checking: dict[int, float] = {}  # approval id -> when to stop waiting

    def on_approval(self, exc: ApprovalRequired) -> ToolResult:
        """Registry hook (runs in the tool's worker thread): log the request, answer "pending".

        Raises RpcError TOO_LARGE when the proposed content is over
        MAX_PROPOSED_BYTES, BUSY when the requester already has
        MAX_PENDING_PER_REQUESTER approvals pending; nothing is logged then
        (GBR-PRIV-01: what a requester can make the log hold is bounded).
        """
        requester, alias = CALLER.get()
        size = len(exc.content.encode("utf-8")) if exc.content is not None else 0
        if size > MAX_PROPOSED_BYTES:
            raise RpcError(
                codes.TOO_LARGE,
                f"{exc.tool} on {exc.path} proposes {size} bytes for a protected file; "
                f"an approval holds at most {MAX_PROPOSED_BYTES} bytes. Nothing was changed",
            )
        waiting = [a for a in self.log.list("pending") if a.requester == requester]
        if len(waiting) >= MAX_PENDING_PER_REQUESTER:
            raise RpcError(
                codes.BUSY,
                f"{len(waiting)} approvals of yours already wait for the operator "
                f"(at most {MAX_PENDING_PER_REQUESTER}); ask again once they are decided. "
                "Nothing was changed",
            )
        turn = TURN.get() if requester == LOCAL else None
        approval_id = self.log.request(exc, requester, alias, fingerprint(exc.absolute), turn=turn)
        if requester == LOCAL:
            self.asked_here.add(approval_id)
        text = (
            f"pending approval #{approval_id}: {exc.tool} on {exc.path} touches a protected file "
            "and was not performed. The operator will approve, edit or reject it; you will be "
            "told the outcome. Do not retry it meanwhile."
        )
        structured = {
            "status": "pending_approval",
            "approval_id": approval_id,
            "tool": exc.tool,
            "path": exc.path,
        }
        return ToolResult.text(text, structured=structured)

    def status_tools(self, tools: ToolsConfig) -> list[Tool]:
        """`[status_tool()]` when `tools` enables a tool that can ask for approval
        (a write, edit, move or delete), else none: `[tools] enabled = []`
        leaves the model no tool of this node at all."""
        return [self.status_tool()] if any(tools.is_enabled(n) for n in WRITING_TOOLS) else []

    def status_tool(self) -> Tool:
        """`approval_status(approval_id)`: where one of the caller's approvals stands.

        A peer sees only the approvals it asked for; the local agent sees all.
        The way for a requester that was offline to learn an outcome (EVD-AI-01).
        """

        def handler(params: ApprovalStatusParams) -> ToolResult:
            requester, _ = CALLER.get()
            try:
                approval = self.log.get(params.approval_id)
            except UnknownApproval:
                approval = None
            if approval is None or requester not in (LOCAL, approval.requester):
                raise ToolError(f"no approval #{params.approval_id} of yours")
            text = (
                outcome_text(approval)
                if approval.settled
                else (
                    f"{approval.tool} on {approval.path} (approval #{approval.id}) is still "
                    "waiting for the operator."
                )
            )
            structured = {"approval_id": approval.id, "status": approval.status}
            return ToolResult.text(text, structured=structured)

        return Tool(
            name="approval_status",
            description="Tell where an approval you asked for stands (pending, applied, "
            "rejected or failed), by its approval_id from a pending_approval result.",
            params=ApprovalStatusParams,
            handler=handler,
        )

    async def run(
        self,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,  # type: ignore[name-defined]  # stale trio-typing stubs (see pyproject)
    ) -> None:
        """Poll the log until cancelled.

        Approvals already pending at start are not announced again (the REPL
        lists them on `/approvals`), but decisions made while the node was
        down and not yet applied are applied now.
        """
        await self.compact()
        events = await trio.to_thread.run_sync(self.log.events_since, 0)
        self._seq = events[-1].seq if events else 0
        for approval in await trio.to_thread.run_sync(self.log.list, "approved"):
            await self._apply(approval.id)
        task_status.started()
        next_compaction = time.monotonic() + COMPACT_EVERY_S
        while True:
            await trio.sleep(POLL_INTERVAL_S)
            await self.poll_once()
            if time.monotonic() >= next_compaction:
                next_compaction = time.monotonic() + COMPACT_EVERY_S
                await self.compact()

    async def compact(self) -> None:
        """Remove approvals decided more than COMPACT_AFTER_S ago (logged, never raised)."""
        try:
            removed = await trio.to_thread.run_sync(self.log.compact, COMPACT_AFTER_S)
        except GbrError as exc:
            log.warning("approval log not compacted: %s", exc)
            return
        if removed:
            log.info("approval log: %d decided approvals older than 7 days removed", removed)

    async def poll_once(self) -> None:
        """Handle every event logged since the last poll."""
        events = await trio.to_thread.run_sync(self.log.events_since, self._seq)
        for event in events:
            self._seq = event.seq
            try:
                await self._handle(event)
            except GbrError as exc:
                log.warning("approval #%s: %s", event.approval_id, exc)
        overdue = [n for n, deadline in self._checking.items() if deadline <= time.monotonic()]
        for approval_id in overdue:
            del self._checking[approval_id]
            await self._on_settled(await trio.to_thread.run_sync(self.log.get, approval_id))

    async def _handle(self, event: Event) -> None:
        approval_id = event.approval_id
        if isinstance(event, PendingApproval):
            self._on_new(await trio.to_thread.run_sync(self.log.get, approval_id))
        elif isinstance(event, Approved):  # Edited is an Approved too
            current = await trio.to_thread.run_sync(self.log.get, approval_id)
            if current.status == "approved":
                await self._apply(approval_id)
        elif isinstance(event, Applied) and event.checking:
            self._checking[approval_id] = time.monotonic() + CHECK_REPORT_WAIT_S
        elif isinstance(event, Checked) and self._checking.pop(approval_id, None) is None:
            return  # told already, without it (or applied before the node started)
        elif isinstance(event, Applied | Checked | Failed | Rejected):
            await self._on_settled(await trio.to_thread.run_sync(self.log.get, approval_id))

    async def _apply(self, approval_id: int) -> None:
        await trio.to_thread.run_sync(
            lambda: apply(
                self.log,
                approval_id,
                self._sandbox(),
                by="node",
                checks=self._checks(),
                checkpoints=self._checkpoints(),
            )
        )


async def _ignore(approval: Approval) -> None:
    return None
