"""Verified edits (GBR-TRUTH-01): write_file and edit_file of a .py, .json, .toml or .ini
file that leave it unparsable come back as error results, on a real root; the file is
written all the same; legacy breakage is not blamed; `[checks] builtin = false` is off."""

from __future__ import annotations

import pytest

from gbr_node.config.profile import Profile, ToolsConfig
from gbr_node.sandbox import Sandbox
from gbr_node.tools import build_registry
from tests.tools.helpers import text_of

CASES = {
    "app.py": ("def area(w, h):\n    return w * h\n", "(w, h)", "(w, h", "line 1: '('"),
    "conf.json": ('{"port": 9090}\n', "9090}", "9090,}", "line 1: Expecting property"),
    "conf.toml": ("[server]\nport = 9090\n", "= 9090", "= ", "line 2: Invalid value"),
    "conf.ini": ("[server]\nport = 9090\n", "[server]\n", "", "line 1: a [section] header"),
}


@pytest.fixture
def registry(make_registry):
    return make_registry()


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_write_that_breaks_a_file_is_an_error_result_and_the_file_is_written(
    registry, root, name
):
    """GBR-TRUTH-01: `NAME no longer parses: line N: ...`, structured["parse"] for the agent."""
    good, old, new, said = CASES[name]
    (root / name).write_text(good)
    broken = good.replace(old, new)
    result = registry.call("write_file", {"path": name, "content": broken})
    assert result.is_error
    assert text_of(result).startswith(f"{name} no longer parses: {said}")
    assert result.structured and result.structured["parse"]["status"] == "broken"
    assert (root / name).read_text() == broken


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_edit_that_breaks_a_file_is_an_error_result(registry, root, name):
    """GBR-TRUTH-01: the same for edit_file."""
    good, old, new, said = CASES[name]
    (root / name).write_text(good)
    result = registry.call("edit_file", {"path": name, "old_string": old, "new_string": new})
    assert result.is_error and text_of(result).startswith(f"{name} no longer parses: {said}")
    assert (root / name).read_text() == good.replace(old, new)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_new_file_that_does_not_parse_is_an_error_and_a_good_one_is_not(registry, root, name):
    good, old, new, said = CASES[name]
    result = registry.call("write_file", {"path": f"new/{name}", "content": good.replace(old, new)})
    assert result.is_error and text_of(result).startswith(f"new/{name} does not parse: {said}")
    fine = registry.call("write_file", {"path": f"ok/{name}", "content": good})
    assert not fine.is_error and text_of(fine) == f"created ok/{name} ({len(good)} bytes)"


@pytest.mark.parametrize("name", sorted(CASES))
def test_legacy_breakage_is_not_blamed_on_the_write(registry, root, name):
    """GBR-TRUTH-01: a file that did not parse before the change is not the change's fault."""
    good, old, new, _ = CASES[name]
    broken = good.replace(old, new)
    (root / name).write_text(broken)
    result = registry.call("write_file", {"path": name, "content": broken + "\n"})
    assert not result.is_error and result.structured is None


def test_the_profile_can_turn_the_builtin_check_off(root):
    """`[checks] builtin = false` (GBR-TRUTH-01); a set named `builtin` cannot be given."""
    profile = Profile.model_validate({"checks": {"builtin": False}})
    assert profile.builtin_checks is False and profile.checks == {}
    assert Profile.model_validate({}).builtin_checks is True
    with pytest.raises(ValueError, match=r"\[checks\] builtin must be true or false"):
        Profile.model_validate({"checks": {"builtin": {"files": ["*.py"]}}})
    registry = build_registry(ToolsConfig(), Sandbox(root), verify=profile.builtin_checks)
    result = registry.call("write_file", {"path": "app.py", "content": "def f(:\n"})
    assert not result.is_error
