"""The slash commands a service offers the REPL, pure: what each is called, takes
and says in `/help`, and the interface a service answers them through.

Each service of the node (`control.Node` builds them) lists its own commands
(`Commands.commands`) and answers them (`Commands.command`); the REPL's table
(`repl.commands.CommandTable`) is assembled from those lists and the REPL's own
(issue 36: one room per concern), so a command lives next to the state it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Completion = Literal["alias", "approval", "env"]


@dataclass(frozen=True)
class Command:
    """One slash command: `/name argument`, its `/help` line, whether it needs
    its argument, what Tab completes after it, and whether it runs while owning
    the terminal (`/edit` opens `$EDITOR`: `Commands.terminal_command`)."""

    name: str
    argument: str
    description: str
    needs_argument: bool = False
    completes: Completion | None = None
    in_terminal: bool = False


class Commands(Protocol):
    """A service that answers slash commands: `command` returns the text to show
    ("" shows nothing) and raises GbrError for a usage or domain error, which the
    REPL shows as `error: ...`."""

    @property
    def commands(self) -> tuple[Command, ...]: ...

    async def command(self, name: str, args: str) -> str: ...


class TerminalCommands(Commands, Protocol):
    """A service with a command that owns the terminal while it runs (`in_terminal`)."""

    def terminal_command(self, name: str, args: str) -> str:
        """Run in a worker thread while the REPL's screen is suspended."""
        ...
