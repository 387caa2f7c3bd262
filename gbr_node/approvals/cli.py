"""`gbr-node approvals list | show N | approve N | reject N | edit N` (EVD-DEV-01/02).

Decides approvals from any terminal on the project's log
(`.gbr/approvals.db`), also while `gbr-node serve` or `run` has it open: the
running node polls the log and tells the requester. Exit statuses: 0 done,
1 not done (conflict, failed write, already settled otherwise, editor made no
change), 2 usage error or unknown approval id.
"""

from __future__ import annotations

import argparse
import datetime
import getpass
import os
import pathlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from gbr_node.approvals import parser
from gbr_node.approvals.apply import (
    Conflict,
    Settled,
    approve_and_apply,
    find_conflict,
    pending_diff,
)
from gbr_node.approvals.log import ApprovalLog, default_path
from gbr_node.approvals.review import colour_diff, edit_in_editor, shown_diff
from gbr_node.approvals.state import Approval, InvalidDecision, UnknownApproval
from gbr_node.checks.diagnostics import diagnostics_text, plural
from gbr_node.checks.verdict import Verdict
from gbr_node.errors import SecurityViolation, ToolError
from gbr_node.sandbox import Sandbox
from gbr_node.sandbox.caller import CLI, LOCAL, MCP
from gbr_node.textcells import one_line

if TYPE_CHECKING:
    from gbr_node.checkpoints.store import CheckpointStore
    from gbr_node.tools.files import SaveChecks

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
Editor = Callable[..., str | None]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `approvals` on `subparsers` (`parser.add_parser`); the parsed
    Namespace runs with `args.func(args)`."""
    parser.add_parser(subparsers).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the parsed `approvals` command; `args.project` / `args.env` pick the
    project and profile as for every command. Raises ProfileError (profile
    broken, for actions that touch files) and ApprovalLogError."""
    import functools

    from gbr_node.checkpoints.store import CheckpointStore
    from gbr_node.checkpoints.store import default_path as checkpoints_path
    from gbr_node.config.loader import build_sandbox, find_project_dir, load_profile
    from gbr_node.tools.checkrunner import CheckRunner

    project = pathlib.Path(args.project).resolve() if args.project else None
    project_dir = project or find_project_dir(pathlib.Path.cwd())

    @functools.cache
    def rules() -> tuple[Sandbox, SaveChecks | None, CheckpointStore]:
        loaded = load_profile(project_dir, args.env or os.environ.get("GBR_ENV") or "default")
        sandbox = build_sandbox(loaded)
        checks = CheckRunner.of_profile(loaded.profile, sandbox) if loaded.profile.checks else None
        store = CheckpointStore(checkpoints_path(loaded.project_dir), loaded.root)
        return sandbox, checks, store

    return main(
        project_dir,
        lambda: rules()[0],
        args,
        checks=lambda: rules()[1],
        checkpoints=lambda: rules()[2],
    )


def main(
    project_dir: pathlib.Path,
    sandbox: Callable[[], Sandbox],
    args: argparse.Namespace,
    *,
    out: TextIO | None = None,
    editor: Editor = edit_in_editor,
    checks: Callable[[], SaveChecks | None] = lambda: None,
    checkpoints: Callable[[], CheckpointStore | None] = lambda: None,
) -> int:
    """Do `args.approvals_action` on `project_dir`'s log, printing to `out`
    (default stdout; colours only on a terminal without NO_COLOR). `sandbox`
    is called only by actions that read or change files, `checks` (the
    profile's formatters and checks, issue 17) and `checkpoints` (the store that
    keeps what an approved change replaces, GBR-UNDO-01) only by approve and edit.
    Returns the exit status."""
    out = out or sys.stdout
    colour = out.isatty() and "NO_COLOR" not in os.environ
    path = default_path(project_dir)
    action = args.approvals_action
    if not path.exists():
        if action == "list":
            print("no approvals yet", file=out)
            return EXIT_OK
        print(f"no approval #{args.id} (no log at {path})", file=out)
        return EXIT_USAGE
    by = f"cli:{_user()}"
    with ApprovalLog(path) as log:
        try:
            if action == "list":
                return list_approvals(log, out, everything=args.all)
            if action == "reject":
                return reject(log, args.id, args.reason, by=by, out=out)
            if action == "show":
                full = getattr(args, "full", False)
                return show(log, sandbox(), args.id, out=out, colour=colour, full=full)
            if action == "approve":
                outcome = approve_and_apply(
                    log,
                    args.id,
                    sandbox(),
                    by=by,
                    force=args.force,
                    checks=checks(),
                    checkpoints=checkpoints(),
                )
                return report(outcome, out=out, colour=colour)
            return edit(
                log,
                sandbox(),
                args.id,
                by=by,
                force=args.force,
                out=out,
                editor=editor,
                checks=checks(),
                checkpoints=checkpoints(),
            )
        except UnknownApproval as exc:
            print(str(exc), file=out)
            return EXIT_USAGE
        except (InvalidDecision, SecurityViolation, ToolError) as exc:
            print(f"not done: {exc}", file=out)
            return EXIT_FAILED


def list_approvals(log: ApprovalLog, out: TextIO, *, everything: bool) -> int:
    """One line per approval: id, status, tool, path, requester, request time."""
    approvals = log.list(None if everything else "pending")
    if not approvals:
        print("no approvals" if everything else "no pending approvals", file=out)
    for a in approvals:
        line = f"#{a.id:<4} {a.status:<9} {a.tool:<12} {one_line(a.path)}  from {_who(a)}"
        print(f"{line}  {_when(a.requested_at)}", file=out)
    return EXIT_OK


def show(
    log: ApprovalLog,
    sandbox: Sandbox,
    approval_id: int,
    *,
    out: TextIO,
    colour: bool,
    full: bool = False,
) -> int:
    """Details of one approval and, until it is settled, the diff from the
    file's current content to what would be written (summarised past
    `review.MAX_DIFF_LINES` unless `full`). What a requester wrote is shown
    through `textcells.one_line` / `colour_diff` (GBR-PRIV-01)."""
    a = log.get(approval_id)
    print(f"approval #{a.id}: {a.status}", file=out)
    who = f"requested by {_who(a)} at {_when(a.requested_at)}"
    print(f"  {a.tool} {one_line(a.path)}  ({who})", file=out)
    if "destination" in a.detail:
        print(f"  destination: {one_line(str(a.detail['destination']))}", file=out)
    if a.decided_by:
        edited = " with edits" if a.edited else ""
        print(f"  decided{edited} by {a.decided_by} at {_when(a.decided_at)}", file=out)
    for label, value in (("reason", a.reason), ("error", a.error)):
        if value:
            print(f"  {label}: {one_line(value)}", file=out)
    if not a.settled:
        if find_conflict(a, sandbox) is not None:
            print("  the file changed since the request: approve --force or reject", file=out)
        lines = shown_diff(pending_diff(a, sandbox), full=full, approval_id=a.id)
        print(colour_diff(lines, colour=colour) if lines else "  (no text diff)", file=out)
    return EXIT_OK


def reject(log: ApprovalLog, approval_id: int, reason: str | None, *, by: str, out: TextIO) -> int:
    """Record the rejection; the file is not touched. One already decided is
    reported as it stands (`approval #N already applied`), as approve does."""
    current = log.get(approval_id)
    if current.settled:
        return report(Settled(current), out=out, colour=False)
    log.reject(approval_id, reason, by=by)
    print(f"approval #{approval_id} rejected" + (f": {reason}" if reason else ""), file=out)
    return EXIT_OK


def edit(
    log: ApprovalLog,
    sandbox: Sandbox,
    approval_id: int,
    *,
    by: str,
    force: bool,
    out: TextIO,
    editor: Editor,
    checks: SaveChecks | None = None,
    checkpoints: CheckpointStore | None = None,
) -> int:
    """Open `editor` on the proposed content; apply the edited text (EVD-DEV-02),
    formatted and checked with `checks` (issue 17), what it replaces kept in
    `checkpoints` first (GBR-UNDO-01). A conflict is reported
    before the editor opens; an editor that fails or changes nothing leaves
    the approval as it was."""
    a = log.get(approval_id)
    if a.settled:
        return report(Settled(a), out=out, colour=False)
    if a.content is None:
        print(f"approval #{a.id} is a {a.tool}: there is no content to edit", file=out)
        return EXIT_USAGE
    conflict = None if force else find_conflict(a, sandbox)
    if conflict is not None:
        return report(conflict, out=out, colour=False)
    edited = editor(a.content, suffix=pathlib.PurePosixPath(a.path).suffix or ".txt")
    if edited is None:
        print(f"the editor made no change; approval #{a.id} is left {a.status}", file=out)
        return EXIT_FAILED
    outcome = approve_and_apply(
        log,
        approval_id,
        sandbox,
        by=by,
        force=force,
        content=edited,
        checks=checks,
        checkpoints=checkpoints,
    )
    return report(outcome, out=out, colour=False)


def report(outcome: Conflict | Settled, *, out: TextIO, colour: bool) -> int:
    """Print what an approve/edit came to and return the exit status."""
    a = outcome.approval
    if isinstance(outcome, Conflict):
        print(
            f"conflict: {a.path} changed since approval #{a.id} was requested "
            f"(expected {_short(outcome.expected_hash)}, now {_short(outcome.current_hash)}); "
            "nothing was written",
            file=out,
        )
        if outcome.diff:
            print(colour_diff(outcome.diff, colour=colour), file=out)
        print(
            f"use `approve {a.id} --force` to apply it over the current content, or reject it",
            file=out,
        )
        return EXIT_FAILED
    already = "" if outcome.now else "already "
    if a.status == "applied":
        print(f"approval #{a.id} {already}applied: {a.tool} {a.path}", file=out)
        for line in write_check_lines(outcome):
            print(line, file=out)
        return EXIT_OK
    detail = f": {a.error}" if a.error else (f": {a.reason}" if a.reason else "")
    print(f"approval #{a.id} {already}{a.status}{detail}", file=out)
    return EXIT_FAILED


def write_check_lines(outcome: Settled) -> list[str]:
    """What format on save and the write check did to an applied write, for the
    person who approved it (issue 17): one line for the formatter, one per
    check set, and the new errors as short lines (file:line: message)."""
    lines = []
    formatted = outcome.formatted
    if formatted is not None and formatted.status == "formatted":
        lines.append(f"  reformatted by formatter {formatted.name}")
    elif formatted is not None and formatted.status in ("skipped", "failed"):
        lines.append(f"  not formatted: {formatted.reason}; written as given")
    for verdict in outcome.verdicts:
        lines += _verdict_lines(verdict)
    return lines


def _verdict_lines(verdict: Verdict) -> list[str]:
    if verdict.timed_out is not None or verdict.not_run is not None:
        return [f"  {verdict.status_line(0, 0, exhausted=False)}"]
    if not verdict.failing:
        older = f" ({plural(verdict.before, 'older error')} remain)" if verdict.before else ""
        return [f"  check {verdict.name} ok{older}"]
    head = f"  check {verdict.name}: {plural(len(verdict.new), 'new error')}"
    body = diagnostics_text(verdict.new).splitlines()
    return [head + ":", *(f"    {line}" for line in body)]


ORIGINS = {LOCAL: "the agent", CLI: "the command line", MCP: "an MCP client"}
"""How a requester that is no peer is named (issue 31, approvals by origin)."""


def _who(a: Approval) -> str:
    if a.requester_alias:
        return one_line(f"{a.requester_alias} ({a.requester})", 120)
    return ORIGINS.get(a.requester) or one_line(a.requester, 120)


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _short(fingerprint: str | None) -> str:
    return "absent" if fingerprint is None else fingerprint[-12:]


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"
