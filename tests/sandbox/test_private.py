"""GBR-PRIV-01: the node's own state and the person's secrets are out of every tool's reach.

A table of variants: every file tool x every private path x spellings, for the
local agent and for a peer, over a real project whose root is the home folder
(so `~/.ssh` and `~/.config/gbr-node` lie inside it), built by the real
profile loader.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gbr_node.config.loader import build_sandbox, load_profile
from gbr_node.config.profile import ToolsConfig
from gbr_node.errors import SecurityViolation
from gbr_node.sandbox import MACOS
from gbr_node.sandbox.caller import CALLER
from gbr_node.sandbox.private import PEER_PRIVATE, PRIVATE, PrivateMatcher
from gbr_node.tools import build_registry

MARK = "PRIVATE-MARK-7731"
PROFILE = f"""system_prompt = "x"
allowed_root = "."
[tools.run_command]
secret_paths = ["~/vault"]
# {MARK}
"""
EVERYONE = [
    ".gbr/sessions/2026.jsonl",
    ".gbr/node.log",
    ".ssh/id_rsa",
    ".config/gbr-node/identity.key",
    ".aws/credentials",
    ".netrc",
    "vault/token.txt",
]
PEERS_ONLY = [".gbr_envs/default.toml"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder that is also the project and the allowed root."""
    folder = (tmp_path / "home").resolve()
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for relative in [*EVERYONE, *PEERS_ONLY]:
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"secret of {relative} {MARK}\n")
    (folder / ".gbr_envs" / "default.toml").write_text(PROFILE)
    (folder / "notes.txt").write_text("ordinary notes\n")
    (folder / "sub").mkdir()
    os.symlink(".gbr", folder / "statelink")
    os.symlink(".ssh/id_rsa", folder / "keylink")
    return folder


@pytest.fixture
def registry(home: Path):
    sandbox = build_sandbox(load_profile(home))
    return build_registry(ToolsConfig(), sandbox, search_path="/usr/bin:/bin")


CALLERS = {
    "local": ("local", None),
    "cli": ("cli", None),
    "peer": ("12D3KooWpeer", "bob"),
    "mcp": ("mcp", None),
}


@pytest.fixture(params=list(CALLERS))
def caller(request: pytest.FixtureRequest) -> Iterator[str]:
    """Who calls: this node's agent or the person's command (local), a peer or an MCP
    client (remote)."""
    token = CALLER.set(CALLERS[request.param])
    yield "local" if request.param in ("local", "cli") else "peer"
    CALLER.reset(token)


def spellings(home: Path, relative: str) -> list[str]:
    """The ways a tool argument can name `relative`."""
    out = [relative, str(home / relative), f"sub/../{relative}", f"./{relative}"]
    if relative.startswith(".gbr/"):
        out.append("statelink/" + relative.removeprefix(".gbr/"))
    if relative == ".ssh/id_rsa":
        out.append("keylink")
    return out


def calls(path: str) -> list[tuple[str, dict[str, object]]]:
    return [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "overwritten"}),
        ("edit_file", {"path": path, "old_string": "secret", "new_string": "x"}),
        ("delete_path", {"path": path}),
        ("move_path", {"source": path, "destination": "stolen.txt"}),
        ("move_path", {"source": "notes.txt", "destination": path}),
        ("search_text", {"pattern": "secret", "path": path}),
        ("list_dir", {"path": str(Path(path).parent) if "/" in path else path}),
    ]


def _snapshot(home: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(home)): p.read_bytes()
        for p in sorted(home.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize("relative", EVERYONE)
def test_node_state_and_secrets_are_refused_to_every_tool_for_every_caller(
    home: Path, registry, caller: str, relative: str
) -> None:
    """GBR-PRIV-01: every tool x private path x spelling is a SecurityViolation naming
    the rule, for the local agent and for a peer alike; nothing on disk changes."""
    before = _snapshot(home)
    for spelling in spellings(home, relative):
        for tool, arguments in calls(spelling):
            if tool == "list_dir" and "/" not in relative:
                continue  # `.netrc`'s parent is the root itself, which may be listed
            with pytest.raises(SecurityViolation) as refused:
                registry.call(tool, arguments)
            assert refused.value.reason == PRIVATE, (tool, spelling)
    assert _snapshot(home) == before


def test_profiles_are_readable_by_the_local_agent_and_refused_to_peers(
    home: Path, registry, caller: str
) -> None:
    """GBR-PRIV-01: `.gbr_envs/` is the local agent's to read (its writes stay approvals)
    and no peer's to read, list, search or change."""
    before = _snapshot(home)
    for spelling in spellings(home, PEERS_ONLY[0]):
        for tool, arguments in calls(spelling):
            if caller == "peer":
                with pytest.raises(SecurityViolation) as refused:
                    registry.call(tool, arguments)
                assert refused.value.reason == PEER_PRIVATE, (tool, spelling)
            elif tool == "read_file":
                assert MARK in registry.call(tool, arguments).content[0]["text"]
            elif tool in ("write_file", "edit_file", "delete_path", "move_path"):
                result = registry.call(tool, arguments)
                assert result.structured and result.structured["status"] == "approval_required"
    assert _snapshot(home) == before


def test_walks_leave_private_paths_out(home: Path, registry, caller: str) -> None:
    """GBR-PRIV-01: list_dir does not show them, search_text does not find their text."""
    listing = registry.call("list_dir", {"path": ".", "depth": 5}).content[0]["text"]
    found = registry.call("search_text", {"pattern": MARK}).content[0]["text"]
    assert "notes.txt" in listing
    for name in (".gbr/", ".ssh", ".config", ".aws", ".netrc", "vault"):
        assert name not in listing
    assert (".gbr_envs" in listing) == (caller == "local")
    assert ("default.toml" in found) == (caller == "local")
    assert found.count(MARK) == (1 if caller == "local" else 0), found


def test_a_folder_holding_private_state_is_neither_moved_nor_deleted(
    home: Path, caller: str
) -> None:
    """GBR-PRIV-01: with the root above the project (`allowed_root = ".."`), deleting or
    moving the project folder, which holds `.gbr/`, is refused outright."""
    project = home / "proj"
    (project / ".gbr_envs").mkdir(parents=True)
    (project / ".gbr_envs" / "default.toml").write_text(
        'system_prompt = "x"\nallowed_root = ".."\n'
    )
    (project / ".gbr").mkdir()
    (project / ".gbr" / "approvals.db").write_text("db")
    registry = build_registry(ToolsConfig(), build_sandbox(load_profile(project)))
    for tool, arguments in [
        ("delete_path", {"path": "proj"}),
        ("move_path", {"source": "proj", "destination": "elsewhere"}),
        ("delete_path", {"path": "proj/.gbr"}),
    ]:
        with pytest.raises(SecurityViolation):
            registry.call(tool, arguments)
    assert (project / ".gbr" / "approvals.db").read_text() == "db"
    listing = registry.call("list_dir", {"path": "proj"}).content[0]["text"]
    assert ".gbr/" not in listing


def test_case_spellings_are_private_on_case_insensitive_flavours() -> None:
    """UBQ-AI-01 x GBR-PRIV-01: `.GBR/x` is `.gbr/x` where names fold case."""
    matcher = PrivateMatcher(["/p/.gbr", "/h/.ssh"], ["/p/.gbr_envs"], MACOS)
    assert matcher.reason("/p/.GBR/sessions/a.jsonl", remote=False) == PRIVATE
    assert matcher.reason("/H/.SSH/id_rsa", remote=False) == PRIVATE
    assert matcher.reason("/p/.GBR_ENVS/default.toml", remote=True) == PEER_PRIVATE
    assert matcher.reason("/p/.GBR_ENVS/default.toml", remote=False) is None
    assert matcher.reason("/p/.gbrx/a", remote=False) is None
    assert matcher.reason("/p/src/.gbr.py", remote=False) is None


def test_secret_globs_match_below_and_by_wildcard() -> None:
    """`secret_paths` globs hide what they match and everything below it."""
    from gbr_node.sandbox import POSIX

    matcher = PrivateMatcher(["/h/*.pem", "/etc/shadow*", "/h/keys/**/id_*"], [], POSIX)
    assert matcher.reason("/h/server.pem", remote=False) == PRIVATE
    assert matcher.reason("/h/sub/server.pem", remote=False) is None
    assert matcher.reason("/etc/shadow-", remote=False) == PRIVATE
    assert matcher.reason("/h/keys/a/b/id_ed25519", remote=False) == PRIVATE
    assert matcher.reason("/h/keys/a/b/notes", remote=False) is None
