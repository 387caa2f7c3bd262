"""`[mcp_servers.NAME]` in a profile, and how peers are granted mounted tools (GBR-MCP-01)."""

import pytest

from gbr_node.config.loader import load_profile
from gbr_node.config.network import TrustedPeer
from gbr_node.errors import ProfileError

PEER = "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"


def test_a_mounted_server_table_is_read_with_its_defaults(project, write_profile):
    write_profile(
        "default",
        '[mcp_servers.git]\ncommand = ["mcp-server-git", "--repository", "."]\n'
        'env = { GIT_PAGER = "cat" }\ntools = ["git_status"]\n'
        '[mcp_servers.web]\nurl = "http://127.0.0.1:8000/mcp"\ntimeout_s = 5\n',
    )
    servers = load_profile(project).profile.mcp_servers
    git, web = servers["git"], servers["web"]
    assert git.command == ("mcp-server-git", "--repository", ".") and git.url is None
    assert git.env == {"GIT_PAGER": "cat"} and git.tools == ("git_status",)
    assert git.timeout_s == 60.0 and git.takes("git_status") and not git.takes("git_log")
    assert web.url == "http://127.0.0.1:8000/mcp" and web.tools == "*" and web.takes("any")


BROKEN = [
    # (table text, words of the error)
    ('[mcp_servers.a__b]\ncommand = ["x"]', "never '__'"),
    ('[mcp_servers.a_]\ncommand = ["x"]', "never '__'"),
    (f'[mcp_servers.{"n" * 33}]\ncommand = ["x"]', "at most 32"),
    ('[mcp_servers.git]\ncommand = ["x"]\nurl = "http://127.0.0.1:1/mcp"', "not both"),
    ("[mcp_servers.git]\ntimeout_s = 5", "either command"),
    ('[mcp_servers.git]\nurl = "http://10.0.0.5:8000/mcp"', "on this machine"),
    ('[mcp_servers.git]\nurl = "https://example.com/mcp"', "on this machine"),
    ('[mcp_servers.git]\nurl = "http://127.0.0.1:1/mcp"\nenv = { A = "b" }', "env applies"),
    ("[mcp_servers.git]\ncommand = []", "at least 1"),
    ('[mcp_servers.git]\ncommand = ["x"]\ntimeout_s = 0', "greater than 0"),
    ('[mcp_servers.git]\ncomand = ["x"]', 'did you mean "command"'),
    (f'[mcp_servers.bob]\ncommand = ["x"]\n[peers.bob]\npeer_id = "{PEER}"', "rename one"),
]


def test_a_broken_table_is_an_error_naming_what_is_wrong(project, write_profile):
    for text, words in BROKEN:
        write_profile("default", text + "\n")
        with pytest.raises(ProfileError) as caught:
            load_profile(project)
        assert words in str(caught.value), (text, str(caught.value))


GRANTS = [
    # (tools granted, tool asked for, allowed?)
    ("*", "read_file", True),
    ("*", "git__git_status", False),
    (("*",), "git__git_status", False),
    (("*", "mcp_servers"), "git__git_status", True),
    (("*", "mcp_servers"), "read_file", True),
    (("mcp_servers",), "git__git_status", True),
    (("mcp_servers",), "read_file", False),
    (("git__git_status",), "git__git_status", True),
    (("git__git_status",), "git__git_log", False),
    (("read_file",), "git__git_status", False),
    ((), "git__git_status", False),
]


def test_mounted_tools_are_granted_by_name_or_mcp_servers_never_by_star_alone():
    for tools, asked, allowed in GRANTS:
        assert TrustedPeer(peer_id=PEER, tools=tools).may_call(asked) is allowed, (tools, asked)
