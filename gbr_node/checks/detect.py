"""The `[checks]` that `gbr-node init` writes for a folder [pure].

`checks_block(markers, which)` looks at which project files the folder holds
(pyproject.toml, gleam.toml, package.json, Cargo.toml) and gives a commented
`[checks.NAME]` TOML block for each language found; a set is enabled only
when its programs are on PATH (`which(name)` says, as `shutil.which`), else
it is written commented out, saying what is missing. Never raises.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class _Language:
    """One language's check set: the project file that marks it, its set name, the files
    it covers, the formatter and check commands and the programs they need."""

    marker: str
    name: str
    files: tuple[str, ...]
    formatter: str | None
    check: str
    programs: tuple[str, ...]
    note: str


LANGUAGES = (
    _Language(
        "pyproject.toml",
        "python",
        ("**/*.py",),
        "ruff format --stdin-filename {path} -",
        "ruff check --quiet --output-format concise {path}",
        ("ruff",),
        "Python: ruff formats each file and checks it (syntax errors, lint rules).",
    ),
    _Language(
        "gleam.toml",
        "gleam",
        ("**/*.gleam",),
        "gleam format --stdin",
        "gleam check",
        ("gleam",),
        "Gleam: gleam format, then gleam check for the whole project.",
    ),
    _Language(
        "package.json",
        "typescript",
        ("**/*.ts", "**/*.tsx"),
        "prettier --stdin-filepath {path}",
        "tsc --noEmit --pretty false",
        ("prettier", "tsc"),
        "TypeScript: prettier formats, tsc type-checks the whole project.",
    ),
    _Language(
        "Cargo.toml",
        "rust",
        ("**/*.rs",),
        "rustfmt --emit stdout --edition 2021",
        "cargo check --quiet --message-format short",
        ("rustfmt", "cargo"),
        "Rust: rustfmt formats, cargo check compiles the whole crate.",
    ),
)

_PY_COMPILE = "python3 -m py_compile {path}"
"""Python without ruff: a syntax check from the standard library (no formatter)."""

HEADER = """
# Write checks (docs/guide/checks.md): after the agent changes files a set covers,
# its formatter runs on the new content before it is saved (only on new files
# and files it already leaves unchanged), and its check runs before the model
# is asked again; errors the turn added go back to the model until the check
# passes or max_retries is spent. Written by `gbr-node init` for what it found
# here; a set is commented out when its programs are not on PATH.
"""


def _block(language: _Language, found: Callable[[str], bool]) -> str:
    missing = [p for p in language.programs if not found(p)]
    formatter, check = language.formatter, language.check
    if language.name == "python" and missing and found("python3"):
        formatter, check, missing = None, _PY_COMPILE, []
        note = "Python: ruff is not on PATH, so a syntax check only (pip install ruff for more)."
    else:
        note = language.note
    lines = [f"# {note}"]
    if missing:
        lines.append(f"# Not enabled: {', '.join(missing)} not found on PATH.")
    body = [f"[checks.{language.name}]"]
    body.append("files = [" + ", ".join(f'"{glob}"' for glob in language.files) + "]")
    if formatter is not None:
        body.append(f'formatter = "{formatter}"')
    body += [f'check = "{check}"', "timeout_s = 30.0", "max_retries = 3"]
    lines += [f"# {line}" if missing else line for line in body]
    return "\n".join(lines)


def checks_block(
    markers: Collection[str],
    which: Callable[[str], str | None],
    skip: Collection[str] = (),
) -> str:
    """The `[checks]` TOML text for a folder holding the files `markers` (names), ""
    when it holds none of the known project files; sets named in `skip` (already in a
    profile) are left out."""
    blocks = [
        _block(language, lambda name: which(name) is not None)
        for language in LANGUAGES
        if language.marker in markers and language.name not in skip
    ]
    return HEADER + "\n" + "\n\n".join(blocks) + "\n" if blocks else ""
