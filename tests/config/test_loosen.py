"""Which profile changes loosen the rules, and the one line that announces them (issue 12)."""

from __future__ import annotations

import pathlib

import pytest

from gbr_node.config.events import UpdateEnv
from gbr_node.config.keeper import reload_notice
from gbr_node.config.loader import parse_profile
from gbr_node.config.loosen import loosenings
from gbr_node.repl.render import YELLOW

ALICE = "12D3KooWBwWFwNgcJhE2qEsL3ewZHApd6s68SSUBGAiVwXHre1E7"
BOB = "12D3KooWHvYDyuMEi8FcTtT2NqxZbmDQC6aGaTt7RZUS6dqcKd3g"

BASE = f"""\
allowed_root = "src"
protected_files = [".env", "*.lock"]
[tools]
enabled = ["read_file", "run_command"]
[[tools.run_command.allow]]
name = "git"
subcommands = ["status", "diff"]
deny_args = ["-c", "--output"]
[peers.alice]
peer_id = "{ALICE}"
tools = ["read_file"]
"""

# (name, old text -> new text replacements, the loosenings announced)
LOOSER = [
    ("a_protected_pattern_removed", [('[".env", "*.lock"]', '["*.lock"]')],
     ['".env" no longer protected']),
    ("protection_cleared", [('[".env", "*.lock"]', "[]")],
     ['".env", "*.lock" no longer protected']),
    ("root_widened", [('allowed_root = "src"', 'allowed_root = "."')],
     ["allowed_root is now {project} (was {project}/src)"]),
    ("root_moved_elsewhere", [('allowed_root = "src"', 'allowed_root = "docs"')],
     ["allowed_root is now {project}/docs (was {project}/src)"]),
    ("tools_enabled", [('enabled = ["read_file", "run_command"]', 'enabled = "*"')],
     ["tools newly enabled: delete_path, edit_file, list_dir, move_path, read_library, "
      "search_library, search_text, write_file"]),
    ("hard_links_allowed", [("[tools]\n", "[tools]\nallow_hardlinks = true\n")],
     ["hard-linked files may be read"]),
    ("program_allowed", [("[peers.alice]", '[[tools.run_command.allow]]\nname = "make"\n'
                          "[peers.alice]")],
     ["run_command may now run make"]),
    ("subcommand_added", [('["status", "diff"]', '["status", "diff", "push"]')],
     ['git may also run "push"']),
    ("subcommand_restriction_dropped", [('subcommands = ["status", "diff"]\n', "")],
     ["git may run any subcommand"]),
    ("deny_arg_dropped", [('["-c", "--output"]', '["-c"]')],
     ['git no longer refuses "--output"']),
    ("executable_pinned", [('name = "git"\n', 'name = "git"\npath = "/opt/git"\n')],
     ["git now runs /opt/git"]),
    ("confinement_turned_off", [("[tools]\n", '[tools.run_command]\nconfine = "off"\n[tools]\n')],
     ['commands confined "off" (was "auto")']),
    ("network_opened", [("[tools]\n", "[tools.run_command]\nnetwork = true\n[tools]\n")],
     ["commands may open network connections"]),
    ("read_path_added", [("[tools]\n", '[tools.run_command]\nread_paths = ["/opt/x"]\n'
                          "[tools]\n")],
     ['commands may also read "/opt/x"']),
    ("library_source_added", [("[tools]\n", '[library]\nsources = ["/srv/pkgs"]\n[tools]\n')],
     ['the library also reads "/srv/pkgs"']),
    ("library_environment_named", [("[tools]\n", '[library]\nenvironments = ["/opt/venv"]\n'
                                    "[tools]\n")],
     ['the library also reads the environments "/opt/venv"']),
    ("mcp_server_mounted", [("[tools]\n", '[mcp_servers.fs]\ncommand = ["mcp-fs"]\n[tools]\n')],
     ["MCP server fs newly mounted (it runs outside the sandbox)"]),
    ("peer_added", [("[peers.alice]", f'[peers.bob]\npeer_id = "{BOB}"\n[peers.alice]')],
     ["peer bob newly trusted"]),
    ("chat_turned_on", [('tools = ["read_file"]\n', 'tools = ["read_file"]\nchat = "show"\n')],
     ['peer alice chat now "show" (was "off")']),
    ("alias_names_another_peer", [(ALICE, BOB)], ["peer alice newly trusted"]),
    ("tool_granted", [('tools = ["read_file"]', 'tools = ["read_file", "run_command"]')],
     ["peer alice newly granted run_command"]),
    ("every_tool_granted", [('tools = ["read_file"]', 'tools = "*"')],
     ["peer alice may now call every tool"]),
    ("listening_on_the_network", [("[tools]\n", '[node]\nlisten = ["/ip4/0.0.0.0/tcp/4001"]\n'
                                   "[tools]\n")],
     ["now listening beyond this machine on /ip4/0.0.0.0/tcp/4001"]),
    ("several_at_once", [('[".env", "*.lock"]', "[]"), ('tools = ["read_file"]', 'tools = "*"')],
     ['".env", "*.lock" no longer protected', "peer alice may now call every tool"]),
]  # fmt: skip

NOT_LOOSER = [
    ("nothing", []),
    ("a_protected_pattern_added", [('[".env", "*.lock"]', '[".env", "*.lock", "Makefile"]')]),
    ("root_narrowed", [('allowed_root = "src"', 'allowed_root = "src/pkg"')]),
    ("a_tool_disabled", [('["read_file", "run_command"]', '["read_file"]')]),
    ("a_deny_arg_added", [('["-c", "--output"]', '["-c", "--output", "--exec"]')]),
    ("a_peer_removed", [(f'[peers.alice]\npeer_id = "{ALICE}"\ntools = ["read_file"]\n', "")]),
    ("a_grant_withdrawn", [('tools = ["read_file"]', "tools = []")]),
    ("limits_and_model", [("[tools]\n", '[model]\nmodel = "m"\n[tools]\nread_max_bytes = 9\n')]),
    ("library_prelookup_off", [("[tools]\n", "[library]\nprelookup = false\n[tools]\n")]),
    ("listening_on_another_loopback_port",
     [("[tools]\n", '[node]\nlisten = ["/ip4/127.0.0.1/tcp/4002"]\n[tools]\n')]),
]  # fmt: skip


# (old [mcp_servers.fs] settings, new ones, the loosenings announced)
MCP = [
    ('command = ["mcp-fs"]', 'command = ["sh", "-c", "evil"]',
     ["MCP server fs now started or reached otherwise"]),
    ('command = ["mcp-fs"]', 'command = ["mcp-fs"]\nenv = {LD_PRELOAD = "x.so"}',
     ["MCP server fs now started or reached otherwise"]),
    ('url = "http://127.0.0.1:7001/mcp"', 'url = "http://127.0.0.1:7002/mcp"',
     ["MCP server fs now started or reached otherwise"]),
    ('command = ["mcp-fs"]\ntools = ["read"]', 'command = ["mcp-fs"]\ntools = ["read", "write"]',
     ["MCP server fs offers more of its tools"]),
    ('command = ["mcp-fs"]\ntools = ["read"]', 'command = ["mcp-fs"]',
     ["MCP server fs offers more of its tools"]),
    ('command = ["mcp-fs"]', 'command = ["mcp-fs"]\ntools = ["read"]', []),
    ('command = ["mcp-fs"]', 'command = ["mcp-fs"]\ntimeout_s = 5', []),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "expected"), MCP)
def test_an_mcp_server_started_otherwise_or_offering_more_is_named(project, old, new, expected):
    def loaded(settings: str):
        text = BASE.replace("[tools]\n", f"[mcp_servers.fs]\n{settings}\n[tools]\n")
        return parse_profile(text, file="default.toml", project_dir=project, name="default")

    assert list(loosenings(loaded(old), loaded(new))) == expected


# (old [tools.run_command] settings, new ones, the loosenings announced)
CONFINEMENT = [
    ('confine = "required"', 'confine = "auto"', ['commands confined "auto" (was "required")']),
    ('confine = "required"', 'confine = "off"', ['commands confined "off" (was "required")']),
    ('secret_paths = ["/srv/keys", "~/.aws"]', 'secret_paths = ["~/.aws"]',
     ['"/srv/keys" no longer secret to commands']),
    ('read_paths = ["/opt/x"]', 'read_paths = ["/opt/x", "/opt/y"]',
     ['commands may also read "/opt/y"']),
    ('confine = "auto"', 'confine = "required"', []),
    ("network = true", "network = false", []),
    ('secret_paths = ["~/.aws"]', 'secret_paths = ["~/.aws", "/srv/keys"]', []),
    ('read_paths = ["/opt/x"]', "read_paths = []", []),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "expected"), CONFINEMENT)
def test_a_weaker_confinement_of_commands_is_named(project, old, new, expected) -> None:
    def loaded(settings: str):
        text = BASE.replace("[tools]\n", f"[tools.run_command]\n{settings}\n[tools]\n")
        return parse_profile(text, file="default.toml", project_dir=project, name="default")

    assert list(loosenings(loaded(old), loaded(new))) == expected


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    for folder in ("src/pkg", "docs"):
        (tmp_path / folder).mkdir(parents=True)
    return tmp_path


def _loaded(project: pathlib.Path, replacements: list[tuple[str, str]]):
    text = BASE
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    return parse_profile(text, file="default.toml", project_dir=project, name="default")


@pytest.mark.parametrize(
    ("replacements", "expected"), [c[1:] for c in LOOSER], ids=[c[0] for c in LOOSER]
)
def test_every_change_that_allows_more_is_named(project, replacements, expected) -> None:
    found = loosenings(_loaded(project, []), _loaded(project, replacements))
    assert list(found) == [e.format(project=project) for e in expected]


@pytest.mark.parametrize("replacements", [c[1] for c in NOT_LOOSER], ids=[c[0] for c in NOT_LOOSER])
def test_changes_that_allow_no_more_are_not_called_loosening(project, replacements) -> None:
    assert loosenings(_loaded(project, []), _loaded(project, replacements)) == ()


def test_the_reload_line_says_in_one_line_that_the_rules_got_looser(project) -> None:
    change = {name: replacements for name, replacements, _ in LOOSER}
    both = change["a_protected_pattern_removed"] + change["alias_names_another_peer"]
    old, new = _loaded(project, []), _loaded(project, both)
    update = UpdateEnv(
        "p", ("protected_files", "peers"), snapshot=new, loosened=loosenings(old, new)
    )
    line = reload_notice("default", update)
    assert "\n" not in line
    assert line.startswith(YELLOW)
    assert (
        'profile default reloaded: protected_files, peers; LOOSER RULES: ".env" no longer '
        "protected; peer alice newly trusted"
    ) in line


def test_a_reload_that_loosens_nothing_is_one_plain_line(project) -> None:
    update = UpdateEnv("p", ("model",), snapshot=_loaded(project, []))
    assert reload_notice("default", update) == "profile default reloaded: model"
    assert reload_notice("other", update) == "switched to profile default"
