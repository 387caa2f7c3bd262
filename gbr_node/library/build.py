"""One distribution's files turned into index rows (issue 18, "The index").

Each source file is read and parsed with `ast` (never imported); a file that
cannot be read or parsed is skipped, alone, and named in `Built.skipped`.
When a module has both a `.py` and a `.pyi` file the `.py` is used (it has the
docstrings and the code `read_library` shows); a `.pyi` with no `.py` beside
it (a compiled module's stub, a `-stubs` package) is indexed as the module.
Re-exports are followed across the distribution (`exports.public_paths`), so
each definition is shown under its best public path.

Rank factors: a public definition 1.0; one with no public path (a `_` part)
PRIVATE_FACTOR; under tests or a vendored copy TESTS_FACTOR. They lower a
hit's score, never remove it. A stub-only package (`trio-stubs/`) STUBS_FACTOR:
the real package, when installed too, is the truer source.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from gbr_node.library.environments import Distribution
from gbr_node.library.exports import is_private_path, public_paths
from gbr_node.library.extract import Definition, ModuleInfo, parse_module
from gbr_node.library.sources import definitions as text_definitions

PRIVATE_FACTOR = 0.6
TESTS_FACTOR = 0.35
STUBS_FACTOR = 0.8
MAX_FILE_BYTES = 4 * 1024 * 1024
TEST_PARTS = frozenset({"tests", "test", "testsuite", "conftest"})
VENDORED_PARTS = frozenset({"_vendor", "vendor", "vendored", "_vendored", "extern", "_extern"})


@dataclass(frozen=True)
class Row:
    """One definition to index: `qualname` is the best path, `aliases` all of
    them (best first); `file` is relative to the distribution's base."""

    qualname: str
    aliases: tuple[str, ...]
    kind: str
    signature: str
    bases: str
    doc: str
    file: str
    line: int
    end_line: int
    factor: float
    params: str = ""

    @property
    def name(self) -> str:
        return self.qualname.rpartition(".")[2]


@dataclass
class Built:
    """The rows of one distribution, its top-level import names, and the files
    skipped with the reason (`"path: SyntaxError line 3"`)."""

    rows: list[Row] = field(default_factory=list)
    top_level: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def module_name(path: str) -> tuple[str, bool] | None:
    """(dotted module name, is_package) of a source path like `httpx/_api.py`,
    or None when the path is no importable module (`foo-1.0.data/...`).
    `requests-stubs/api.pyi` is module `requests.api` (PEP 561)."""
    parts = path.split("/")
    stem, _, _ = parts[-1].rpartition(".")
    parts[-1] = stem
    if parts[0].endswith("-stubs"):
        parts[0] = parts[0][: -len("-stubs")]
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts), is_package


def _factor(path: str, file: str) -> float:
    parts = set(path.split(".")) | set(file.split("/"))
    if parts & VENDORED_PARTS or parts & TEST_PARTS or any(p.startswith("test_") for p in parts):
        return TESTS_FACTOR
    factor = PRIVATE_FACTOR if is_private_path(path) else 1.0
    return factor * STUBS_FACTOR if file.split("/")[0].endswith("-stubs") else factor


def _sources(dist: Distribution) -> dict[str, tuple[str, bool]]:
    """module -> (file, is_package), preferring `.py` over `.pyi`."""
    chosen: dict[str, tuple[str, bool]] = {}
    for file in dist.files:
        named = module_name(file)
        if named is None:
            continue
        module, is_package = named
        if module in chosen and not chosen[module][0].endswith(".pyi"):
            continue
        chosen[module] = (file, is_package)
    return chosen


def build_distribution(dist: Distribution) -> Built:
    """Parse every module of `dist` and give its index rows. Never raises for
    a bad file: unreadable, oversized (MAX_FILE_BYTES) and unparsable files are
    skipped and listed in `skipped`. Files that are not Python (an extra
    source folder's) are read as plain text (`sources.definitions`)."""
    built = Built()
    if not any(f.endswith((".py", ".pyi")) for f in dist.files):
        return _build_text(dist, built)
    modules: dict[str, ModuleInfo] = {}
    files: dict[str, str] = {}
    for module, (file, is_package) in sorted(_sources(dist).items()):
        path = dist.base / file
        try:
            if os.path.getsize(path) > MAX_FILE_BYTES:
                built.skipped.append(f"{file}: over {MAX_FILE_BYTES} bytes")
                continue
            source = Path(path).read_bytes()
            modules[module] = parse_module(source, module, is_package=is_package)
        except OSError as exc:
            built.skipped.append(f"{file}: {exc.strerror or exc}")
            continue
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            where = f" line {exc.lineno}" if isinstance(exc, SyntaxError) and exc.lineno else ""
            built.skipped.append(f"{file}: {type(exc).__name__}{where}")
            continue
        files[module] = file
    built.top_level = sorted({m.split(".")[0] for m in modules})
    paths = public_paths(modules)
    for module, info in modules.items():
        file = files[module]
        for definition in info.definitions:
            built.rows.append(_row(module, definition, paths, file))
    return built


def _row(module: str, definition: Definition, paths: dict, file: str) -> Row:
    top, _, rest = definition.local.partition(".")
    prefixes = paths.get((module, top), [module if not top else f"{module}.{top}"])
    aliases = tuple(f"{p}.{rest}" if rest else p for p in prefixes)
    return Row(
        aliases[0],
        aliases,
        definition.kind,
        definition.signature,
        definition.bases,
        definition.doc,
        file,
        definition.line,
        definition.end_line,
        _factor(aliases[0], file),
        definition.params,
    )


def _build_text(dist: Distribution, built: Built) -> Built:
    built.top_level = [dist.name]
    for file in dist.files:
        try:
            text = (dist.base / file).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            built.skipped.append(f"{file}: {exc.strerror or exc}")
            continue
        module = file.rpartition(".")[0]
        for definition in text_definitions(text):
            path = f"{module}.{definition.local}"
            built.rows.append(
                Row(
                    path,
                    (path,),
                    definition.kind,
                    definition.signature,
                    "",
                    definition.doc,
                    file,
                    definition.line,
                    definition.end_line,
                    _factor(path.replace("/", "."), file),
                )
            )
    return built
