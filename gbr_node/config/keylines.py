"""Where a key sits in a profile's text, for error messages (UBQ-AI-02) [pure].

tomllib and json give back plain dicts with no positions, yet a profile error
must name the line of the offending key. This module finds it again from the
text: a best-effort scan, not a second parser. It understands what profiles
use — `key = value` lines (dotted and quoted keys too), `[table]` and
`[[array.of.tables]]` headers, multi-line strings — and answers with the line
of the longest known prefix of the key, so an error deep inside an inline
table points at the line that opens it.

A key path ("loc") is a tuple of str (keys) and int (array indexes), as in
pydantic errors: `("tools", "run_command", "allow", 0, "name")`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

Loc = tuple[str | int, ...]

_BARE = r"[A-Za-z0-9_-]+"
_BASIC = r'"(?:[^"\\\n]|\\.)*"'
_LITERAL = r"'[^'\n]*'"
_PART = rf"(?:{_BARE}|{_BASIC}|{_LITERAL})"
_DOTTED = rf"{_PART}(?:[ \t]*\.[ \t]*{_PART})*"
_END = r"[ \t]*(?:#.*)?$"
_ARRAY_TABLE = re.compile(rf"^[ \t]*\[\[[ \t]*({_DOTTED})[ \t]*\]\]{_END}")
_TABLE = re.compile(rf"^[ \t]*\[[ \t]*({_DOTTED})[ \t]*\]{_END}")
_KEYVAL = re.compile(rf"^[ \t]*({_DOTTED})[ \t]*=")
_PART_RE = re.compile(_PART)
_BARE_RE = re.compile(_BARE)


def format_key(loc: Sequence[str | int]) -> str:
    """Render a key path the way a person writes it in TOML.

    `("tools", "run_command", "allow", 0, "name")` -> `tools.run_command.allow[0].name`;
    keys that are not bare TOML keys are quoted: `peers."a b"`. Empty path -> "".
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = part if _BARE_RE.fullmatch(part) else json.dumps(part)
        out += f".{text}" if out else text
    return out


def key_line(text: str, loc: Sequence[str | int], fmt: str = "toml") -> int | None:
    """1-based line of `loc` (or of its longest prefix found) in `text`, or None.

    `fmt` is "toml" or "json". Never raises: text it cannot follow gives None.
    """
    if fmt == "json":
        return _json_key_line(text, loc)
    index = _toml_key_index(text)
    for end in range(len(loc), 0, -1):
        line = index.get(tuple(loc[:end]))
        if line is not None:
            return line
    return None


def _split_dotted(dotted: str) -> tuple[str, ...]:
    parts = []
    for raw in _PART_RE.findall(dotted):
        if raw.startswith('"'):
            try:
                parts.append(json.loads(raw))
            except ValueError:
                parts.append(raw[1:-1])
        elif raw.startswith("'"):
            parts.append(raw[1:-1])
        else:
            parts.append(raw)
    return tuple(parts)


def _toml_key_index(text: str) -> dict[Loc, int]:
    """Map every key path declared in `text` to the 1-based line of its first mention."""
    index: dict[Loc, int] = {}
    counts: dict[Loc, int] = {}
    table: Loc = ()
    open_quote: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if open_quote is not None:
            if line.count(open_quote) % 2 == 1:
                open_quote = None
            continue
        if match := _ARRAY_TABLE.match(line):
            path = _split_dotted(match.group(1))
            position = counts.get(path, 0)
            counts[path] = position + 1
            index.setdefault(path, number)
            table = (*path, position)
            index.setdefault(table, number)
            continue
        if match := _TABLE.match(line):
            table = _split_dotted(match.group(1))
            index.setdefault(table, number)
            continue
        if match := _KEYVAL.match(line):
            key = _split_dotted(match.group(1))
            for end in range(1, len(key) + 1):
                index.setdefault((*table, *key[:end]), number)
            rest = line[match.end() :]
            for quote in ('"""', "'''"):
                if rest.count(quote) % 2 == 1:
                    open_quote = quote
                    break
    return index


def _json_key_line(text: str, loc: Sequence[str | int]) -> int | None:
    """Find each string key of `loc` in turn, each after the previous one."""
    position = 0
    found: int | None = None
    for part in loc:
        if isinstance(part, int):
            continue
        match = re.compile(re.escape(json.dumps(part)) + r"\s*:").search(text, position)
        if match is None:
            break
        position = match.start()
        found = position
    if found is None:
        return None
    return text.count("\n", 0, found) + 1
