"""Profile text -> `Profile`, with errors a person can act on (UBQ-AI-02) [pure].

No files are read here: the loader reads them and hands the text over. Every
failure is a `ProfileError` whose fields point at the first problem in file
order (`file`, `line`, `column` for TOML/JSON syntax errors, `key` as a dotted
path); its message says what was expected in plain words, with no pydantic
internals or URLs. Validation problems are all reported at once: sorted by
line, the first fills the fields and opens the message, each other one adds
a line "  also line N [key]: ...". `str(error)` then reads:

    .gbr_envs/default.toml:4 [tools.read_max_bytes]: must be greater than 0, got the number -1
      also line 9 [sytem_prompt]: unknown key "sytem_prompt" (did you mean "system_prompt"?); ...

Syntax errors stop at the first one (tomllib and json report only that).

Unknown keys are errors (STYLE.md "Configuration": `extra="forbid"`) and, when
a known key is close enough (difflib), the message suggests it.

`validate_network` validates only `[node]` and `[peers]`, for `gbr-node call`;
`config.profile`'s models are imported only by `validate_text`, so that call
does not build them (issue 35).
"""

from __future__ import annotations

import difflib
import json
import re
import sys
import types
import typing
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError

from gbr_node.config.keylines import format_key, key_line
from gbr_node.config.network import NetworkSections
from gbr_node.config.patterns import (
    DIAL_MULTIADDR,
    LOOPBACK_URL,
    MCP_SERVER_NAME,
    PEER_ADDR,
    PEER_ID,
    RELAY_MULTIADDR,
    TABLE_NAME,
    TCP_MULTIADDR,
)
from gbr_node.errors import ProfileError

if TYPE_CHECKING:
    from gbr_node.config.profile import Profile

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_TOML_AT_END = re.compile(r"\s*\(at end of document\)\s*$")

# Field patterns of the models (config.patterns, and literal ones), said in words.
_PATTERN_WORDS = {
    TABLE_NAME: "only letters, digits, '_' and '-'",
    r"^[^/\\\x00]+$": "a bare program name, without '/' or '\\'",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "an environment variable name (letters, digits, '_')",
    TCP_MULTIADDR: "a TCP multiaddr such as /ip4/127.0.0.1/tcp/4001",
    DIAL_MULTIADDR: "a TCP multiaddr such as /ip4/192.168.1.20/tcp/4001 (optionally /p2p/ID)",
    RELAY_MULTIADDR: (
        "a relay's TCP multiaddr with its peer ID, such as /ip4/203.0.113.7/tcp/4001/p2p/ID"
    ),
    PEER_ADDR: (
        "a TCP multiaddr such as /ip4/192.168.1.20/tcp/4001 (optionally /p2p/ID), "
        "or a relayed one, RELAY/p2p-circuit"
    ),
    PEER_ID: "a peer ID as `gbr-node id` prints it (12D3KooW...)",
    MCP_SERVER_NAME: "letters and digits, with single '_' or '-' between them (never '__')",
    LOOPBACK_URL: "an http:// URL on this machine (127.x.x.x, localhost or [::1])",
}
_BOUNDS = {
    "greater_than": ("gt", "greater than"),
    "greater_than_equal": ("ge", "at least"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "at most"),
}


def decode(text: str, *, file: str, fmt: str = "toml") -> dict[str, Any]:
    """Parse profile text (`fmt` "toml" or "json") into a dict.

    Raises ProfileError with the line and column of a syntax error, or when a
    JSON document is not an object. TOML is TOML 1.0 (tomllib).
    """
    if fmt == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProfileError(
                f"not valid JSON: {exc.msg}", file=file, line=exc.lineno, column=exc.colno
            ) from exc
        if not isinstance(data, dict):
            raise ProfileError("a JSON profile must be an object {...}", file=file, line=1)
        return data
    if fmt != "toml":
        raise ProfileError(f'unknown profile format "{fmt}"; expected "toml" or "json"', file=file)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        line = column = None
        if match := _TOML_POSITION.search(message):
            line, column = int(match.group(1)), int(match.group(2))
            message = message[: match.start()]
        elif match := _TOML_AT_END.search(message):
            lines = text.splitlines() or [""]
            line, column = len(lines), len(lines[-1]) + 1
            message = message[: match.start()] + " at the end of the file"
        raise ProfileError(
            f"not valid TOML: {message}", file=file, line=line, column=column
        ) from exc


def validate_text(text: str, *, file: str, fmt: str = "toml") -> Profile:
    """Decode and validate one profile document; `file` is used in errors only.

    Raises ProfileError (see the module docstring for its shape) on syntax
    errors, invalid or unknown keys, when both `system_prompt` and
    `system_prompt_file` are set, and for a document with no settings at all
    (empty, blank, comments or empty tables only: a save cut after `[tools]`):
    a truncated save must never put the built-in defaults in force
    (GBR-FAIL-01).
    """
    from gbr_node.config.profile import Profile  # every section's model (see validate_network)

    data = _decode_settings(text, file=file, fmt=fmt)
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise _translate(exc, data, Profile, text=text, file=file, fmt=fmt) from exc
    if "system_prompt" in profile.model_fields_set and profile.system_prompt_file is not None:
        raise ProfileError(
            "set either system_prompt or system_prompt_file, not both",
            file=file,
            line=key_line(text, ("system_prompt_file",), fmt),
            key="system_prompt_file",
        )
    return profile


def validate_network(text: str, *, file: str, fmt: str = "toml") -> NetworkSections:
    """Decode one profile document and validate its `[node]` and `[peers]` only
    (`config.network.NetworkSections`), for one-shot commands that use nothing else.

    The document must parse and hold a setting, as for `validate_text`, and these
    two sections are validated in full, with the same `ProfileError`s
    (`validate_text` gives the same message, line and key for a problem in
    them). The other sections are not validated: the command applies none of
    their rules, and building their models would add ~10 ms to its start
    (issue 35). `serve` and `run` validate the whole profile.

    Raises ProfileError as `validate_text` does, for these sections only.
    """
    data = _decode_settings(text, file=file, fmt=fmt)
    try:
        return NetworkSections.model_validate(data)
    except ValidationError as exc:
        raise _translate(exc, data, NetworkSections, text=text, file=file, fmt=fmt) from exc


def _decode_settings(text: str, *, file: str, fmt: str = "toml") -> dict[str, Any]:
    """`decode`, and a ProfileError for a document with no settings at all (see
    `validate_text`: GBR-FAIL-01)."""
    data = decode(text, file=file, fmt=fmt)
    if not _holds_a_setting(data):
        raise ProfileError(
            "the profile holds no settings (the file is empty, blank, only comments or only "
            "table headers such as [tools]); "
            "an empty profile is refused so that a truncated save never puts the built-in "
            "defaults in force",
            file=file,
        )
    return data


def _holds_a_setting(data: object) -> bool:
    """True when `data` (a decoded document) has a value that is not a table, at any depth."""
    if isinstance(data, dict):
        return any(_holds_a_setting(value) for value in data.values())
    return True


def _translate(
    exc: ValidationError,
    data: dict[str, Any],
    root: type[BaseModel],
    *,
    text: str,
    file: str,
    fmt: str,
) -> ProfileError:
    """`exc`, raised validating `data` as `root`, as one ProfileError (module docstring)."""
    problems: dict[tuple[tuple[str | int, ...], str], int | None] = {}
    for error in exc.errors():
        loc, message = _describe_error(error, data, root)
        problems.setdefault((loc, message), key_line(text, loc, fmt))
    ordered = sorted(problems.items(), key=lambda item: (item[1] is None, item[1] or 0))
    (first_loc, first_message), first_line = ordered[0]
    message = first_message
    for (loc, text_), line in ordered[1:]:
        where = f"line {line} " if line is not None else ""
        message += f"\n  also {where}[{format_key(loc)}]: {text_}"
    return ProfileError(message, file=file, line=first_line, key=format_key(first_loc) or None)


def _describe_error(
    error: Any, data: dict[str, Any], root: type[BaseModel]
) -> tuple[tuple[str | int, ...], str]:
    """One pydantic error of validating `data` as `root` -> (clean key path, plain words)."""
    kind, ctx = error["type"], error.get("ctx") or {}
    walk = _Walk(error["loc"], root)
    loc = walk.loc
    if walk.union_at is not None:
        loc = loc[: walk.union_at]
        value = _value_at(data, loc)
        return loc, f"expected {_expected(walk.union_type)}, got {_shown(value)}"
    value = error["input"]
    if kind == "extra_forbidden":
        return loc, _unknown_key(str(loc[-1]), walk.parent)
    if kind == "missing":
        return loc, "required key is missing"
    if walk.is_key:
        return loc, f'table name "{loc[-1]}" must use {_pattern(ctx)}'
    if kind == "string_pattern_mismatch":
        return loc, f"expected {_pattern(ctx)}, got {_shown(value)}"
    if kind in _BOUNDS:
        name, words = _BOUNDS[kind]
        return loc, f"must be {words} {ctx[name]}, got {_shown(value)}"
    if kind == "string_too_short":
        return loc, "must not be empty"
    if kind == "value_error":
        return loc, str(ctx.get("error", error["msg"]))
    if kind.endswith(("_type", "_parsing")) or kind == "int_from_float":
        return loc, f"expected {_expected(walk.target)}, got {_shown(value)}"
    return loc, f"{error['msg']}, got {_shown(value)}"


class _Walk:
    """Follow a pydantic error location through the type annotations of `root` (`Profile`).

    Drops pydantic's union-member tags and its "[key]" marker from the path,
    and records the model that owns the last key (for suggestions), the type
    expected at the end, and where a union started (its errors are merged).
    """

    def __init__(self, raw: tuple[str | int, ...], root: type[BaseModel]) -> None:
        self.parent: type[BaseModel] | None = None
        self.target: Any = root
        self.union_at: int | None = None
        self.union_type: Any = None
        self.is_key = False
        clean: list[str | int] = []
        for part in raw:
            if part == "[key]":
                self.is_key = True
                continue
            target = _strip(self.target)
            if _union_members(target):
                if self.union_at is None:
                    self.union_at, self.union_type = len(clean), target
                self.target = None
                continue
            clean.append(part)
            self.target = _step(target, part, self)
        self.loc = tuple(clean)


def _step(target: Any, part: str | int, walk: _Walk) -> Any:
    if isinstance(target, type) and issubclass(target, BaseModel):
        walk.parent = target
        field = target.model_fields.get(str(part))
        return field.annotation if field is not None else None
    origin, args = typing.get_origin(target), typing.get_args(target)
    if origin in (tuple, list) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def _strip(target: Any) -> Any:
    """Drop Annotated[...] and an Optional's None."""
    while typing.get_origin(target) is typing.Annotated:
        target = typing.get_args(target)[0]
    members = _union_args(target)
    if members is not None:
        rest = [m for m in members if m is not type(None)]
        if len(rest) == 1:
            return _strip(rest[0])
    return target


def _union_args(target: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(target)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(target)
    return None


def _union_members(target: Any) -> tuple[Any, ...]:
    members = _union_args(target)
    return tuple(m for m in members if m is not type(None)) if members else ()


def _expected(target: Any) -> str:
    """A type annotation in TOML words: "a whole number", "an array of strings", ..."""
    target = _strip(target)
    if members := _union_members(target):
        return " or ".join(_expected(m) for m in members)
    origin, args = typing.get_origin(target), typing.get_args(target)
    if origin is Literal:
        return " or ".join(json.dumps(a) for a in args)
    if origin in (tuple, list):
        inner = _expected(args[0]) if args else "values"
        return f"an array of {_plural(inner)}"
    if origin is dict:
        return f"a table of {_plural(_expected(args[1]))}" if len(args) == 2 else "a table"
    if isinstance(target, type) and issubclass(target, BaseModel):
        return f"a table with keys {', '.join(target.model_fields)}"
    names = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}
    return names.get(target, "a value of another type")


def _plural(words: str) -> str:
    plurals = {"a string": "strings", "a whole number": "whole numbers", "a number": "numbers"}
    if words in plurals:
        return plurals[words]
    if words.startswith("a table with keys"):
        return "tables with keys" + words[len("a table with keys") :]
    return words


def _shown(value: Any) -> str:
    """A value as it looks in the file, shortened; its kind in words for clarity."""
    kinds = {bool: "", str: "the string ", int: "the number ", float: "the number "}
    prefix = (
        "a table " if isinstance(value, dict) else "an array " if isinstance(value, list) else ""
    )
    prefix = kinds.get(type(value), prefix)
    try:
        shown = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:
        shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return prefix + shown


def _pattern(ctx: dict[str, Any]) -> str:
    pattern = str(ctx.get("pattern", ""))
    return _PATTERN_WORDS.get(pattern, f"text matching the pattern {pattern}")


def _unknown_key(key: str, owner: type[BaseModel] | None) -> str:
    message = f'unknown key "{key}"'
    if owner is None:
        return message
    known = list(owner.model_fields)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if not close:
        lowered = {name.lower(): name for name in known}
        close = [lowered[k] for k in difflib.get_close_matches(key.lower(), lowered, n=1)]
    if close:
        message += f' (did you mean "{close[0]}"?)'
    return f"{message}; known keys here: {', '.join(known)}"


def _value_at(data: Any, loc: tuple[str | int, ...]) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data
