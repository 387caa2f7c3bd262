"""The `gbr-node` commands of the foundation: init, env, tool, --help."""

import json
import subprocess
import sys

import pytest

from tests.e2e.conftest import gbr, node_env


def test_init_writes_the_commented_default_profile_once(fresh):
    profile = fresh / ".gbr_envs" / "default.toml"
    assert "allowed_root" in profile.read_text()
    again = gbr(fresh, "init")
    assert again.returncode == 0 and "already exists" in again.stdout


def test_env_check_prints_the_effective_profile(fresh):
    out = gbr(fresh, "env", "check")
    assert out.returncode == 0, out.stderr
    assert "poll_interval_s = 2.0" in out.stdout
    assert "is valid" in out.stderr


def test_env_check_names_file_line_and_key_of_a_misspelt_key(fresh):
    (fresh / ".gbr_envs" / "bad.toml").write_text('system_prompt = "x"\n\n[tools]\nenabeld = "*"\n')
    out = gbr(fresh, "env", "check", "bad")
    assert out.returncode == 1
    assert "bad.toml:4" in out.stderr and "enabeld" in out.stderr and "enabled" in out.stderr


def test_env_schema_is_json_schema_with_every_section(fresh):
    schema = json.loads(gbr(fresh, "env", "schema").stdout)
    assert {"tools", "model", "peers", "watch", "node"} <= set(schema["properties"])


def test_tool_runs_one_tool_under_the_profile(fresh):
    (fresh / "hello.txt").write_text("hi there\n")
    out = gbr(fresh, "tool", "read_file", '{"path": "hello.txt"}')
    assert out.returncode == 0, out.stderr
    assert "hi there" in out.stdout


def test_tool_refuses_an_escape_with_exit_status_1(fresh):
    out = gbr(fresh, "tool", "read_file", '{"path": "../../etc/passwd"}')
    assert out.returncode == 1
    assert "refused" in out.stderr and "root" in out.stderr.lower()


def test_tool_protected_write_waits_in_the_approval_log_and_leaves_disk_alone(fresh):
    out = gbr(fresh, "tool", "write_file", '{"path": ".gbr_envs/default.toml", "content": "x"}')
    assert "pending approval #1" in out.stdout
    assert json.loads(out.stderr)["status"] == "pending_approval"
    assert "allowed_root" in (fresh / ".gbr_envs" / "default.toml").read_text()
    listed = gbr(fresh, "approvals", "list")
    assert "#1" in listed.stdout and ".gbr_envs/default.toml" in listed.stdout


def test_tool_with_bad_json_is_a_usage_error(fresh):
    out = gbr(fresh, "tool", "read_file", "{not json")
    assert out.returncode == 2 and "not valid JSON" in out.stderr


def test_help_does_not_import_heavy_packages():
    code = (
        "import sys, gbr_node.cli as c; c.build_parser().format_help();"
        "print(sorted(m for m in ('libp2p', 'httpx', 'trio', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path):
    """`gbr-node id | head -1`: the pipe closes before the multiaddr lines are written."""
    home = tmp_path / "home"
    home.mkdir()
    reader = subprocess.Popen(
        [sys.executable, "-m", "gbr_node", "id"],
        cwd=tmp_path,
        env=node_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.close()  # the reader left before the first line
    errors = reader.stderr.read().decode()
    assert reader.wait(timeout=60) == 1
    assert "Traceback" not in errors and "BrokenPipeError" not in errors


def test_call_with_a_target_that_is_no_alias_peer_id_or_p2p_multiaddr_is_a_usage_error(tmp_path):
    project = tmp_path / "project"
    (project / ".gbr_envs").mkdir(parents=True)
    bob = "12D3KooWKLTLE7kwdcoNmAGbEUK5z6aAmLfykxrQ2jnadgLDA6JK"
    (project / ".gbr_envs" / "default.toml").write_text(
        f'[peers.bob]\npeer_id = "{bob}"\ntools = "*"\n'
    )
    for target in ("bobb", "/ip4/127.0.0.1/tcp/4002"):
        done = gbr(project, "call", target, "--list")
        assert done.returncode == 2, done.stderr
        assert "TARGET is a [peers] alias, a peer ID" in done.stderr
    assert (
        "'bobb' is not an alias of profile default (aliases: bob)"
        in gbr(project, "call", "bobb", "--list").stderr
    )


def test_a_new_identity_file_is_announced_once(tmp_path):
    key = tmp_path / "typo" / "node.key"
    first = gbr(tmp_path, "--identity", str(key), "id")
    again = gbr(tmp_path, "--identity", str(key), "id")
    assert first.returncode == again.returncode == 0
    peer_id = first.stdout.split()[0]
    assert f"gbr-node: new identity {key} (peer ID {peer_id})" in first.stderr
    assert again.stdout.split()[0] == peer_id and "new identity" not in again.stderr


def test_arguments_come_from_a_file_or_stdin_when_too_big_for_a_command_line(tmp_path):
    project = tmp_path / "project"
    (project / ".gbr_envs").mkdir(parents=True)
    (project / ".gbr_envs" / "default.toml").write_text('system_prompt = "x"\n')
    content = "q" * 300_000  # over Linux's 128 KiB limit for one argument
    (tmp_path / "args.json").write_text(json.dumps({"path": "big.txt", "content": content}))
    wrote = gbr(project, "tool", "write_file", f"@{tmp_path / 'args.json'}")
    assert wrote.returncode == 0, wrote.stderr
    assert (project / "big.txt").read_text() == content

    read = subprocess.run(
        [sys.executable, "-m", "gbr_node", "tool", "read_file", "-"],
        input='{"path": "big.txt", "limit": 1}',
        cwd=project,
        env=node_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert read.returncode == 0 and "big.txt: lines 1-1 of 1" in read.stdout, read.stderr
    missing = gbr(project, "tool", "read_file", f"@{tmp_path / 'nope.json'}")
    assert missing.returncode == 2 and "cannot read JSON-ARGS from" in missing.stderr


@pytest.mark.parametrize("tool", ["read_file", "run_command"])
def test_a_node_started_from_a_symlinked_folder_takes_paths_spelled_with_it(fresh, tool):
    (fresh / "hello.txt").write_text("hi there\n")
    link = fresh.parent / "proj-link"
    link.symlink_to(fresh)
    path = str(link / "hello.txt")
    arguments = {"read_file": {"path": path}, "run_command": {"argv": ["ls", path]}}[tool]
    env = {**node_env(fresh.parent / "home"), "PWD": str(link)}  # as a shell in link/ sets it
    out = subprocess.run(
        [sys.executable, "-m", "gbr_node", "tool", tool, json.dumps(arguments)],
        cwd=link,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "hello.txt" in out.stdout or "hi there" in out.stdout


def test_the_node_s_state_folder_is_never_offered_to_git(tmp_path):
    """issue 34: `.gbr/` (46 MB with the library index) must not show as untracked."""
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    assert gbr(project, "init").returncode == 0
    assert gbr(project, "tool", "write_file", '{"path": "a.txt", "content": "x"}').returncode == 0
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ".gbr/" not in status and "a.txt" in status
    assert (project / ".gbr" / ".gitignore").read_text().strip().endswith("*")


@pytest.mark.parametrize(
    ("content", "shown"),
    [
        ('name = "ok"\u202e // admin\n', "<U+202E>"),
        ("a\u200bb = 1\n", "<U+200B>"),
        ("x = 1\u2066\u2069\n", "<U+2066><U+2069>"),
        ("bell\x07 = 1\n", "␇"),
        ("esc = '\x1b[2J'\n", "␛[2J"),
    ],
)
def test_approvals_show_makes_hidden_characters_visible_and_flags_the_line(
    tmp_path, content, shown
):
    """GBR-PRIV-01 (Trojan Source, CVE-2021-42574): a proposed content's bidi controls,
    zero-width and control characters are shown as marks, and the line is flagged."""
    project = tmp_path / "proj"
    project.mkdir()
    assert gbr(project, "init").returncode == 0
    (project / "pyproject.toml").write_text("[project]\n")
    arguments = json.dumps({"path": "pyproject.toml", "content": content})
    assert gbr(project, "tool", "write_file", arguments).returncode == 0
    out = gbr(project, "approvals", "show", "1").stdout
    assert shown in out and "hidden or control characters on this line" in out
    assert "\u202e" not in out and "\x1b[2J" not in out and "\u200b" not in out


def test_a_long_proposed_diff_is_summarised_with_the_whole_one_command_away(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    assert gbr(project, "init").returncode == 0
    (project / "pyproject.toml").write_text("[project]\n")
    content = "".join(f"line_{n} = {n}\n" for n in range(5000))
    arguments = json.dumps({"path": "pyproject.toml", "content": content})
    assert gbr(project, "tool", "write_file", arguments).returncode == 0
    short = gbr(project, "approvals", "show", "1").stdout
    assert len(short.splitlines()) < 60
    assert (
        "diff cut: 5004 lines" in short
        and "+5000 -1" in short
        and "gbr-node approvals show 1 --full" in short
    )
    whole = gbr(project, "approvals", "show", "1", "--full").stdout
    assert "line_4999 = 4999" in whole


def test_init_checks_adds_the_detected_checks_to_an_existing_profile(tmp_path):
    """issue 34: `init` on an existing project only said "already exists"; `init --checks`
    adds the [checks] it detects, prints the diff, and leaves a profile that loads."""
    project = tmp_path / "proj"
    project.mkdir()
    assert gbr(project, "init").returncode == 0
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    plain = gbr(project, "init")
    assert "already exists" in plain.stdout and "--checks" in plain.stdout
    added = gbr(project, "init", "--checks")
    assert added.returncode == 0, added.stderr
    assert "+[checks.python]" in added.stdout
    assert gbr(project, "env", "check").returncode == 0
    again = gbr(project, "init", "--checks")
    assert "no write checks to add" in again.stdout
    profile = project / ".gbr_envs" / "default.toml"
    profile.write_text("this is = not [toml\n")
    broken = gbr(project, "init", "--checks")
    assert broken.returncode == 1 and profile.read_text() == "this is = not [toml\n"
