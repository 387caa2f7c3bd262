"""`gbr-node inbox`: the conversations kept in `.gbr/chat.db`, for a headless node (EVD-AI-02).

`gbr-node inbox` lists every thread; `gbr-node inbox ALIAS` shows the latest
thread with that peer in full (`--thread ID` picks another); `--clear`
forgets the kept messages (of ALIAS only, when given), which also makes room
again for a peer refused "inbox_full". Reads the file a running node writes
(WAL mode: both may use it at once).
"""

from __future__ import annotations

import argparse
import pathlib
from typing import TextIO

EXIT_OK, EXIT_FAILED = 0, 1


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    """Add `inbox` to the CLI's subcommands; the caller sets its `func`."""
    p: argparse.ArgumentParser = sub.add_parser(
        "inbox",
        help="show the messages other agents sent this node",
        description="Show the conversations with other agents kept in .gbr/chat.db: every "
        "thread, or one peer's latest thread in full.",
        epilog="examples:\n  gbr-node inbox\n  gbr-node inbox bob\n"
        "  gbr-node inbox bob --thread 1a2b3c4d\n  gbr-node inbox bob --clear",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("peer", nargs="?", metavar="ALIAS", help="a peer's alias or peer ID")
    p.add_argument("--thread", metavar="ID", help="the thread whose id starts with ID")
    p.add_argument("--clear", action="store_true", help="forget the kept messages")
    return p


def main(project_dir: pathlib.Path, args: argparse.Namespace, out: TextIO) -> int:
    """Run `gbr-node inbox` with parsed `args`; prints to `out`, returns the exit status."""
    # here, not at the top: `gbr-node --help` builds this parser without pydantic
    from gbr_node.chat.present import inbox_text, thread_text
    from gbr_node.chat.store import ChatStore, default_path

    path = default_path(project_dir)
    if not path.exists():
        print("no messages yet (no .gbr/chat.db)", file=out)
        return EXIT_OK
    with ChatStore(path) as store:
        threads = store.threads()
        if args.peer is not None:
            threads = [t for t in threads if args.peer in (t.alias, t.peer_id)]
            if not threads:
                print(f"no messages with {args.peer}", file=out)
                return EXIT_FAILED if args.thread else EXIT_OK
        if args.clear:
            peers = {t.peer_id for t in threads} if args.peer else {None}
            gone = sum(store.clear_inbox(peer) for peer in peers)
            print(f"{gone} received messages forgotten", file=out)
            return EXIT_OK
        if args.peer is None:
            print(inbox_text(threads), file=out)
            return EXIT_OK
        if args.thread:
            threads = [t for t in threads if t.context_id.startswith(args.thread)]
            if not threads:
                print(f"no thread {args.thread} with {args.peer}", file=out)
                return EXIT_FAILED
        last = threads[-1]
        print(thread_text(store.thread(last.peer_id, last.context_id)), file=out)
    return EXIT_OK
