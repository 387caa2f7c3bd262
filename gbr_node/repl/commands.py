"""Parsing of REPL input lines, pure: a line in, a typed value out.

A line that does not start with `/` is a prompt for the agent. A slash
command is parsed into `SlashCommand(name, args)`; `/s TEXT` and
`/suggestion TEXT` become `InterruptAndSuggest` (ADR-0010). `//text` sends
"/text" as a prompt. An unknown command is a `CommandError` that names the
closest known command.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from gbr_node.agent.messages import InterruptAndSuggest, UserPrompt
from gbr_node.errors import GbrError

COMMANDS: dict[str, tuple[str, str]] = {
    "help": ("", "show this help"),
    "s": ("TEXT", "interrupt the answer and steer it with TEXT (also /suggestion)"),
    "tools": ("", "list the tools the model can call (local and from peers)"),
    "peers": ("", "list trusted peers and whether they are connected"),
    "dial": ("ALIAS|MULTIADDR", "connect to a trusted peer and learn its tools"),
    "history": ("", "show the conversation, with interrupted parts marked"),
    "clear": ("", "forget the conversation (the system prompt stays)"),
    "compact": ("", "leave old turns out of the next requests (/history keeps them)"),
    "env": ("[use NAME | reload]", "show, switch or reload the environment profile"),
    "check": ("[run]", "show the last write check's full output; /check run runs the checks now"),
    "approvals": ("[--all]", "list approvals of protected writes (pending ones by default)"),
    "show": ("N", "details and diff of approval N"),
    "approve": ("N [--force]", "approve approval N and apply it"),
    "reject": ("N [REASON]", "refuse approval N; the reason reaches the requester"),
    "edit": ("N", "open $EDITOR on approval N's content; the edited text is written"),
    "lib": ("QUERY", "search the installed libraries' source (what search_library sees)"),
    "quit": ("", "leave (Ctrl-D also leaves; Ctrl-C stops the current answer)"),
}
ALIASES = {"suggestion": "s", "exit": "quit", "q": "quit", "?": "help"}
NEEDS_ARGUMENT = {"s", "dial", "show", "approve", "reject", "edit", "lib"}
APPROVAL_COMMANDS = {"approvals", "show", "approve", "reject", "edit"}


class CommandError(GbrError):
    """A slash command that does not exist or lacks its argument."""


@dataclass(frozen=True)
class SlashCommand:
    """A parsed slash command: canonical `name` and the raw text after it."""

    name: str
    args: str = ""


Parsed = UserPrompt | InterruptAndSuggest | SlashCommand | None


def parse_line(line: str) -> Parsed:
    """Turn one input line into what it asks for; None for a blank line.

    Raises CommandError for an unknown command or a missing argument.
    """
    text = line.strip()
    if not text:
        return None
    if text.startswith("//"):
        return UserPrompt(text[1:])
    if not text.startswith("/"):
        return UserPrompt(text)
    word, _, args = text[1:].partition(" ")
    args = args.strip()
    name = ALIASES.get(word.lower(), word.lower())
    if name not in COMMANDS:
        close = difflib.get_close_matches(name, list(COMMANDS) + list(ALIASES), n=1)
        hint = f"; did you mean /{close[0]}?" if close else "; /help lists the commands"
        raise CommandError(f"unknown command /{word}{hint}")
    if name in NEEDS_ARGUMENT and not args:
        raise CommandError(f"/{name} needs {COMMANDS[name][0]}")
    if name == "s":
        return InterruptAndSuggest(args)
    return SlashCommand(name, args)


def help_text() -> str:
    """The `/help` listing, one command per line."""
    rows = [(f"/{name} {arg}".rstrip(), desc) for name, (arg, desc) in COMMANDS.items()]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"  {left.ljust(width)}  {desc}" for left, desc in rows)
