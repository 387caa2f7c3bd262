"""The layering rule of docs/architecture.md ("Layers"), held on every run (issue 21).

Three import-linter contracts in pyproject.toml (`[tool.importlinter]`): the
layers import downward only, no import cycles at any depth, and the pure cores
import no I/O library, directly or through another module. import-linter sees
imports only; "the pure cores touch no filesystem" is checked here over their
`ast`: no `open()`, no `os` function, no concrete `pathlib.Path`.

Each contract is shown to bite: a copy of the package with one rule broken
(a table of breaks) must fail with that contract named.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gbr_node"
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "importlinter"
]
CONTRACTS = {contract["id"]: contract for contract in CONFIG["contracts"]}
PURE = CONTRACTS["pure"]["source_modules"]
LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(no_cache=True, no_logo=True))"
)


def lint(project: Path) -> tuple[int, set[str], str]:
    """Run import-linter on `project` (a folder with pyproject.toml and gbr_node/):
    (exit status, names of the broken contracts, the report)."""
    out = subprocess.run(
        [sys.executable, "-c", LINT], cwd=project, capture_output=True, text=True, timeout=300
    )
    report = out.stdout + out.stderr
    broken = {m.group(1) for m in re.finditer(r"^(.+) BROKEN$", report, re.MULTILINE)}
    return out.returncode, broken, report


def test_the_tree_keeps_every_import_contract() -> None:
    status, broken, report = lint(ROOT)
    assert (status, broken) == (0, set()), report
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in report


def namespace_folders(package: Path) -> list[str]:
    """Folders under `package` that hold Python modules but no `__init__.py`: grimp
    (import-linter's graph) leaves such a namespace package out, so no contract
    would hold it (checks/ had none and was missed by every contract)."""
    return sorted(
        str(folder.relative_to(package))
        for folder in [package, *(p for p in package.rglob("*") if p.is_dir())]
        if "__pycache__" not in folder.parts
        and any(folder.glob("*.py"))
        and not (folder / "__init__.py").exists()
    )


def test_every_folder_of_the_package_is_seen_by_the_contracts() -> None:
    assert namespace_folders(PACKAGE) == []


def test_a_folder_without_init_is_named(tmp_path: Path) -> None:
    (tmp_path / "part").mkdir()
    (tmp_path / "part" / "core.py").write_text("", encoding="utf-8")
    (tmp_path / "data").mkdir()  # no modules: not a package
    (tmp_path / "data" / "x.toml").write_text("", encoding="utf-8")
    (tmp_path / "__init__.py").write_text("", encoding="utf-8")
    assert namespace_folders(tmp_path) == ["part"]


TYPE_ONLY_CYCLE = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from gbr_node.approvals.apply import ApplyOutcome
"""

# (what is broken, the contract that must say so, file under gbr_node/ -> text appended)
BREAKS = [
    ("a pure core imports trio", "pure", {"agent/machine.py": "import trio\n"}),
    ("a pure core imports sqlite3", "pure", {"approvals/state.py": "import sqlite3\n"}),
    (
        "a pure core imports an I/O module of its own package",
        "pure",
        {"agent/session.py": "import gbr_node.agent.oracle\n"},
    ),
    (
        "a lower layer imports a higher one",
        "layers",
        {"sandbox/paths.py": "import gbr_node.node\n"},
    ),
    (
        "two sibling layers import each other",
        "layers",
        {"repl/commands.py": "import gbr_node.p2p.host\n"},
    ),
    ("a package no layer names", "layers", {"newpart/__init__.py": '"""New."""\n'}),
    (
        "a service imports another service",
        "services",
        {"agent/service.py": "import gbr_node.agent.model\n"},
    ),
    ("a cycle inside a package", "acyclic", {"rpc/codes.py": "import gbr_node.rpc.framing\n"}),
    ("a cycle through a type-only import", "acyclic", {"approvals/log.py": TYPE_ONLY_CYCLE}),
]


@pytest.mark.parametrize(
    ("contract", "edits"), [(c, e) for _, c, e in BREAKS], ids=[b[0] for b in BREAKS]
)
def test_each_contract_fails_when_its_rule_is_broken(
    tmp_path: Path, contract: str, edits: dict[str, str]
) -> None:
    shutil.copytree(PACKAGE, tmp_path / "gbr_node", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for relative, text in edits.items():
        path = tmp_path / "gbr_node" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(text)
    status, broken, report = lint(tmp_path)
    assert status != 0, report
    assert CONTRACTS[contract]["name"] in broken, report


# --- the pure cores touch no filesystem -------------------------------------------------

OS_NAMES_ALLOWED = {"name", "stat_result"}  # a platform name, a type: no filesystem call


def filesystem_uses(source: str) -> list[str]:
    """What in `source` reaches the filesystem: `open()`, an `os` name other than
    `OS_NAMES_ALLOWED`, `os.path`, or a `pathlib` name other than the Pure* classes."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "open":
                found.append("open()")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and node.attr not in OS_NAMES_ALLOWED:
                found.append(f"os.{node.attr}")
        elif isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name in ("pathlib", "os.path")]
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "os.path", "pathlib"):
            for alias in node.names:
                if node.module == "os" and alias.name in OS_NAMES_ALLOWED:
                    continue
                if node.module == "pathlib" and alias.name.startswith("Pure"):
                    continue
                found.append(f"{node.module}.{alias.name}")
    return found


FILESYSTEM_SNIPPETS = [
    "data = open('x').read()",
    "import os\nos.stat('x')",
    "import os\nos.listdir('.')",
    "import os.path\nos.path.exists('x')",
    "from os import stat",
    "from os.path import realpath",
    "import pathlib",
    "from pathlib import Path",
    "from pathlib import PurePath, Path",
]


@pytest.mark.parametrize("source", FILESYSTEM_SNIPPETS)
def test_the_filesystem_check_sees_each_way_in(source: str) -> None:
    assert filesystem_uses(source) != []


def test_the_filesystem_check_lets_lexical_paths_and_platform_names_pass() -> None:
    source = "import os\nfrom pathlib import PurePosixPath\nflavour = os.name\nt = os.stat_result"
    assert filesystem_uses(source) == []


@pytest.mark.parametrize("module", PURE)
def test_pure_core_touches_no_filesystem(module: str) -> None:
    path = ROOT / (module.replace(".", "/") + ".py")
    assert filesystem_uses(path.read_text(encoding="utf-8")) == []


def claims_pure(docstring: str) -> bool:
    """True when a module docstring says the module is pure: in its first line, or
    in a paragraph that starts with "Pure"."""
    first, *rest = docstring.split("\n\n")
    return bool(re.search(r"\bpure\b", first.splitlines()[0], re.IGNORECASE)) or any(
        p.lstrip().startswith("Pure") for p in rest
    )


def test_every_module_that_says_it_is_pure_is_held_by_the_pure_contract() -> None:
    claimed = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py":  # a package's docstring speaks of its modules
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        if doc and claims_pure(doc):
            claimed.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert len(claimed) > 20  # the check itself reads docstrings
    assert claimed - set(PURE) == set()


def test_claims_pure_reads_the_usual_phrasings() -> None:
    assert claims_pure("Path flavours per operating system: pure, no filesystem calls.")
    assert claims_pure("Decisions of hot reload [pure]: stat results in.")
    assert claims_pure("Length-prefixed frames.\n\nPure: bytes in, frames out.")
    assert not claims_pure("The sandbox.\n\n`resolve` runs the pure lexical policy first.")


# --- docs/architecture.md says what the contract says -----------------------------------


def test_the_architecture_page_shows_the_contracts_layers() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"```text layers\n(.*?)```", page, re.DOTALL)
    assert block is not None, "docs/architecture.md has no ```text layers block"
    shown = [line.strip() for line in block.group(1).splitlines() if line.strip()]
    assert shown == CONTRACTS["layers"]["layers"]


def test_the_architecture_page_names_every_part_of_the_package() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    parts = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    parts |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    missing = sorted(part for part in parts if not re.search(rf"`{part}(/|\.py)`", page))
    assert missing == [], textwrap.shorten(f"not described: {missing}", 200)
