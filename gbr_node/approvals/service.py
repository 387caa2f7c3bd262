"""The approvals service: the log and desk of protected writes (EVD-AI-01,
EVD-DEV-01/02), who hears of each request and outcome — the person, this
session's agent, the peer that asked (redelivered until it is reached) — and
`/approvals`, `/show`, `/approve`, `/reject`, `/edit`.
"""

from __future__ import annotations

import argparse
import io
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import trio

from gbr_node.agent.messages import ApprovalResolved
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.approvals import cli as approvals_cli
from gbr_node.approvals.apply import pending_diff
from gbr_node.approvals.desk import ApprovalDesk
from gbr_node.approvals.log import ApprovalLog, default_path
from gbr_node.approvals.review import colour_diff, shown_diff
from gbr_node.approvals.state import SETTLED, Approval, outcome_text
from gbr_node.checkpoints.store import CheckpointStore
from gbr_node.errors import GbrError
from gbr_node.rpc.toolhost import Grant
from gbr_node.sandbox import Sandbox
from gbr_node.sandbox.caller import CLI, LOCAL, MCP
from gbr_node.slash import Command
from gbr_node.textcells import DIM, RESET, YELLOW, one_line
from gbr_node.tools.files import SaveChecks

log = logging.getLogger("gbr_node")
REDELIVERY_INTERVAL_S = 2.0
APPROVAL_RESOLVED = "notifications/approval_resolved"


class Courier(Protocol):
    """How outcomes reach peers (`p2p.peers.PeerService`)."""

    def connected_peers(self) -> Iterable[str]: ...

    async def notify(self, peer_id: str, method: str, params: dict[str, Any]) -> None:
        """Send a notification; GbrError when the peer is not reached."""
        ...

    async def reconnect_awaited(self) -> list[tuple[str, str, dict[str, Any]]]: ...

    def awaits(self, asked: tuple[str, int]) -> bool: ...

    def stop_awaiting(self, asked: tuple[str, int]) -> None: ...


class ApprovalService:
    """The approval log (`log`) and desk (`desk`) of the project, and who hears what.

    `sandbox`, `checks` and `checkpoints` give what approved writes go through;
    `courier` reaches peers; `runtime` gives this session's agent (None where no
    agent runs); `notice` shows one line to the person.
    """

    commands = (
        Command(
            "approvals", "[--all]", "list approvals of protected writes (pending ones by default)"
        ),
        Command("show", "N", "details and diff of approval N", True, "approval"),
        Command("approve", "N [--force]", "approve approval N and apply it", True, "approval"),
        Command(
            "reject",
            "N [REASON]",
            "refuse approval N; the reason reaches the requester",
            True,
            "approval",
        ),
        Command(
            "edit",
            "N",
            "open $EDITOR on approval N's content; the edited text is written",
            True,
            "approval",
            in_terminal=True,
        ),
    )

    def __init__(
        self,
        project_dir: Path,
        sandbox: Callable[[], Sandbox],
        checks: Callable[[], SaveChecks | None],
        checkpoints: Callable[[], CheckpointStore | None],
        courier: Courier,
        notice: Callable[[str], None],
        runtime: Callable[[], AgentRuntime | None] = lambda: None,
    ) -> None:
        self.project_dir = project_dir
        self._sandbox = sandbox
        self._checks = checks
        self._checkpoints = checkpoints
        self._courier = courier
        self.notice = notice
        self._runtime = runtime
        self.log = ApprovalLog(default_path(project_dir))
        self.desk = ApprovalDesk(
            self.log,
            sandbox,
            self._announce,
            self._settled,
            checks=checks,
            checkpoints=checkpoints,  # approved writes are checkpointed too
        )
        self.undelivered: dict[str, list[Approval]] = {}
        self._rejected_here: set[int] = set()  # its /reject already said so
        self._heard: set[tuple[str, int]] = set()
        self.local_requester = "the agent"
        """Who asks for local approvals, in notices ("the MCP client" in `gbr-node mcp`)."""
        self.color = False

    def close(self) -> None:
        self.log.close()

    def pending_approval_ids(self) -> list[int]:
        """Ids of the approvals waiting for a decision (Tab after `/approve`)."""
        return [approval.id for approval in self.log.list("pending")]

    def agent_approval_ids(self) -> list[int]:
        """Ids of the approvals still pending that this session's agent asked for: the
        status line's "waiting for approval" (issue 31, approvals by origin). Requests
        of peers, commands and MCP clients, and those of an earlier session, are not
        the agent's to wait for: they are announced as notices only."""
        asked = self.desk.asked_here
        return [a.id for a in self.log.list("pending") if a.id in asked]

    def _announce(self, approval: Approval) -> None:
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
        diff = shown_diff(
            pending_diff(approval, self._sandbox()), full=False, approval_id=approval.id
        )
        if diff:
            lines.append(colour_diff(diff, colour=self.color))
        if self._runtime() is not None:
            n = approval.id
            hint = f"/approve {n} · /reject {n} [reason] · /edit {n}  (or: gbr-node approvals ...)"
        else:
            hint = (
                f"decide in another terminal: gbr-node approvals show|approve|reject {approval.id}"
            )
        lines.append(f"{DIM}{hint}{RESET}")
        self.notice("\n".join(lines))

    async def _settled(self, approval: Approval) -> None:
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
            runtime = self._runtime()
            if runtime is not None and approval.id in self.desk.asked_here:
                await runtime.inbox.send(ApprovalResolved(approval.id, text))
            return
        if approval.requester in (CLI, MCP):  # shown above; no one to tell, no turn
            return
        self.undelivered.setdefault(approval.requester, []).append(approval)
        await self.deliver_outcomes(approval.requester)

    async def command(self, name: str, args: str) -> str:
        """`/approvals`, `/show N`, `/approve N`, `/reject N [reason]` (as `gbr-node approvals`)."""
        return await trio.to_thread.run_sync(self._approvals_cli, name, args)

    def terminal_command(self, name: str, args: str) -> str:
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
            self.project_dir,
            self._sandbox,
            ns,
            out=out,
            checks=self._checks,
            checkpoints=self._checkpoints,
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
                await self._courier.notify(peer_id, APPROVAL_RESOLVED, params)
            except GbrError as exc:
                log.info("approval #%s outcome not delivered to %s: %s", approval.id, peer_id, exc)
                self.undelivered[peer_id] = waiting[n:]
                return

    async def redeliver_forever(self) -> None:
        """Every few seconds, retry outcomes for peers that are connected again, and
        reach again peers whose outcomes our agent awaits (`PeerDirectory.reconnect_awaited`)."""
        while True:
            await trio.sleep(REDELIVERY_INTERVAL_S)
            for alias, peer_id, params in await self._courier.reconnect_awaited():
                await self._peer_outcome(alias, peer_id, params)
            connected = set(self._courier.connected_peers())
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
        ours = self._courier.awaits(asked)
        text = str(params.get("text", ""))
        why = f": {one_line(text)}" if status in ("rejected", "failed") else ""
        self.notice(
            f"peer {alias}: approval #{number} {status}{why}"
            + ("" if ours else " (asked by another process with this identity, not the agent)")
        )
        runtime = self._runtime()
        if ours and runtime is not None:
            self._courier.stop_awaiting(asked)
            self._heard.add(asked)
            await runtime.inbox.send(ApprovalResolved(number, f"[from peer {alias}] {text}"))
