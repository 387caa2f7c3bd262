"""Honest endings, drawn in a real pseudo-terminal at 80 columns with the real test model
server (GBR-TRUTH-01): every turn ends with one dim line naming the files it actually
changed, from the checkpoints and never from the model's words, and an answer cut at
the model's token limit says so."""

from __future__ import annotations

import re

from tests.e2e.conftest import spawn_node
from tests.e2e.terminal import Terminal
from tests.support.replies import text_reply, tool_call_reply

COLS = 80
DIM = "\x1b[2m"


def start(project) -> Terminal:
    env = {"TERM": "xterm-256color"}
    child = spawn_node(project, "run", env=env, dimensions=(40, COLS), color=True)
    term = Terminal(child, rows=40, cols=COLS)
    term.expect("/help for commands")
    return term


def drawn_dim(term: Terminal, text: str) -> bool:
    """True when `text` was written right after the dim attribute was switched on."""
    raw = "".join(term.raw)
    return re.search(re.escape(DIM) + r"(\x1b\[[0-9;]*m)*" + re.escape(text), raw) is not None


def test_a_turn_ends_naming_the_files_it_changed_not_what_the_model_claims(project, model_server):
    """GBR-TRUTH-01: the claim says 9090 in config.toml; the line says what was written."""
    (project / "utils.py").write_text("def f():\n    return 1\n")
    model_server.enqueue(
        tool_call_reply("write_file", {"path": "app.py", "content": "x = 1\n"}),
        tool_call_reply(
            "edit_file", {"path": "utils.py", "old_string": "return 1", "new_string": "return 2"}
        ),
        tool_call_reply("edit_file", {"path": "utils.py", "old_string": "nope", "new_string": "x"}),
        text_reply("I changed the port to 9090 in config.toml."),
        text_reply("It is 42."),
    )
    term = start(project)
    try:
        term.sendline("change things")
        term.expect("9090")
        term.expect(r"changed: app\.py, utils\.py")
        rows = term.rows()
        [row] = [r for r in rows if r.startswith("changed:")]
        assert row == "changed: app.py, utils.py" and len(row) <= COLS
        assert "config.toml" not in row
        assert drawn_dim(term, "changed: app.py, utils.py")

        term.sendline("what is the answer?")
        term.expect_new("It is 42.")
        term.expect_new("changed: no files")
        assert drawn_dim(term, "changed: no files")
    finally:
        term.child.terminate(force=True)


def test_an_answer_cut_at_the_token_limit_says_so(project, model_server):
    """GBR-TRUTH-01: finish_reason "length" ends the turn with a dim line saying so."""
    model_server.enqueue(text_reply("The three steps are: first, sec", finish="length"))
    term = start(project)
    try:
        term.sendline("list the steps")
        line = "answer cut at the model's token limit (max_tokens)"
        term.expect(re.escape(line))
        term.expect("changed: no files")
        rows = term.rows()
        cut_at = rows.index(line)
        assert rows[cut_at + 1].startswith("(") and rows[cut_at + 2] == "changed: no files"
        assert drawn_dim(term, line)
    finally:
        term.child.terminate(force=True)
