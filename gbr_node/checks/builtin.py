"""The built-in check: does a written file still parse? [pure] (GBR-TRUTH-01, UNW-AI-01).

With no tool installed, the node can tell whether a Python, JSON, TOML or INI
file parses, with the standard library alone: `compile` of the source,
`json.loads`, `tomllib.loads`, `configparser.ConfigParser.read_string`. After
write_file or edit_file (`tools.files`), `breakage(relative, before, after)`
says whether the change broke the file: a file that parsed before and does not
parse after, or a new file that does not parse. A file that did not parse
before the write (legacy breakage) is never blamed on it. The tool's result is
then an error the model sees (`app.py no longer parses: line 3: '(' was never
closed`); the agent's machine retries it silently like a `[checks.NAME]`
failure, at most `BUILTIN_MAX_RETRIES` times a turn.

This is the default check; a profile turns it off with `[checks] builtin =
false` (`config.profile.Profile.builtin_checks`).
"""

from __future__ import annotations

import configparser
import json
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

Kind = Literal["python", "json", "toml", "ini"]

KINDS: dict[str, Kind] = {
    ".py": "python",
    ".pyi": "python",
    ".json": "json",
    ".toml": "toml",
    ".ini": "ini",
}
"""File suffix (lower case) -> the kind of parse the built-in check does."""
BUILTIN_MAX_RETRIES = 3
"""How many times a turn's broken files go back to the model (as `[checks.NAME]`'s default)."""

_INI_PLACE = re.compile(r"^\[line\s+\d+\]:\s*")
_TOML_PLACE = re.compile(r"\s*\(at line (\d+), column \d+\)$")


@dataclass(frozen=True)
class Breakage:
    """A write that left the root-relative file `path` unparsable as `kind`.

    `error` is the parser's complaint (`line 3: '(' was never closed`); `new`
    is True when the file did not exist before. `text` is the line the model
    and the person are shown.
    """

    path: str
    kind: Kind
    error: str
    new: bool

    @property
    def text(self) -> str:
        """`app.py no longer parses: line 3: ...` (`does not parse` for a new file)."""
        said = "does not parse" if self.new else "no longer parses"
        return f"{self.path} {said}: {self.error}"

    def summary(self) -> dict[str, str]:
        """The machine-readable form a tool result carries as `structured["parse"]`:
        `{"status": "broken", "kind", "path", "error"}`."""
        return {"status": "broken", "kind": self.kind, "path": self.path, "error": self.error}


def kind_of(relative: str) -> Kind | None:
    """The parse the built-in check does for the file named `relative`, by its suffix
    (case-insensitive), or None when it has none."""
    name = relative.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return KINDS.get(name[dot:].lower()) if dot > 0 else None


def parse_error(kind: Kind, text: str) -> str | None:
    """Why `text` does not parse as `kind`, as `line N: message`, or None when it
    parses. Never raises. Python's compile warnings (invalid escapes) are not shown."""
    try:
        if kind == "python":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(text, "<file>", "exec", dont_inherit=True)
        elif kind == "json":
            json.loads(text)
        elif kind == "toml":
            tomllib.loads(text)
        else:
            configparser.ConfigParser(interpolation=None).read_string(text)
    except SyntaxError as exc:
        return _at(exc.lineno, exc.msg)
    except json.JSONDecodeError as exc:
        return _at(exc.lineno, f"{exc.msg} (column {exc.colno})")
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        place = _TOML_PLACE.search(message)
        return _at(int(place[1]) if place else None, _TOML_PLACE.sub("", message))
    except configparser.Error as exc:
        return _ini_error(exc)
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, nesting too deep
        return _at(None, str(exc) or type(exc).__name__)
    return None


def breakage(relative: str, before: str | None, after: str) -> Breakage | None:
    """Whether writing `after` to `relative`, which held `before` (None: a new file),
    broke it: a Breakage when `after` does not parse and `before` did (or there was
    no file); None otherwise, and always None for a kind the check does not know."""
    kind = kind_of(relative)
    if kind is None:
        return None
    error = parse_error(kind, after)
    if error is None or (before is not None and parse_error(kind, before) is not None):
        return None
    return Breakage(relative, kind, error, before is None)


def _at(line: int | None, message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else "cannot be parsed"
    return f"line {line}: {first}" if line else first


def _ini_error(exc: configparser.Error) -> str:
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return _at(exc.lineno, "a [section] header must come first")
    if isinstance(exc, configparser.ParsingError) and exc.errors:
        where, content = exc.errors[0]
        return _at(where, f"not a key = value line: {content}")
    line = getattr(exc, "lineno", None)
    message = _INI_PLACE.sub("", exc.message.replace("While reading from '<string>' ", ""))
    return _at(line if isinstance(line, int) else None, message)
