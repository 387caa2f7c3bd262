"""Extra source folders of other ecosystems, read as plain text (issue 18, `[library] sources`).

A source folder holds one package per sub-folder, as Gleam's `build/packages/`
and npm's `node_modules/` (with `@scope/name` folders) do. A package's
version comes from its `package.json`, `gleam.toml` or `Cargo.toml` when it
has one. Definitions are found line by line (`definitions`, pure): `pub fn
name(`, `export function name(`, `class Name`, `def name(`, ... with the
comment lines just above as their doc. Its fingerprint covers the sizes and
times of its files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from gbr_node.library.environments import Distribution, Installed, walk_files
from gbr_node.library.extract import Definition, first_paragraph

TEXT_SUFFIXES = (
    ".gleam", ".erl", ".ex", ".exs", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".rs",
    ".go", ".rb", ".lua", ".java", ".kt", ".swift", ".c", ".h", ".hpp", ".cpp",
)  # fmt: skip
MAX_PACKAGE_FILES = 2_000
MAX_FILE_BYTES = 1024 * 1024
SKIPPED = frozenset({".git", "node_modules", "build", "dist", "_build", "target", "test", "tests"})
_DEFINITION = re.compile(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:pub(?:\([a-z]+\))?\s+)?(?:public\s+|static\s+)*"
    r"(?:async\s+)?(?P<kind>fn|func|function\*?|def|defp|class|interface|type|struct|enum|trait"
    r"|const|let|var|module|defmodule|opaque\s+type)\s+(?P<name>[A-Za-z_$][\w$.]*)"
    r"(?P<rest>.*)$"
)
_COMMENT = re.compile(r"^\s*(?://+|#+|--+|%+|\*|/\*\*?|\*/)\s?(?P<text>.*?)\s*(?:\*/)?$")
_VERSION = re.compile(r'^\s*version\s*=\s*"([^"]+)"', re.MULTILINE)


def definitions(text: str) -> list[Definition]:
    """The definitions a plain-text source file shows at the start of a line, pure.

    Kind is the keyword read (`fn`, `class`, ...); signature is the rest of
    the line (cut at 200 characters); doc is the comment block just above.
    """
    found = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        match = _DEFINITION.match(line)
        if not match:
            continue
        comments: list[str] = []
        above = number - 2
        while above >= 0 and (comment := _COMMENT.match(lines[above])):
            comments.insert(0, comment.group("text"))
            above -= 1
        kind = match.group("kind").split()[-1].rstrip("*")
        rest = match.group("rest").strip().rstrip("{").strip()[:200]
        found.append(
            Definition(
                kind,
                match.group("name"),
                rest,
                first_paragraph("\n".join(comments)),
                number,
                number,
            )
        )
    return found


def _version(package: Path) -> str:
    try:
        return str(json.loads((package / "package.json").read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for name in ("gleam.toml", "Cargo.toml"):
        try:
            found = _VERSION.search((package / name).read_text(encoding="utf-8"))
        except OSError:
            continue
        if found:
            return found.group(1)
    return ""


def _files(package: Path) -> list[tuple[str, os.stat_result]]:
    out = []
    for entry in walk_files(package, TEXT_SUFFIXES, SKIPPED, MAX_PACKAGE_FILES):
        st = entry.stat()
        if st.st_size <= MAX_FILE_BYTES:
            out.append((Path(entry.path).relative_to(package.parent).as_posix(), st))
    return out


def _packages(folder: Path) -> list[Path]:
    try:
        children = sorted(
            p
            for p in folder.iterdir()
            if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
        )
    except OSError:
        return []
    out = []
    for child in children:
        if child.name.startswith("@"):
            out.extend(sorted(p for p in child.iterdir() if p.is_dir() and not p.is_symlink()))
        else:
            out.append(child)
    return out


def scan_sources(folders: Iterable[Path]) -> list[Installed]:
    """Every package of the extra source folders, read (`Installed.source`)."""
    found = []
    for folder in folders:
        for package in _packages(folder):
            files = _files(package)
            if not files:
                continue
            digest = hashlib.blake2b(digest_size=16)
            for rel, st in files:
                digest.update(f"{rel}:{st.st_size}:{st.st_mtime_ns};".encode())
            name = package.relative_to(folder).as_posix()
            dist = Distribution(name, _version(package), package.parent, tuple(r for r, _ in files))
            found.append(Installed(package, folder, "t" + digest.hexdigest(), False, dist))
    return found
