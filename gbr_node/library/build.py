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
hit's score, never remove it. Legacy code (a `v1`, `deprecated`, `compat`
module, or a docstring that starts "Deprecated") LEGACY_FACTOR: a person
asking wants today's API. A stub-only package (`trio-stubs/`) STUBS_FACTOR:
the real package, when installed too, is the truer source. A plain alias
(`Foo = _Foo`) ALIAS_FACTOR: the definition it names is the better hit (issue
33). Kinds weigh too
(KIND_PRIOR): what one calls or subclasses answers more questions than a data
field does. And so does use: a name the distribution's own code mentions
often (`Table` in rich, `Event` in trio) is more likely what a question is
after than one it never mentions again (`prominence`).
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from gbr_node.library.environments import Distribution
from gbr_node.library.exports import is_private_path, public_paths
from gbr_node.library.extract import Definition, ModuleInfo, parse_module
from gbr_node.library.sources import definitions as text_definitions
from gbr_node.library.words import split_compound

PRIVATE_FACTOR = 0.4
TESTS_FACTOR = 0.25
STUBS_FACTOR = 0.8
LEGACY_FACTOR = 0.5
LEGACY_PARTS = frozenset({"v1", "deprecated", "legacy", "compat", "_compat"})
USE_WEIGHT = 0.15
ALIAS_FACTOR = 0.5
_ALIAS = re.compile(r"^ = [A-Za-z_][A-Za-z0-9_.]*$")
"""`Foo = _Foo`, `get = client.get`: another name for a definition ranks below it."""
_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
KIND_PRIOR = {"method": 0.9, "property": 0.8, "module": 0.8}
KIND_PRIOR.update(dict.fromkeys(("attribute", "constant", "variable"), 0.6))
MAX_FILE_BYTES = 4 * 1024 * 1024
TEST_PARTS = frozenset({"tests", "test", "testsuite", "conftest"})
VENDORED_PARTS = frozenset({"_vendor", "vendor", "vendored", "_vendored", "extern", "_extern"})


class Row(NamedTuple):
    """One definition to index: `qualname` is the best path, `aliases` all of
    them (best first); `file` is relative to the distribution's base; `apart`
    the words of its module's compound names (`json schema` for `jsonschema`).
    A named tuple, cheap to make and to send back from a worker process."""

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
    apart: str = ""
    more: str = ""

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


def _factor(path: str, file: str, doc: str = "") -> float:
    parts = set(path.split(".")) | set(file.split("/"))
    if parts & VENDORED_PARTS or parts & TEST_PARTS or any(p.startswith("test_") for p in parts):
        return TESTS_FACTOR
    factor = PRIVATE_FACTOR if is_private_path(path) else 1.0
    if parts & LEGACY_PARTS or doc.lower().startswith("deprecated"):
        factor *= LEGACY_FACTOR
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
    mentions: Counter[bytes] = Counter()
    for module, (file, is_package) in sorted(_sources(dist).items()):
        path = dist.base / file
        real = os.path.realpath(path)
        if not real.startswith(os.path.realpath(dist.base).rstrip(os.sep) + os.sep):
            built.skipped.append(f"{file}: resolves outside {dist.base}")  # GBR-PRIV-01
            continue
        try:
            if os.path.getsize(path) > MAX_FILE_BYTES:
                built.skipped.append(f"{file}: over {MAX_FILE_BYTES} bytes")
                continue
            source = Path(path).read_bytes()
            modules[module] = parse_module(source, module, is_package=is_package)
            mentions.update(_IDENTIFIER.findall(source))
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
    # the words the code itself uses: what compound module names are split into
    vocabulary = {w.decode().lower() for w in mentions if w.isalpha()}
    compounds = {
        part: split_compound(part, vocabulary) for module in modules for part in module.split(".")
    }
    for module, info in modules.items():
        file = files[module]
        apart = " ".join(w for part in module.split(".") for w in compounds[part])
        for definition in info.definitions:
            uses = mentions[definition.name.encode()] - 1
            built.rows.append(_row(module, definition, paths, file, prominence(uses), apart))
    return built


def prominence(uses: int) -> float:
    """The rank factor of a definition its distribution's code mentions `uses`
    times besides its own definition: 1 + USE_WEIGHT x ln(1 + uses)."""
    return 1.0 + USE_WEIGHT * math.log1p(max(uses, 0))


def _row(
    module: str,
    definition: Definition,
    paths: dict[tuple[str, str], list[str]],
    file: str,
    weight: float,
    apart: str,
) -> Row:
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
        _factor(aliases[0], file, definition.doc)
        * KIND_PRIOR.get(definition.kind, 1.0)
        * weight
        * (ALIAS_FACTOR if _ALIAS.match(definition.signature) else 1.0),
        definition.params,
        apart,
        definition.more,
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
