"""Approvals by origin through a real pseudo-terminal, real processes and the real test
model server (issue 31): a protected write asked by `gbr-node tool` or by a peer while
`gbr-node run` is open is shown as theirs, is never "waited for" in the status line, and
approving it starts no turn and sends the model nothing; the agent's own request still
gets its outcome; after a restart the status line never waits for an old request."""

from __future__ import annotations

import json
import re
import time

from tests.e2e.chat_helpers import free_port
from tests.e2e.conftest import gbr, write_profile
from tests.e2e.p2p_helpers import Identity, gbr_call
from tests.e2e.terminal import Terminal
from tests.support.replies import text_reply, tool_call_reply

OLD = '[project]\nname = "demo"\n'
NEW = '[project]\nname = "demo"\nversion = "2"\n'
WAITING = "● waiting for approval"


def settle(term: Terminal, seconds: float = 1.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        term.pump(0.05)


def status_row(term: Terminal) -> str:
    rows = [r for r in term.text().splitlines() if r.strip()]
    return rows[-2] if len(rows) >= 2 else ""


def test_a_command_lines_request_is_shown_as_its_and_approving_it_starts_no_turn(
    project, model_server, run_node
):
    (project / "pyproject.toml").write_text(OLD)
    term = run_node()
    asked = gbr(
        project, "tool", "write_file", json.dumps({"path": "pyproject.toml", "content": NEW})
    )
    assert "pending approval #1" in asked.stdout, asked.stdout + asked.stderr
    term.expect(r"approval #1 requested by the command line \(gbr-node tool\)")
    settle(term)
    assert WAITING not in term.text()  # not the agent's to wait for
    term.sendline("/approve 1")
    term.expect_new(r"approval #1 applied")
    settle(term, 2.0)  # a turn, had one started, would have asked the model by now
    assert model_server.chat_bodies == []  # the model was sent nothing
    assert (project / "pyproject.toml").read_text() == NEW
    assert WAITING not in term.text() and "idle · " in term.text()


def test_a_peers_request_is_shown_as_its_and_approving_it_starts_no_turn(
    tmp_path, project, model_server, run_node
):
    (project / "pyproject.toml").write_text(OLD)
    alice, bob = Identity(tmp_path / "alice.key"), Identity(tmp_path / "bob.key")
    port = free_port()
    grant = f'[peers.bob]\npeer_id = "{bob.peer_id}"\ntools = ["write_file"]\n'
    write_profile(project, model_server.base_url, extra=grant)
    term = run_node("--listen", f"/ip4/127.0.0.1/tcp/{port}", identity=alice.path)
    bob_dir = tmp_path / "bob"
    bob_dir.mkdir()
    write_profile(bob_dir, "http://127.0.0.1:9/v1")
    target = f"/ip4/127.0.0.1/tcp/{port}/p2p/{alice.peer_id}"
    arguments = json.dumps({"path": "pyproject.toml", "content": NEW})
    called = gbr_call(bob_dir, tmp_path / "bobhome", bob, target, "write_file", arguments)
    assert "pending approval #1" in called.stdout, called.stdout + called.stderr
    term.expect(r"approval #1 requested by bob: write_file pyproject.toml")
    settle(term)
    assert WAITING not in term.text()
    term.sendline("/approve 1")
    term.expect_new(r"approval #1 applied")
    settle(term, 2.0)
    assert model_server.chat_bodies == []  # the model was sent nothing
    assert (project / "pyproject.toml").read_text() == NEW


def test_the_agents_own_request_is_waited_for_and_its_outcome_told_but_not_after_a_restart(
    project, model_server, run_node
):
    (project / "pyproject.toml").write_text(OLD)
    model_server.enqueue(
        tool_call_reply("write_file", {"path": "pyproject.toml", "content": NEW}),
        text_reply("I asked for approval."),
        tool_call_reply("write_file", {"path": "pyproject.toml", "content": "x = 3\n"}),
        text_reply("Asked again."),
        text_reply("Noted: applied."),
    )
    term = run_node()
    term.sendline("bump the version")
    term.expect_new("I asked for approval.")
    term.expect(re.escape(WAITING) + " #1")
    term.child.terminate(force=True)  # #1 stays pending; the next session did not ask it

    term = run_node()
    settle(term)
    assert WAITING not in term.text()  # an earlier session's request is not waited for
    term.sendline("try again")
    term.expect_new("Asked again.")
    term.expect(re.escape(WAITING) + " #2 ")
    assert "#1" not in status_row(term)
    term.sendline("/reject 1 stale")
    term.expect_new("rejected")
    sent = len(model_server.chat_bodies)
    term.sendline("/approve 2")
    term.expect_new("Noted: applied.")  # the agent's own request: its outcome goes back
    assert len(model_server.chat_bodies) == sent + 1
    assert "approval #2" in json.dumps(model_server.chat_bodies[-1]["messages"][-1])
    settle(term)
    assert WAITING not in term.text()
