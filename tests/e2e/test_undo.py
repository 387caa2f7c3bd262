"""Undo through a real pseudo-terminal and the real test model server (GBR-UNDO-01):
a turn's changes taken back with /undo, and the undo taken back from another terminal
with `gbr-node undo` while the node runs (SQLite WAL)."""

from __future__ import annotations

import os

from tests.e2e.conftest import gbr
from tests.support.replies import text_reply, tool_call_reply


def test_undo_takes_a_turn_back_exactly_and_gbr_node_undo_redoes_it(
    project, run_node, model_server
):
    """GBR-UNDO-01: bytes and modes come back, one line per path; the model is told."""
    (project / "app.py").write_text("x = 1\n")
    (project / "b.txt").write_text("bee\n")
    os.chmod(project / "b.txt", 0o600)
    (project / "old.txt").write_text("old\n")
    model_server.enqueue(
        tool_call_reply("read_file", {"path": "app.py"}),  # replaced whole only once read
        tool_call_reply("write_file", {"path": "app.py", "content": "x = 2\n"}),
        tool_call_reply("edit_file", {"path": "b.txt", "old_string": "bee", "new_string": "w"}),
        tool_call_reply("write_file", {"path": "stray.txt", "content": "s\n"}),
        tool_call_reply("delete_path", {"path": "old.txt"}),
        text_reply("Done."),
        text_reply("All clear now."),
    )
    term = run_node()
    term.sendline("change things")
    term.expect("Done.")
    term.expect("idle")
    assert (project / "app.py").read_text() == "x = 2\n"
    term.sendline("/undo")
    term.expect("removed stray.txt")
    screen = term.text()
    for line in ("restored app.py", "restored b.txt", "recreated old.txt"):
        assert line in screen
    assert (project / "app.py").read_text() == "x = 1\n"
    assert (project / "b.txt").read_text() == "bee\n"
    assert (project / "b.txt").stat().st_mode & 0o777 == 0o600
    assert (project / "old.txt").read_text() == "old\n"
    assert not (project / "stray.txt").exists()

    listing = gbr(project, "checkpoints")
    assert listing.returncode == 0 and "undo" in listing.stdout and "app.py" in listing.stdout
    undo_id = listing.stdout.split()[0].lstrip("#")  # the newest: the undo itself
    redo = gbr(project, "undo", "--turn", undo_id)
    assert redo.returncode == 0, redo.stderr
    assert (project / "app.py").read_text() == "x = 2\n" and (project / "stray.txt").exists()

    term.sendline("what happened?")
    term.expect("All clear now.")
    told = [m for m in model_server.requests[-1].body["messages"] if m["role"] == "user"]
    assert any("undid your changes" in str(m["content"]) for m in told), told


def test_gbr_node_tool_changes_are_checkpointed_and_undone(fresh):
    """GBR-UNDO-01: a `gbr-node tool` write is kept first, labelled as the command's."""
    (fresh / "notes.txt").write_text("first\n")
    wrote = gbr(fresh, "tool", "write_file", '{"path": "notes.txt", "content": "second\\n"}')
    assert wrote.returncode == 0, wrote.stderr
    assert (fresh / "notes.txt").read_text() == "second\n"
    listing = gbr(fresh, "checkpoints")
    assert "call command" in listing.stdout and "notes.txt" in listing.stdout, listing.stdout
    group = listing.stdout.split()[0].lstrip("#")
    undone = gbr(fresh, "undo", "--turn", group)
    assert undone.returncode == 0 and "restored notes.txt" in undone.stdout, undone.stderr
    assert (fresh / "notes.txt").read_text() == "first\n"


def test_undo_after_kill_9_of_the_node_mid_turn_restores_the_prior_state(
    project, run_node, model_server
):
    """GBR-UNDO-01: the node dies (SIGKILL) right after its write, while the turn still
    waits for the model; `gbr-node undo` from another process takes the write back."""
    import signal

    (project / "app.py").write_text("x = 1\n")
    os.chmod(project / "app.py", 0o640)
    model_server.enqueue(
        tool_call_reply("read_file", {"path": "app.py"}),  # replaced whole only once read
        tool_call_reply("write_file", {"path": "app.py", "content": "x = 2\n"}),
        tool_call_reply("write_file", {"path": "new.txt", "content": "n\n"}),
        text_reply("never seen", pieces=50, delay_s=1.0),
    )
    term = run_node()
    term.sendline("change app.py")
    term.expect(r"✓ write_file path=new\.txt")
    assert (project / "app.py").read_text() == "x = 2\n" and (project / "new.txt").exists()
    term.child.kill(signal.SIGKILL)
    term.child.wait()

    listing = gbr(project, "checkpoints")
    assert "app.py, new.txt" in listing.stdout, listing.stdout + listing.stderr
    undone = gbr(project, "undo")
    assert undone.returncode == 0, undone.stderr
    assert "restored app.py" in undone.stdout and "removed new.txt" in undone.stdout
    assert (project / "app.py").read_text() == "x = 1\n"
    assert (project / "app.py").stat().st_mode & 0o777 == 0o640
    assert not (project / "new.txt").exists()
