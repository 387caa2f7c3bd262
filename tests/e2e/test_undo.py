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
