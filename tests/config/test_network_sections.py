"""`load_network`: a profile's `[node]` and `[peers]` alone, for `gbr-node call` (issue 35).

A call applies none of the profile's other rules, so a mistake elsewhere does
not stop it; these two sections are validated in full, with the error
`load_profile` (serve, run) gives for them.
"""

from __future__ import annotations

import pytest

from gbr_node.config.loader import load_network, load_profile
from gbr_node.errors import ProfileError

PEER = "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo"
RELAY = "12D3KooWBwWFwNgcJhE2qEsL3ewZHApd6s68SSUBGAiVwXHre1E7"
GOOD = (
    "[node]\nmdns = true\ncall_timeout_s = 30\n"
    f'[peers.bob]\npeer_id = "{PEER}"\naddrs = ["/ip4/192.0.2.10/tcp/4001"]\ntools = "*"\n'
)


@pytest.mark.parametrize(
    "broken",
    [
        "[tools.run_command]\ntimeout_s = -1\n",  # a sandbox rule out of range
        '[tools]\nenabled = ["read_fiel"]\n',  # an unknown tool
        "[sandbox]\nroot = 1\n",  # a table no profile has
        'allowed_root = "does/not/exist"\n',  # a root that is not there
        'system_prompt = "a"\nsystem_prompt_file = "prompt.md"\n',  # both prompts
        '[checks.py]\nformatter = "ruff format -"\n',  # a check set without files
        '[mcp_servers.bob]\nurl = "http://127.0.0.1:1/mcp"\n',  # also a [peers] name
    ],
)
def test_a_broken_section_call_does_not_use_leaves_node_and_peers_readable(
    project, write_profile, broken
) -> None:
    write_profile("default", broken + GOOD)
    with pytest.raises(ProfileError):
        load_profile(project)  # serve and run refuse it, as before
    sections = load_network(project)
    assert sections.node.mdns is True and sections.node.call_timeout_s == 30
    assert sections.peers["bob"].peer_id == PEER
    assert sections.peers["bob"].addrs == ("/ip4/192.0.2.10/tcp/4001",)


@pytest.mark.parametrize(
    "text",
    [
        f'[peers.bob]\npeer_id = "{PEER}"\naddrs = ["/ip4/256.0.0.1/tcp/4001"]\n',
        f'[peers.bob]\npeer_id = "{PEER}"\naddrs = ["/ip4/127.0.0.1/tcp/4001/p2p/{RELAY}"]\n',
        f'[peers.bob]\npeer_id = "{PEER}"\naddrs = ["192.0.2.10:4001"]\n',
        f'[peers.bob]\npeer_id = "{PEER}"\ntoosl = "*"\n',
        f'[peers.bob]\npeer_id = "{PEER}"\nchat = "always"\n',
        '[peers.bob]\naddrs = ["/ip4/192.0.2.10/tcp/4001"]\n',
        f'[peers."bob smith"]\npeer_id = "{PEER}"\n',
        "[peers]\nbob = 1\n",
        "peers = 5\n",
        '[node]\nlisten = ["/ip4/127.0.0.1/tcp/70000"]\n',
        '[node]\nannounce = ["/ip4/0.0.0.0/tcp/4001"]\n',
        "[node]\nmdsn = true\n",
        "[node]\nmax_message_bytes = 0\n",
        "node = []\n",
        "",  # no settings: a truncated save
        "[node\nmdns = true\n",  # not TOML
    ],
)
def test_a_problem_in_node_or_peers_is_the_error_serve_gives(project, write_profile, text) -> None:
    write_profile("default", "max_steps = 8\n" * bool(text) + text)  # a setting of another kind
    with pytest.raises(ProfileError) as whole:
        load_profile(project)
    with pytest.raises(ProfileError) as alone:
        load_network(project)
    assert str(alone.value) == str(whole.value)
    assert (alone.value.line, alone.value.key) == (whole.value.line, whole.value.key)


def test_only_the_problems_of_node_and_peers_are_reported(project, write_profile) -> None:
    peers = f'[peers.bob]\npeer_id = "{PEER}"\naddrs = ["/ip4/256.0.0.1/tcp/4001"]\n'
    write_profile("default", "[tools]\nread_max_bytes = -1\n" + peers)
    with pytest.raises(ProfileError) as both:
        load_profile(project)
    assert "tools.read_max_bytes" in str(both.value) and "256.0.0.1" in str(both.value)
    with pytest.raises(ProfileError) as alone:
        load_network(project)
    write_profile("default", "\n\n" + peers)  # the same peer on the same lines, alone
    with pytest.raises(ProfileError) as peer_only:
        load_profile(project)
    assert str(alone.value) == str(peer_only.value)
    assert alone.value.key == "peers.bob" and "tools" not in str(alone.value)


def test_a_missing_profile_or_one_leading_out_of_the_project_is_refused_alike(
    project, write_profile, tmp_path
) -> None:
    with pytest.raises(ProfileError, match="not found") as missing:
        load_network(project, "dev")
    with pytest.raises(ProfileError) as whole:
        load_profile(project, "dev")
    assert str(missing.value) == str(whole.value)
    outside = tmp_path / "elsewhere.toml"
    outside.write_text(GOOD, encoding="utf-8")
    (project / ".gbr_envs" / "default.toml").symlink_to(outside)
    with pytest.raises(ProfileError, match="outside the project folder"):
        load_network(project)


def test_a_json_profile_is_read_too(project, write_profile) -> None:
    write_profile("default", f'{{"peers": {{"bob": {{"peer_id": "{PEER}"}}}}}}', ".json")
    assert load_network(project).peers["bob"].peer_id == PEER
