"""The pure guards of run_command: built-in flag refusals and environment scrubbing."""

from __future__ import annotations

import pytest

from gbr_node.tools.commands import program_kind
from gbr_node.tools.guards import is_scrubbed, refused_argument, scrubbed_environment

REFUSALS = [
    # (program kind, argv[1:], refused argument or None)
    ("git", ["-c", "core.pager=sh", "log"], "-c"),
    ("git", ["-ccore.hooksPath=x", "commit"], "-ccore.hooksPath=x"),
    ("git", ["--config-env=core.pager=X", "log"], "--config-env=core.pager=X"),
    ("git", ["--exec-path=/tmp", "status"], "--exec-path=/tmp"),
    ("git", ["fetch", "--upload-pack=touch x", "origin"], "--upload-pack=touch x"),
    ("git", ["push", "--receive-pack", "x"], "--receive-pack"),
    ("git", ["clone", "--template=tpl", "src", "dst"], "--template=tpl"),
    ("git", ["clone", "-u", "sh evil", "src"], "-u"),
    ("git", ["rebase", "-x", "make", "main"], "-x"),
    ("git", ["rebase", "-ix", "make", "main"], "-ix"),
    ("git", ["-C", "sub", "config", "core.hooksPath", "h"], "config"),
    ("git", ["submodule", "foreach", "rm -rf ."], "foreach"),
    ("git", ["bisect", "run", "./evil"], "run"),
    ("git", ["difftool", "--extcmd=evil"], "--extcmd=evil"),
    ("git", ["status", "--short"], None),
    ("git", ["add", "-u"], None),
    ("git", ["log", "--oneline", "-x"], None),
    ("find", [".", "-name", "*.py", "-exec", "rm", "{}", ";"], "-exec"),
    ("find", [".", "-execdir", "sh", ";"], "-execdir"),
    ("find", [".", "-okdir", "x", ";"], "-okdir"),
    ("find", [".", "-delete"], "-delete"),
    ("find", [".", "-fprintf", "out", "%p"], "-fprintf"),
    ("find", [".", "-name", "*.py"], None),
    ("python", ["-c", "print(1)"], "-c"),
    ("python", ["-Ic", "print(1)"], "-Ic"),
    ("python", ["-Icprint(1)"], "-Icprint(1)"),
    ("python", ["-m", "pytest", "-q"], None),
    ("sh", ["-c", "id"], "-c"),
    ("bash", ["-xc", "id"], "-xc"),
    ("node", ["--eval=1"], "--eval=1"),
    ("node", ["-pe", "1"], "-pe"),
    ("perl", ["-ne", "print"], "-ne"),
    ("ruby", ["-e", "1"], "-e"),
    ("ls", ["-c", "-la"], None),
]


@pytest.mark.parametrize(("kind", "args", "refused"), REFUSALS)
def test_builtin_refusals_whatever_the_profile_says(kind, args, refused):
    assert refused_argument({kind}, args) == refused


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
