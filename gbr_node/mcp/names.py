"""Tool names as MCP clients get them (GBR-MCP-01) [pure]: checked, shortened, never ambiguous.

MCP's rule (SEP-986, spec 2025-11-25 "Tool names"): 1 to 128 characters of
`[A-Za-z0-9_.-]`, case-sensitive. Many clients (and the OpenAI-style function
names behind them) cut at 64, so names are kept to `MAX_NAME_CHARS` = 64.

The node offers three kinds of tools under one flat list: its own (`read_file`),
mounted MCP servers' (`NAME__TOOL`) and trusted peers' (`ALIAS__TOOL`). Their
names come from elsewhere (a third-party server, a peer) and may break the rule
or collide, so `offer` maps each to a public name:

1. characters outside the rule become `_` (an empty name becomes `tool`);
2. a name over 64 characters keeps its first 57 and gets `-` + 6 hex digits of
   the SHA-256 of the original qualified name;
3. collisions are settled in a fixed order (local, then mounted, then peers;
   within a kind by qualified name): the first keeps the name, each later one
   gets the hash suffix of step 2 (then `-2`, `-3`... in the unlikely case that
   collides too).

The same inputs always give the same names, whatever order they came in; every
renamed tool yields one note saying what became of it and why.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

MAX_NAME_CHARS = 64
SEPARATOR = "__"
VALID_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_INVALID_CHAR = re.compile(r"[^A-Za-z0-9_.-]")
_HASH_CHARS = 6

Kind = Literal["local", "mcp", "peer"]
_KIND_ORDER: dict[str, int] = {"local": 0, "mcp": 1, "peer": 2}


@dataclass(frozen=True)
class Candidate:
    """A tool to offer: its `kind`, its `owner` (server name or peer alias, None for
    a local tool), its own `tool` name there, and its MCP `spec` (`name` is replaced)."""

    kind: Kind
    owner: str | None
    tool: str
    spec: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def qualified(self) -> str:
        """The name it would have if nothing were wrong with it: `tool` or `OWNER__TOOL`."""
        return self.tool if self.owner is None else f"{self.owner}{SEPARATOR}{self.tool}"

    def describe(self) -> str:
        """Who it is, for a note: "local tool 'x'", "tool 'x' of peer bob", ..."""
        if self.kind == "local":
            return f"local tool {self.tool!r}"
        where = "MCP server" if self.kind == "mcp" else "peer"
        return f"tool {self.tool!r} of {where} {self.owner}"


@dataclass(frozen=True)
class Offered:
    """One tool under its public `name`, and the `candidate` it stands for."""

    name: str
    candidate: Candidate


@dataclass(frozen=True)
class Naming:
    """The public names of a set of tools, and one note per tool that was renamed."""

    tools: tuple[Offered, ...] = ()
    notes: tuple[str, ...] = ()

    def find(self, name: str) -> Offered | None:
        """The tool offered as `name`, or None."""
        for offered in self.tools:
            if offered.name == name:
                return offered
        return None

    def specs(self) -> list[dict[str, Any]]:
        """MCP `tools/list` items under the public names, in the order offered."""
        return [{**o.candidate.spec, "name": o.name} for o in self.tools]


def is_valid(name: str) -> bool:
    """True when `name` follows MCP's rule and fits `MAX_NAME_CHARS`."""
    return bool(VALID_NAME.match(name)) and len(name) <= MAX_NAME_CHARS


def _suffixed(base: str, qualified: str, attempt: int = 0) -> str:
    digest = hashlib.sha256(qualified.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    suffix = f"-{digest}" if attempt == 0 else f"-{digest}-{attempt + 1}"
    return base[: MAX_NAME_CHARS - len(suffix)] + suffix


def _clean(qualified: str) -> tuple[str, list[str]]:
    """The name after steps 1 and 2, and the reasons it differs from `qualified`."""
    reasons = []
    name = _INVALID_CHAR.sub("_", qualified) or "tool"
    if name != qualified:
        reasons.append("characters MCP does not allow replaced")
    if len(name) > MAX_NAME_CHARS:
        name = _suffixed(name, qualified)
        reasons.append(f"longer than {MAX_NAME_CHARS} characters, shortened")
    return name, reasons


def offer(candidates: Iterable[Candidate]) -> Naming:
    """Public names for `candidates` (see the module doc), listed in the order given;
    a repeated candidate (same kind, owner and tool) is offered once."""
    given = list(dict.fromkeys(candidates))
    ordered = sorted(given, key=lambda c: (_KIND_ORDER[c.kind], c.qualified, c.owner or ""))
    taken: dict[str, Candidate] = {}
    names: dict[Candidate, str] = {}
    notes: list[str] = []
    for candidate in ordered:
        name, reasons = _clean(candidate.qualified)
        if name in taken:
            reasons.append(f"its name is taken by the {taken[name].describe()}")
            base, attempt = name, 0
            while (name := _suffixed(base, candidate.qualified, attempt)) in taken:
                attempt += 1
        taken[name] = candidate
        names[candidate] = name
        if reasons:
            notes.append(f"{candidate.describe()} offered as {name!r}: {'; '.join(reasons)}")
    return Naming(tuple(Offered(names[c], c) for c in given), tuple(notes))
