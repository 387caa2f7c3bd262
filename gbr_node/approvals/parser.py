"""The `gbr-node approvals` argument parser, apart from the command (`cli.py`) so that
every other command builds its parser without loading the approvals log, diffs and
apply (issue 35: a one-shot command imports only what it uses)."""

from __future__ import annotations

import argparse


def add_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Register `approvals` and its actions on `subparsers` (the `gbr-node`
    command tree) and return its parser; the caller sets its `func`."""
    raw = argparse.RawDescriptionHelpFormatter
    p = subparsers.add_parser(
        "approvals",
        help="list and decide approvals of protected writes",
        description="List and decide the writes to protected files that wait for approval "
        "(.gbr/approvals.db), also while `gbr-node run` or `serve` runs: the node picks the "
        "decision up within a second and tells the requester.",
        epilog="examples:\n  gbr-node approvals list\n  gbr-node approvals show 3\n"
        "  gbr-node approvals approve 3\n  gbr-node approvals reject 3 --reason 'not now'",
        formatter_class=raw,
    )
    actions = p.add_subparsers(dest="approvals_action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        help="pending approvals (--all: every one)",
        description="One line per approval waiting for a decision (--all: every one).",
        epilog="examples:\n  gbr-node approvals list\n  gbr-node approvals list --all",
        formatter_class=raw,
    )
    listing.add_argument("--all", action="store_true", help="include decided ones")
    for name, text, example in (
        ("show", "details and diff of one approval", "show 3"),
        ("approve", "approve and apply it", "approve 3 --force"),
        ("reject", "refuse it; the requester is told the reason", "reject 3 --reason 'not now'"),
        ("edit", "open $EDITOR on the proposed content, then apply the edited text", "edit 3"),
    ):
        action = actions.add_parser(
            name,
            help=text,
            description=text[0].upper() + text[1:] + ".",
            epilog=f"example:\n  gbr-node approvals {example}",
            formatter_class=raw,
        )
        action.add_argument("id", type=int, metavar="N", help="approval id")
        if name == "show":
            action.add_argument("--full", action="store_true", help="the whole diff, however long")
        if name in ("approve", "edit"):
            action.add_argument(
                "--force", action="store_true", help="approve against the file's current content"
            )
        if name == "reject":
            action.add_argument("--reason", help="why, passed on to the requester")
    return p
