"""Parsing of REPL input lines, pure: a line in, a typed value out.

The REPL's command table is assembled (`command_table`) from its own
commands and the lists of the node's services (`control.REPL_COMMANDS`,
issue 36); every function here takes the table it parses by.

A line that does not start with `/` is a prompt for the agent. A slash
command is parsed into `SlashCommand(name, args)`; `/s TEXT` and
`/suggestion TEXT` become `InterruptAndSuggest` (ADR-0010). `//text` sends
"/text" as a prompt. An unknown command is a `CommandError` that names the
closest known command. `complete` gives the Tab completions of a line.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gbr_node.agent.messages import InterruptAndSuggest, UserPrompt
from gbr_node.errors import GbrError
from gbr_node.slash import Command

FIRST_COMMANDS = (
    Command("help", "", "show this help"),
    Command(
        "s",
        "TEXT",
        "interrupt the answer and steer it with TEXT (also /suggestion)",
        needs_argument=True,
    ),
)
CONVERSATION_COMMANDS = (
    Command("history", "", "show the conversation, with interrupted parts marked"),
    Command("clear", "", "forget the conversation (the system prompt stays)"),
    Command("compact", "", "leave old turns out of the next requests (/history keeps them)"),
    Command("usage", "", "tokens, time and tool calls of this session (and cost, if priced)"),
)
QUIT = Command("quit", "", "leave (Ctrl-D also leaves; Ctrl-C stops the current answer)")
OWN_COMMANDS = (*FIRST_COMMANDS, *CONVERSATION_COMMANDS, QUIT)
"""The REPL's own commands: they act on the conversation it draws (`app.Repl`)."""
ALIASES = {"suggestion": "s", "exit": "quit", "q": "quit", "?": "help"}


def command_table(*lists: Sequence[Command]) -> dict[str, Command]:
    """The REPL's command table, in `/help` order: `/help` and `/s`, then `lists` in
    the order given (the services' lists, and `CONVERSATION_COMMANDS` where the
    caller wants them), then `/quit`. ValueError on a name given twice."""
    table: dict[str, Command] = {}
    for command in (*FIRST_COMMANDS, *(c for commands in lists for c in commands), QUIT):
        if command.name in table or command.name in ALIASES:
            raise ValueError(f"two slash commands are called /{command.name}")
        table[command.name] = command
    return table


OWN_TABLE = command_table(CONVERSATION_COMMANDS)
"""The table of a REPL with no service behind it (the REPL's own commands only)."""


class CommandError(GbrError):
    """A slash command that does not exist or lacks its argument."""


@dataclass(frozen=True)
class SlashCommand:
    """A parsed slash command: canonical `name` and the raw text after it."""

    name: str
    args: str = ""


Parsed = UserPrompt | InterruptAndSuggest | SlashCommand | None


def parse_line(line: str, table: Mapping[str, Command] = OWN_TABLE) -> Parsed:
    """Turn one input line into what it asks for, by the command `table`
    (`command_table`); None for a blank line.

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
    if name not in table:
        close = difflib.get_close_matches(name, list(table) + list(ALIASES), n=1)
        hint = f"; did you mean /{close[0]}?" if close else "; /help lists the commands"
        raise CommandError(f"unknown command /{word}{hint}")
    if table[name].needs_argument and not args:
        raise CommandError(f"/{name} needs {table[name].argument}")
    if name == "s":
        return InterruptAndSuggest(args)
    return SlashCommand(name, args)


def help_text(table: Mapping[str, Command] = OWN_TABLE) -> str:
    """The `/help` listing of `table`, one command per line."""
    rows = [(f"/{c.name} {c.argument}".rstrip(), c.description) for c in table.values()]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"  {left.ljust(width)}  {desc}" for left, desc in rows)


def complete(
    before: str,
    *,
    aliases: list[str] | tuple[str, ...] = (),
    approvals: list[int] | tuple[int, ...] = (),
    profiles: list[str] | tuple[str, ...] = (),
    table: Mapping[str, Command] = OWN_TABLE,
) -> list[str]:
    """The Tab completions of `before` (the line up to the cursor), each the whole
    line completed: slash commands and their aliases, then after `/dial` a
    peer alias, after `/approve`, `/reject`, `/show`, `/edit` a pending
    approval id, after `/env use` a profile name. Empty when nothing fits."""
    if not before.startswith("/") or "\n" in before:
        return []
    word, space, rest = before[1:].partition(" ")
    if not space:
        names = sorted({*table, *ALIASES})
        return [f"/{name}" for name in names if name.startswith(word.lower())]
    command = table.get(ALIASES.get(word.lower(), word.lower()))
    kind = command.completes if command else None
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
