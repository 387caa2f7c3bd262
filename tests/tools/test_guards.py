"""The pure guards of run_command: program names and environment scrubbing."""

from __future__ import annotations

import pytest

from gbr_node.tools.commands import program_kind
from gbr_node.tools.guards import is_scrubbed, scrubbed_environment


@pytest.mark.parametrize(
    ("filename", "kind"),
    [("python3.12", "python"), ("python3", "python"), ("pypy3", "python"), ("nodejs", "node")],
)
def test_program_names_are_normalised_for_the_builtin_list(filename, kind):
    assert program_kind(filename) == kind


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY",
        "GITHUB_TOKEN",
        "MY_SECRET_THING",
        "DB_PASSWORD",
        "AWS_REGION",
        "SSH_AUTH_SOCK",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "DYLD_INSERT_LIBRARIES",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "GIT_DIR",
        "GIT_SSH_COMMAND",
        "BASH_ENV",
        "ENV",
        "BASH_FUNC_ls%%",
        "NODE_OPTIONS",
        "PERL5OPT",
        "RUBYOPT",
        "JAVA_TOOL_OPTIONS",
        "openai_api_key",
        # settings of the programs the template suggests that run other programs
        "PYTEST_ADDOPTS",
        "PYTEST_PLUGINS",
        "npm_config_script_shell",
        "NPM_CONFIG_NODE_OPTIONS",
        "MAKEFLAGS",
        "MAKEFILES",
        "TAR_OPTIONS",
        "RIPGREP_CONFIG_PATH",
        "LESSOPEN",
        "SSH_ASKPASS",
        "GOFLAGS",
        "RUSTC_WRAPPER",
    ],
)
def test_secrets_and_code_injection_variables_are_scrubbed(name):
    assert is_scrubbed(name)


@pytest.mark.parametrize("name", ["HOME", "LANG", "PATH", "TERM", "USER", "TZ", "KEYBOARD"])
def test_ordinary_variables_are_kept(name):
    assert not is_scrubbed(name)


def test_scrubbed_environment_is_a_filtered_copy():
    env = {"HOME": "/h", "OPENAI_API_KEY": "sk-1", "LD_PRELOAD": "x.so"}
    assert scrubbed_environment(env) == {"HOME": "/h"}
    assert env["OPENAI_API_KEY"] == "sk-1"
