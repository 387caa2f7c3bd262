"""Write checks through a real pseudo-terminal, the real test model server and real ruff
(UBQ-DEV-02 format on save, UNW-AI-01 / STD-DEV-01 silent self-correction).

The model server records every request; the assertions read what the model
was sent and what the person sees on the rendered screen.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import TIMEOUT_S, gbr, write_profile
from tests.e2e.p2p_helpers import (
    Identity,
    ServeProcess,
    children_running,
    gbr_call,
    write_serving_profile,
)
from tests.support.replies import text_reply, tool_call_reply

RUFF = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
RUFF_CHECKS = f"""
[checks.ruff]
files = ["**/*.py"]
formatter = ["{RUFF}", "format", "--stdin-filename", "{{path}}", "-"]
check = ["{RUFF}", "check", "--quiet", "--no-cache", "--output-format", "concise", "{{path}}"]
"""
# A check whose failures print a full Python traceback (ast.parse raising).
TRACEBACK_CHECKS = f"""
[checks.parse]
files = ["**/*.py"]
check = ["{sys.executable}", "-c", "{{PARSE}}", "{{path}}"]
"""
TRACEBACK_CHECKS = TRACEBACK_CHECKS.replace(
    "{PARSE}", "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])"
)
BROKEN = "def area(w, h:\n    return w * h\n"
FIXED = "def area(w, h):\n    return w * h\n"
UGLY = "x=1\ndef area( w,h ):\n  return w*h\n"


def ruff_format(text: str, name: str = "app.py") -> str:
    done = subprocess.run(
        [RUFF, "format", "--stdin-filename", name, "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def tool_messages(body) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def assert_all_valid(server):
    problems = [r.problem for r in server.requests if r.problem]
    assert problems == [], problems


@pytest.fixture
def with_checks(project, model_server):
    def write(extra: str) -> None:
        write_profile(project, model_server.base_url, extra)

    return write


def test_a_syntax_error_goes_back_to_the_model_silently_and_its_fix_passes(
    project, with_checks, run_node, model_server
):
    with_checks(RUFF_CHECKS)
    model_server.enqueue(
        tool_call_reply("write_file", {"path": "app.py", "content": BROKEN}),
        tool_call_reply("write_file", {"path": "app.py", "content": FIXED}),
        text_reply("Done: area() is in app.py."),
    )
    term = run_node()
    term.sendline("write an area function in app.py")
    term.expect(r"Done: area\(\) is in app\.py\.")
    screen = term.text()
    assert "check ruff: 2 new errors -> retry 1/3" in screen
    assert "check ruff ok (after 1 retry)" in screen
    assert "invalid-syntax" not in screen and "Traceback" not in screen
    bodies = model_server.chat_bodies
    assert len(bodies) == 3
    told = tool_messages(bodies[1])[-1]
    assert "[check ruff: 2 new errors after this change; fix them:]" in told
    assert "app.py:1:15: invalid-syntax" in told and "app.py:2:5: invalid-syntax" in told
    assert "check ruff" not in "".join(tool_messages(bodies[0]))
    assert (project / "app.py").read_text() == FIXED
    assert_all_valid(model_server)


def test_a_check_still_failing_stops_after_max_retries_and_no_traceback_is_shown(
    project, with_checks, run_node, model_server
):
    with_checks(TRACEBACK_CHECKS.replace("[checks.parse]", "[checks.parse]\nmax_retries = 2"))
    # each write a little different and as broken: the same text again would be refused
    # as a change of nothing, and then no check runs
    model_server.enqueue(
        *(
            tool_call_reply("write_file", {"path": "app.py", "content": BROKEN + "\n" * n})
            for n in range(3)
        ),
        text_reply("never asked for"),
    )
    term = run_node()
    term.sendline("write an area function in app.py")
    term.expect(
        r"check parse still failing: 1 error in app.py — /check shows it, /undo takes the turn back"
    )
    time.sleep(0.5)  # room for a fourth request, had one been sent
    term.pump()
    screen = term.text()
    assert "check parse: 1 new error -> retry 1/2" in screen
    assert "check parse: 1 new error -> retry 2/2" in screen
    # the built-in parse check (GBR-TRUTH-01) blames only the first write: after it the
    # file did not parse before each write
    assert screen.count("check python: app.py does not parse -> retry 1/3") == 1
    assert "Traceback" not in screen and "SyntaxError" not in screen
    bodies = model_server.chat_bodies
    assert len(bodies) == 3  # the first answer and two retries; no fourth request
    told = tool_messages(bodies[1])[-1]
    assert "app.py:1: SyntaxError" in told
    assert "Traceback" not in told and "ast.py" not in told
    term.sendline("/check")
    term.expect("Traceback")  # the full output, because the person asked for it
    assert model_server.replies_left == 1
    (project / "app.py").write_text(FIXED)
    term.sendline("/check run")
    term.expect(r"check parse \(app\.py\): ok")


def test_errors_already_in_the_file_before_the_turn_do_not_block_it(
    project, with_checks, run_node, model_server
):
    with_checks(RUFF_CHECKS)
    (project / "app.py").write_text("import os\n")  # F401, there before the turn
    model_server.enqueue(
        tool_call_reply(
            "edit_file",
            {"path": "app.py", "old_string": "import os\n", "new_string": "import os\n\nX = 1\n"},
        ),
        text_reply("Added X."),
    )
    term = run_node()
    term.sendline("add a constant X")
    term.expect("Added X.")
    assert "check ruff ok (1 error was there before this turn)" in term.text()
    bodies = model_server.chat_bodies
    assert len(bodies) == 2
    assert "new error" not in tool_messages(bodies[1])[-1]


def test_badly_formatted_code_is_saved_formatted_and_the_next_edit_against_it_succeeds(
    project, with_checks, run_node, model_server
):
    with_checks(RUFF_CHECKS)
    formatted = ruff_format(UGLY)
    assert formatted != UGLY
    model_server.enqueue(
        tool_call_reply("write_file", {"path": "app.py", "content": UGLY}),
        tool_call_reply(
            "edit_file",
            {
                "path": "app.py",
                "old_string": "def area(w, h):\n    return w * h",
                "new_string": "def area(w, h):\n    return abs(w * h)",
            },
        ),
        text_reply("Formatted and edited."),
    )
    term = run_node()
    term.sendline("write app.py")
    term.expect("Formatted and edited.")
    bodies = model_server.chat_bodies
    wrote = tool_messages(bodies[1])[-1]
    assert "reformatted by formatter ruff" in wrote
    assert "def area(w, h):" in wrote  # what it needs for its next edit_file
    edited = tool_messages(bodies[2])[-1]
    assert edited.startswith("edited app.py: replaced 1 occurrence"), edited
    assert (project / "app.py").read_text() == formatted.replace("w * h", "abs(w * h)")


def test_a_one_line_edit_of_an_unformatted_file_leaves_the_rest_byte_for_byte(
    project, with_checks, run_node, model_server
):
    with_checks(RUFF_CHECKS)
    original = "x=1\ny  =  [1,2,\n   3]\ndef f( a ):\n  return a\n"
    (project / "legacy.py").write_bytes(original.encode())
    model_server.enqueue(
        tool_call_reply(
            "edit_file", {"path": "legacy.py", "old_string": "x=1", "new_string": "x=2"}
        ),
        text_reply("Changed x."),
    )
    term = run_node()
    term.sendline("set x to 2")
    term.expect("Changed x.")
    assert (project / "legacy.py").read_bytes() == original.replace("x=1", "x=2").encode()
    result = tool_messages(model_server.chat_bodies[1])[-1]
    assert (
        "not formatted by formatter ruff: the file was not formatted before this change" in result
    )


def test_a_hanging_check_is_killed_at_its_time_limit_and_reported(
    project, with_checks, run_node, model_server
):
    sleep = shutil.which("sleep")
    with_checks(f'[checks.slow]\nfiles = ["**/*.py"]\ncheck = ["{sleep}", "60"]\ntimeout_s = 1\n')
    model_server.enqueue(
        tool_call_reply("write_file", {"path": "app.py", "content": FIXED}),
        text_reply("Written."),
    )
    term = run_node()
    term.sendline("write app.py")
    term.expect("Written.")
    assert "check slow timed out after 1 s (killed)" in term.text()
    told = tool_messages(model_server.chat_bodies[1])[-1]
    assert "[check slow timed out after 1 s; its result is unknown]" in told
    assert children_running(term.child.pid, "sleep") == []


def test_s_during_a_check_kills_it_and_sends_the_suggestion(
    project, with_checks, run_node, model_server
):
    shell = shutil.which("sh")
    with_checks(  # per file ($0 is the path): a new file has no baseline to take
        f'[checks.slow]\nfiles = ["**/*.py"]\ncheck = ["{shell}", "-c", "sleep 60", "{{path}}"]\n'
        "timeout_s = 120\n"
    )
    model_server.enqueue(
        tool_call_reply("write_file", {"path": "new.py", "content": FIXED}),
        text_reply("Stopped checking."),
    )
    term = run_node()
    term.sendline("write new.py")
    deadline = time.monotonic() + TIMEOUT_S
    while not children_running(term.child.pid, "sleep"):
        assert time.monotonic() < deadline, term.text()
        term.pump(0.02)
    sent = time.monotonic()
    term.sendline("/s skip the check")
    term.expect("Stopped checking.")
    chats = [r for r in model_server.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 2
    took = chats[-1].at - sent
    assert took < 5, f"the re-prompt came {took:.1f} s after /s: the check was not cut"
    assert "check stopped (interrupted)" in term.text()
    assert children_running(term.child.pid, "sleep") == []
    last = model_server.chat_bodies[-1]["messages"]
    assert last[-1]["content"].endswith("skip the check")
    assert_all_valid(model_server)


def test_a_peers_write_through_serve_is_formatted_and_carries_the_check_outcome(tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()
    server_id, alice = Identity(keys / "server.key"), Identity(keys / "alice.key")
    root = tmp_path / "served"
    root.mkdir()
    write_serving_profile(
        root, {"alice": (alice.peer_id, ["write_file", "edit_file"])}, extra=RUFF_CHECKS
    )
    server = ServeProcess(root, tmp_path / "home-server", server_id)
    caller = tmp_path / "caller"
    caller.mkdir()
    try:
        ugly = gbr_call(
            caller,
            tmp_path / "home-alice",
            alice,
            server.addr,
            "write_file",
            json.dumps({"path": "pkg/app.py", "content": UGLY}),
        )
        assert ugly.returncode == 0, ugly.stderr
        assert (root / "pkg/app.py").read_text() == ruff_format(UGLY)
        assert "reformatted by formatter ruff" in ugly.stdout
        assert "[check ruff: ok, no new errors]" in ugly.stdout
        broken = gbr_call(
            caller,
            tmp_path / "home-alice",
            alice,
            server.addr,
            "write_file",
            json.dumps({"path": "pkg/bad.py", "content": BROKEN}),
        )
        assert "not formatted: the formatter failed" in broken.stdout
        assert "[check ruff: 2 new errors after this change; fix them:]" in broken.stdout
        assert "pkg/bad.py:1:" in broken.stdout
        assert (root / "pkg/bad.py").read_text() == BROKEN
    finally:
        server.stop()


def test_init_writes_checks_that_fit_the_project_and_env_check_shows_them(tmp_path):
    project = tmp_path / "py"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n')
    home = tmp_path / "home"
    env_path = f"{Path(RUFF).parent}:/usr/bin:/bin"
    done = subprocess.run(
        [sys.executable, "-m", "gbr_node", "init"],
        cwd=project,
        env={"HOME": str(home), "PATH": env_path},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "with write checks for: pyproject.toml" in done.stdout
    text = (project / ".gbr_envs" / "default.toml").read_text()
    assert '[checks.python]\nfiles = ["**/*.py"]\nformatter = "ruff format' in text
    shown = gbr(project, "env", "check", home=home)
    assert shown.returncode == 0, shown.stderr
    assert "# checks in force:" in shown.stdout
    assert "#  python: files **/*.py; format: ruff format --stdin-filename {path} -" in shown.stdout


# -- approved writes of protected files (issue 17: formatted and checked once approved) --

UGLY_UNUSED = "import os\nx=1\ndef area( w,h ):\n  return w*h\n"  # ruff: F401, once formatted


def protect_app_py(project: Path) -> None:
    profile = project / ".gbr_envs" / "default.toml"
    text = profile.read_text()
    profile.write_text(text.replace('["pyproject.toml"]', '["pyproject.toml", "app.py"]'))


def script_protected_python_write(model_server, content: str) -> None:
    model_server.enqueue(
        tool_call_reply("write_file", {"path": "app.py", "content": content}),
        text_reply("I asked for approval."),
        text_reply("Noted the outcome."),
    )


def assert_told_the_model_the_outcome(model_server, written: str) -> None:
    told = model_server.chat_bodies[2]["messages"][-1]["content"]
    assert "[reformatted by formatter ruff; edit the file as it is now." in told, told
    assert "def area(w, h):" in told  # what its next edit_file needs
    assert "[check ruff: 1 new error after this change; fix it:]" in told
    assert "app.py:1:8: F401" in told


def test_an_approved_write_is_formatted_and_checked_and_both_reach_the_model(
    project, with_checks, run_node, model_server
):
    with_checks(RUFF_CHECKS)
    protect_app_py(project)
    script_protected_python_write(model_server, UGLY_UNUSED)
    term = run_node()
    term.sendline("write app.py")
    term.expect_new("I asked for approval.")
    assert not (project / "app.py").exists()  # nothing formatted or written while pending
    term.sendline("/approve 1")
    term.expect_new("Noted the outcome.")
    assert (project / "app.py").read_text() == ruff_format(UGLY_UNUSED)
    screen = term.text()
    assert "approval #1 applied: write_file app.py" in screen
    assert "reformatted by formatter ruff" in screen
    assert "check ruff: 1 new error:" in screen
    assert "app.py:1:8: F401" in screen
    assert "Traceback" not in screen
    assert_told_the_model_the_outcome(model_server, ruff_format(UGLY_UNUSED))
    assert_all_valid(model_server)


def test_an_edited_approval_is_formatted_as_edited(
    project, with_checks, run_node, model_server, tmp_path
):
    with_checks(RUFF_CHECKS)
    protect_app_py(project)
    editor = tmp_path / "editor.py"
    editor.write_text(  # the operator adds a line of their own, unformatted
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text() + 'y=[1,2]\\n')\n"
    )
    script_protected_python_write(model_server, UGLY_UNUSED)
    term = run_node(env={"EDITOR": f"{sys.executable} {editor}"})
    term.sendline("write app.py")
    term.expect_new("I asked for approval.")
    term.sendline("/edit 1")
    term.expect_new("Noted the outcome.")
    edited = UGLY_UNUSED + "y=[1,2]\n"
    assert (project / "app.py").read_text() == ruff_format(edited)
    screen = term.text()
    assert "reformatted by formatter ruff" in screen and "check ruff: 1 new error:" in screen
    told = model_server.chat_bodies[2]["messages"][-1]["content"]
    assert "with edits" in told and "y = [1, 2]" in told
    assert "[check ruff: 1 new error after this change; fix it:]" in told


def test_a_write_approved_from_the_cli_is_formatted_checked_and_the_model_hears_it(
    project, with_checks, run_node, model_server, tmp_path
):
    with_checks(RUFF_CHECKS)
    protect_app_py(project)
    script_protected_python_write(model_server, UGLY_UNUSED)
    term = run_node()
    term.sendline("write app.py")
    term.expect_new("I asked for approval.")
    approve = gbr(project, "approvals", "approve", "1", home=tmp_path / "home")
    assert approve.returncode == 0, approve.stdout + approve.stderr
    assert "approval #1 applied: write_file app.py" in approve.stdout
    assert "reformatted by formatter ruff" in approve.stdout
    assert "check ruff: 1 new error:" in approve.stdout
    assert "app.py:1:8: F401" in approve.stdout
    term.expect_new("Noted the outcome.")
    assert (project / "app.py").read_text() == ruff_format(UGLY_UNUSED)
    assert_told_the_model_the_outcome(model_server, ruff_format(UGLY_UNUSED))


def test_an_approved_one_line_edit_of_an_unformatted_file_is_not_restyled(
    project, with_checks, tmp_path
):
    original = "x=1\ny  =  [1,2,\n   3]\n"
    (project / "app.py").write_text(original)
    with_checks(RUFF_CHECKS)
    protect_app_py(project)
    home = tmp_path / "home"
    args = json.dumps({"path": "app.py", "old_string": "x=1", "new_string": "x=2"})
    asked = gbr(project, "tool", "edit_file", args, home=home)
    assert "pending approval #1" in asked.stdout, asked.stdout + asked.stderr
    approve = gbr(project, "approvals", "approve", "1", home=home)
    assert approve.returncode == 0, approve.stdout + approve.stderr
    assert (project / "app.py").read_bytes() == original.replace("x=1", "x=2").encode()
    assert "not formatted: the file was not formatted before this change" in approve.stdout
    assert "check ruff ok" in approve.stdout


def test_a_peers_approved_write_is_formatted_and_the_peer_learns_the_check_outcome(tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()
    server_id, alice = Identity(keys / "server.key"), Identity(keys / "alice.key")
    root = tmp_path / "served"
    root.mkdir()
    profile = write_serving_profile(
        root, {"alice": (alice.peer_id, ["write_file", "approval_status"])}, extra=RUFF_CHECKS
    )
    protect_app_py(root)
    assert "app.py" in profile.read_text()
    server = ServeProcess(root, tmp_path / "home-server", server_id)
    caller = tmp_path / "caller"
    caller.mkdir()
    try:

        def call(tool: str, arguments: dict) -> str:
            done = gbr_call(
                caller, tmp_path / "home-alice", alice, server.addr, tool, json.dumps(arguments)
            )
            assert done.returncode == 0, done.stdout + done.stderr
            return done.stdout

        asked = call("write_file", {"path": "app.py", "content": UGLY_UNUSED})
        assert "pending approval #1" in asked
        approve = gbr(root, "approvals", "approve", "1", home=tmp_path / "home-server")
        assert approve.returncode == 0, approve.stdout + approve.stderr
        assert (root / "app.py").read_text() == ruff_format(UGLY_UNUSED)
        told = call("approval_status", {"approval_id": 1})
        assert "approved and applied" in told
        assert "[reformatted by formatter ruff" in told
        assert "[check ruff: 1 new error after this change; fix it:]" in told
        assert "app.py:1:8: F401" in told
    finally:
        server.stop()
