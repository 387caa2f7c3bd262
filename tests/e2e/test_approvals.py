"""Protected writes wait for the operator, in the REPL and across nodes (EVD-AI-01, EVD-DEV-02)."""

import contextlib
import json
import signal
import sqlite3
import sys
import time

import pytest

from gbr_node.approvals.service import REDELIVERY_INTERVAL_S
from tests.e2e.conftest import gbr, write_profile
from tests.e2e.p2p_helpers import Identity, ServeProcess, gbr_call
from tests.support.replies import text_reply, tool_call_reply

OLD = '[project]\nname = "demo"\n'
NEW = '[project]\nname = "demo"\nversion = "2.0"\n'


def script_protected_write(model_server):
    model_server.enqueue(
        tool_call_reply("write_file", {"path": "pyproject.toml", "content": NEW}),
        text_reply("I asked for approval."),
        text_reply("Noted the outcome."),
    )


def events(project):
    with sqlite3.connect(project / ".gbr" / "approvals.db") as db:
        return [kind for (kind,) in db.execute("SELECT kind FROM events ORDER BY seq")]


@contextlib.contextmanager
def bob_serving(tmp_path, project, model_server, *replies):
    """Bob serves write_file to alice, whose profile (in `project`) trusts bob; the
    model's `replies` are queued. Yields (alice, bob's folder, bob's serve process)."""
    alice, bob = Identity(tmp_path / "alice.key"), Identity(tmp_path / "bob.key")
    bob_root = tmp_path / "bob"
    bob_root.mkdir()
    (bob_root / "pyproject.toml").write_text(OLD)
    grant = f'[peers.alice]\npeer_id = "{alice.peer_id}"\ntools = ["write_file"]\n'
    write_profile(bob_root, "http://127.0.0.1:9/v1", extra=grant)
    server = ServeProcess(bob_root, tmp_path / "home", bob)
    try:
        addr = server.addr.rsplit("/p2p/", 1)[0]
        trust = f'[peers.bob]\npeer_id = "{bob.peer_id}"\naddrs = ["{addr}"]\ntools = "*"\n'
        write_profile(project, model_server.base_url, extra=trust)
        model_server.enqueue(*replies)
        yield alice, bob_root, server
    finally:
        server.kill()


def test_approve_writes_the_file_and_the_model_hears_of_it(project, model_server, run_node):
    (project / "pyproject.toml").write_text(OLD)
    script_protected_write(model_server)
    term = run_node()
    term.sendline("bump the version")
    term.expect_new("approval #1 requested by the agent: write_file pyproject.toml")
    term.expect_new(r'\+version = "2.0"')
    term.expect_new("I asked for approval.")
    assert (project / "pyproject.toml").read_text() == OLD
    pending = model_server.chat_bodies[1]["messages"][-1]["content"]
    assert "pending approval #1" in pending
    term.sendline("/approve 1")
    term.expect_new("Noted the outcome.")
    assert (project / "pyproject.toml").read_text() == NEW
    told = model_server.chat_bodies[2]["messages"][-1]["content"]
    assert "approved and applied" in told
    assert events(project) == ["PendingApproval", "Approved", "Applied"]


def test_edit_writes_the_edited_text_and_reports_it(project, model_server, run_node, tmp_path):
    (project / "pyproject.toml").write_text(OLD)
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text().replace('2.0', '2.1-edited'))\n"
    )
    script_protected_write(model_server)
    term = run_node(env={"EDITOR": f"{sys.executable} {editor}"})
    term.sendline("bump the version")
    term.expect_new("I asked for approval.")
    term.sendline("/edit 1")
    term.expect_new("Noted the outcome.")
    assert "2.1-edited" in (project / "pyproject.toml").read_text()
    told = model_server.chat_bodies[2]["messages"][-1]["content"]
    assert "with edits" in told and "2.1-edited" in told
    assert events(project) == ["PendingApproval", "Edited", "Applied"]


def test_reject_with_a_reason_reaches_the_model(project, model_server, run_node):
    (project / "pyproject.toml").write_text(OLD)
    script_protected_write(model_server)
    term = run_node()
    term.sendline("bump the version")
    term.expect_new("I asked for approval.")
    term.sendline("/reject 1 keep the version until the release")
    term.expect_new("Noted the outcome.")
    assert term.text().count("approval #1 rejected") == 1  # said once, not by the desk again
    assert (project / "pyproject.toml").read_text() == OLD
    told = model_server.chat_bodies[2]["messages"][-1]["content"]
    assert "rejected" in told and "keep the version until the release" in told
    assert events(project) == ["PendingApproval", "Rejected"]


def test_remote_write_waits_for_approval_from_a_third_process(
    tmp_path, project, model_server, run_node
):
    replies = (
        tool_call_reply("bob__write_file", {"path": "pyproject.toml", "content": NEW}),
        text_reply("Bob must approve it."),
        text_reply("Bob applied it."),
    )
    with bob_serving(tmp_path, project, model_server, *replies) as (alice, bob_root, server):
        term = run_node("--listen", "/ip4/127.0.0.1/tcp/0", identity=alice.path)
        term.sendline("/dial bob")
        term.expect_new("connected to bob")
        term.sendline("bump bob's version")
        term.expect_new("Bob must approve it.")
        server.wait_line(r"^alice write_file pending approval #1 \d+ ms$")  # not "ok"
        assert "pending approval #1" in model_server.chat_bodies[1]["messages"][-1]["content"]
        assert (bob_root / "pyproject.toml").read_text() == OLD
        approve = gbr(bob_root, "approvals", "approve", "1", home=tmp_path / "home")
        assert approve.returncode == 0, approve.stdout + approve.stderr
        term.expect_new("Bob applied it.")
        assert (bob_root / "pyproject.toml").read_text() == NEW
        told = model_server.chat_bodies[2]["messages"][-1]["content"]
        assert "from peer bob" in told and "approved and applied" in told
        assert events(bob_root) == ["PendingApproval", "Approved", "Applied"]

        # a one-off call with alice's key: its outcome is shown, not handed to the agent
        args = json.dumps({"path": "pyproject.toml", "content": OLD})
        one_off = gbr_call(tmp_path, tmp_path / "home", alice, server.addr, "write_file", args)
        assert "pending" in one_off.stdout, one_off.stdout + one_off.stderr
        approve = gbr(bob_root, "approvals", "approve", "2", home=tmp_path / "home")
        assert approve.returncode == 0, approve.stdout + approve.stderr
        term.expect_new(r"approval #2 \w+ \(asked by another process with this identity")
        time.sleep(1)
        assert len(model_server.chat_bodies) == 3


@pytest.mark.parametrize("approved", ["after bob is back", "while bob is down"])
def test_an_awaited_outcome_reaches_the_agent_after_the_peer_restarts(
    tmp_path, project, model_server, run_node, approved
):
    """Bob knows no address of alice's: once her connection dropped (bob restarted), only
    her dialing back and asking lets the outcome her agent awaits reach it."""
    replies = (
        tool_call_reply("bob__write_file", {"path": "pyproject.toml", "content": NEW}),
        text_reply("Bob must approve it."),
        text_reply("Bob applied it."),
    )
    home = tmp_path / "home"
    with bob_serving(tmp_path, project, model_server, *replies) as (alice, bob_root, server):
        term = run_node("--listen", "/ip4/127.0.0.1/tcp/0", identity=alice.path)
        term.expect("connected to bob")
        term.sendline("bump bob's version")
        term.expect_new("Bob must approve it.")
        server.kill()

        def approve():
            done = gbr(bob_root, "approvals", "approve", "1", home=home)
            assert done.returncode == 0, done.stdout + done.stderr

        if approved == "while bob is down":
            approve()
        listen = server.addr.rsplit("/p2p/", 1)[0]
        restarted = ServeProcess(bob_root, home, server.identity, listen=listen)
        try:
            if approved == "after bob is back":
                approve()
            term.expect_new("peer bob: approval #1 applied")
            term.expect_new("Bob applied it.")
            told = model_server.chat_bodies[2]["messages"][-1]["content"]
            assert "from peer bob" in told and "approved and applied" in told
            time.sleep(REDELIVERY_INTERVAL_S * 2)  # the peer's own redelivery adds nothing
            assert term.text().count("approval #1 applied") == 1
            assert len(model_server.chat_bodies) == 3
        finally:
            restarted.kill()


def test_pending_approvals_survive_kill_9_and_apply_once(project, model_server, run_node):
    (project / "pyproject.toml").write_text(OLD)
    script_protected_write(model_server)
    term = run_node()
    term.sendline("bump the version")
    term.expect_new("I asked for approval.")
    term.child.kill(signal.SIGKILL)
    term.child.wait()

    def approvals(*args):
        return gbr(project, "approvals", *args)

    listed = approvals("list")
    assert "#1" in listed.stdout and "pending" in listed.stdout
    first, second = approvals("approve", "1"), approvals("approve", "1")
    assert first.returncode == 0 and second.returncode == 0
    assert "already applied" in second.stdout
    assert (project / "pyproject.toml").read_text() == NEW
    assert events(project) == ["PendingApproval", "Approved", "Applied"]


def test_a_peer_s_rejection_shows_its_reason_on_the_requester_s_screen(
    tmp_path, project, model_server, run_node
):
    replies = (
        tool_call_reply("bob__write_file", {"path": "pyproject.toml", "content": NEW}),
        text_reply("Bob must approve it."),
        text_reply("Understood, not bumped."),
    )
    with bob_serving(tmp_path, project, model_server, *replies) as (alice, bob_root, _):
        term = run_node("--listen", "/ip4/127.0.0.1/tcp/0", identity=alice.path)
        term.expect("connected to bob")
        term.sendline("bump bob's version")
        term.expect_new("Bob must approve it.")
        reason = ("--reason", "wait for the release")
        reject = gbr(bob_root, "approvals", "reject", "1", *reason, home=tmp_path / "home")
        assert reject.returncode == 0, reject.stdout + reject.stderr
        term.expect_new(r"peer bob: approval #1 rejected: .*wait for the release")
        term.expect_new("Understood, not bumped.")
        assert (bob_root / "pyproject.toml").read_text() == OLD
