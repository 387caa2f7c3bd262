"""`[checks.NAME]` in the profile: validation, defaults, the template documenting every
key, and what `gbr-node init` writes for a folder."""

import pytest
import tomllib
from pydantic import ValidationError

from gbr_node.checks.detect import checks_block
from gbr_node.config.loader import default_template
from gbr_node.config.profile import CheckSet, Profile


def test_defaults_and_commands_as_string_or_list():
    checks = Profile.model_validate(
        {"checks": {"py": {"files": ["**/*.py"], "check": "ruff check {path}"}}}
    ).checks
    assert checks["py"].timeout_s == 30.0 and checks["py"].max_retries == 3
    assert checks["py"].check == ("ruff", "check", "{path}") and checks["py"].per_file
    listed = CheckSet(files=["*.go"], check=["go", "vet", "./..."])
    assert not listed.per_file


BAD = [
    ({"files": []}, "files"),
    ({"files": ["../x/*.py"]}, "root-relative"),
    ({"files": ["*.py"], "check": ""}, "empty"),
    ({"files": ["*.py"], "check": "ruff 'unclosed"}, "cannot split"),
    ({"files": ["*.py"], "check": ["ruff", ""]}, "non-empty"),
    ({"files": ["*.py"], "formatter": "black -", "formatter_mode": "in_place"}, "{path}"),
    ({"files": ["*.py"], "timeout_s": 0}, "greater than 0"),
    ({"files": ["*.py"], "max_retries": -1}, "greater than or equal"),
    ({"files": ["*.py"], "retries": 2}, "Extra inputs"),
]


@pytest.mark.parametrize(("table", "said"), BAD)
def test_a_bad_check_set_is_refused_naming_what_is_wrong(table, said):
    with pytest.raises(ValidationError, match=None) as caught:
        Profile.model_validate({"checks": {"x": table}})
    assert said in str(caught.value)


def test_the_template_documents_every_key():
    template = default_template()
    for key in CheckSet.model_fields:
        assert f"# {key} = " in template, key
    assert "[checks.python]" in template


def test_init_writes_enabled_sets_only_for_programs_on_path():
    found = {"ruff": "/usr/bin/ruff", "gleam": "/usr/bin/gleam"}
    text = checks_block(["pyproject.toml", "gleam.toml", "Cargo.toml"], found.get)
    parsed = tomllib.loads(text)["checks"]
    assert set(parsed) == {"python", "gleam"}  # rust is written commented out
    assert parsed["python"]["formatter"] == "ruff format --stdin-filename {path} -"
    assert parsed["gleam"]["check"] == "gleam check"
    assert "# Not enabled: rustfmt, cargo not found on PATH." in text
    Profile.model_validate({"checks": parsed})


def test_init_falls_back_to_a_syntax_check_without_ruff_and_writes_nothing_elsewhere():
    parsed = tomllib.loads(checks_block(["pyproject.toml"], {"python3": "/usr/bin/python3"}.get))
    assert parsed["checks"]["python"] == {
        "files": ["**/*.py"],
        "check": "python3 -m py_compile {path}",
        "timeout_s": 30.0,
        "max_retries": 3,
    }
    assert checks_block([], {}.get) == ""
