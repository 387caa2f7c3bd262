"""Parsing of REPL input lines, pure: a line in, a typed value out.

A line that does not start with `/` is a prompt for the agent. A slash
command is parsed into `SlashCommand(name, args)`; `/s TEXT` and
`/suggestion TEXT` become `InterruptAndSuggest` (ADR-0010). `//text` sends
"/text" as a prompt. An unknown command is a `CommandError` that names the
closest known command. `complete` gives the Tab completions of a line.
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
    "usage": ("", "tokens, time and tool calls of this session (and cost, if priced)"),
    "env": ("[all|use NAME]", "the profile in one screen (all: whole); use NAME switches; reload"),
    "check": ("[run]", "show the last write check's full output; /check run runs the checks now"),
    "undo": ("[N]", "take back the files the last (N) turns changed"),
    "checkpoints": ("", "recent turns and peers' calls with the files each changed"),
    "approvals": ("[--all]", "list approvals of protected writes (pending ones by default)"),
    "show": ("N", "details and diff of approval N"),
    "approve": ("N [--force]", "approve approval N and apply it"),
    "reject": ("N [REASON]", "refuse approval N; the reason reaches the requester"),
    "edit": ("N", "open $EDITOR on approval N's content; the edited text is written"),
    "lib": ("QUERY", "search the installed libraries' source (what search_library sees)"),
    "msg": ("ALIAS TEXT", "send TEXT to the trusted peer ALIAS (queued until delivered)"),
    "inbox": ("", "list the conversations with other agents"),
    "thread": ("ALIAS [THREAD]", "show the latest (or THREAD's) conversation with ALIAS"),
    "quit": ("", "leave (Ctrl-D also leaves; Ctrl-C stops the current answer)"),
}
ALIASES = {"suggestion": "s", "exit": "quit", "q": "quit", "?": "help"}
NEEDS_ARGUMENT = {"s", "dial", "show", "approve", "reject", "edit", "lib", "msg", "thread"}
CHAT_COMMANDS = {"msg", "inbox", "thread"}
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


ARGUMENT_KINDS = {
    "dial": "alias",
    "msg": "alias",
    "thread": "alias",
    "show": "approval",
    "approve": "approval",
    "reject": "approval",
    "edit": "approval",
    "env": "env",
}


def complete(
    before: str,
    *,
    aliases: list[str] | tuple[str, ...] = (),
    approvals: list[int] | tuple[int, ...] = (),
    profiles: list[str] | tuple[str, ...] = (),
) -> list[str]:
    """The Tab completions of `before` (the line up to the cursor), each the whole
    line completed: slash commands and their aliases, then after `/dial` a
    peer alias, after `/approve`, `/reject`, `/show`, `/edit` a pending
    approval id, after `/env use` a profile name. Empty when nothing fits."""
    if not before.startswith("/") or "\n" in before:
        return []
    word, space, rest = before[1:].partition(" ")
    if not space:
        names = sorted({*COMMANDS, *ALIASES})
        return [f"/{name}" for name in names if name.startswith(word.lower())]
    kind = ARGUMENT_KINDS.get(ALIASES.get(word.lower(), word.lower()))
    head = before[: len(before) - len(rest)]
    if kind == "env":
        if not rest.startswith("use "):
            return [f"{head}{w}" for w in ("all", "use ", "reload") if w.startswith(rest)]
        head, rest = head + "use ", rest[4:]
        options = list(profiles)
    elif kind == "alias":
        options = list(aliases)
    elif kind == "approval":
        options = [str(n) for n in approvals]
    else:
        return []
    if " " in rest:
        return []
    return [f"{head}{o}" for o in options if o.startswith(rest)]
