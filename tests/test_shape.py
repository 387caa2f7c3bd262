"""The shape of the running node (issue 36, "one room per concern"): a thin
composition root, no class that owns everything, and a REPL whose command
table is assembled from the services' own lists.

That services never import one another is import-linter's "services" contract
(pyproject.toml, held by tests/test_architecture.py). That no module of a
concern (a subpackage of gbr_node, or a top-level module) imports another
concern's internals (a `_`-prefixed module or name) is held here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gbr_node.config.loader import load_profile
from gbr_node.control import REPL_COMMANDS, SERVICE_COMMANDS, Node
from gbr_node.repl.commands import CONVERSATION_COMMANDS, OWN_COMMANDS, command_table

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gbr_node"
MAX_ROOT_LINES = 200
MAX_CLASS_LINES = 400


def class_lengths(package: Path) -> dict[str, int]:
    """Every class under `package` as "path:Name" -> its lines (decorators left out)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                name = f"{path.relative_to(package)}:{node.name}"
                found[name] = node.end_lineno - node.lineno + 1
    return found


def test_the_composition_root_is_at_most_200_lines() -> None:
    lines = (PACKAGE / "control.py").read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_ROOT_LINES


def test_no_class_of_the_package_is_over_400_lines() -> None:
    big = {name: n for name, n in class_lengths(PACKAGE).items() if n > MAX_CLASS_LINES}
    assert big == {}


def test_the_class_measure_counts_a_class_from_its_line_to_its_last() -> None:
    source = "class A:\n    x = 1\n\n    def f(self):\n        return 2\n"
    tree = ast.parse(source)
    node = tree.body[0]
    assert isinstance(node, ast.ClassDef) and node.end_lineno == 5


def test_the_repl_table_is_its_own_commands_and_each_service_s_list() -> None:
    own = {c.name for c in OWN_COMMANDS}
    from_services = [c.name for commands in SERVICE_COMMANDS for c in commands]
    assert [name for name in REPL_COMMANDS if name not in own] == from_services
    assert set(REPL_COMMANDS) == own | set(from_services)
    assert (
        command_table(*SERVICE_COMMANDS[:2], CONVERSATION_COMMANDS, *SERVICE_COMMANDS[2:])
        == REPL_COMMANDS
    )


def test_every_service_command_is_answered_by_the_service_that_lists_it(tmp_path: Path) -> None:
    (tmp_path / ".gbr_envs").mkdir()
    (tmp_path / ".gbr_envs" / "default.toml").write_text(
        '[tools]\nenabled = ["read_file"]\n', encoding="utf-8"
    )
    node = Node(load_profile(tmp_path, "default"))
    try:
        control = node.repl_control()
        owners = control.owners()
        own = {c.name for c in OWN_COMMANDS}
        assert set(owners) == set(REPL_COMMANDS) - own
        for name, service in owners.items():
            assert REPL_COMMANDS[name] in service.commands
        assert control.table is REPL_COMMANDS
    finally:
        node.close()
        node.approvals.close()


def test_two_services_cannot_offer_one_command_name() -> None:
    import pytest

    from gbr_node.slash import Command

    with pytest.raises(ValueError, match="/tools"):
        command_table((Command("tools", "", "a"),), (Command("tools", "", "b"),))


def foreign_internals(concern: str, source: str) -> list[str]:
    """What `source`, a module of `concern`, imports of another concern's internals:
    `gbr_node.X...` imports (X not `concern`) naming a `_`-prefixed module or name
    (dunder names are not internals)."""

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gbr_node."):
            parts = (node.module or "").split(".")[1:]
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names if a.name.startswith("gbr_node.")]
            found += [
                m
                for m in modules
                if m.split(".")[1] != concern and any(private(p) for p in m.split(".")[1:])
            ]
            continue
        else:
            continue
        if parts[0] != concern and (any(map(private, parts)) or any(map(private, names))):
            found.append(f"{node.module}: {', '.join(names)}")
    return found


def test_no_module_of_a_concern_imports_another_concerns_internals() -> None:
    broken = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).parts
        concern = relative[0] if len(relative) > 1 else path.stem
        found = foreign_internals(concern, path.read_text(encoding="utf-8"))
        if found:
            broken["/".join(relative)] = found
    assert broken == {}


@pytest.mark.parametrize(
    ("concern", "source", "caught"),
    [
        ("chat", "from gbr_node.agent.machine import _wire_call", True),
        ("chat", "from gbr_node.agent._internal import thing", True),
        ("chat", "import gbr_node.agent._internal", True),
        ("agent", "from gbr_node.agent.machine import _wire_call", False),  # its own
        ("chat", "from gbr_node.agent.machine import AgentMachine", False),
        ("chat", "from gbr_node.agent import __version__", False),  # a dunder
        ("chat", "from gbr_node.agent.messages import UserPrompt as _UserPrompt", False),
    ],
)
def test_the_internals_rule_catches_what_it_says(concern, source, caught) -> None:
    assert bool(foreign_internals(concern, source)) is caught
