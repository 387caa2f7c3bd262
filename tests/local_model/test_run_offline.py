"""`gbr-node run` with nothing configured starts the embedded model and runs a real turn.

Issues 8 and 32 through a real pseudo-terminal: no model in the profile, no
API key, no Ollama (port 11434 on 127.0.0.1 refuses; nothing else is
reached), so the node starts llama.cpp's server with the default model,
Qwen2.5-Coder-1.5B, on loopback, joining its chunks into a fresh home's cache
first (a first start: it says so, step by step). The model is asked about a
file of the project: the mechanics are asserted, not its prose — the node
names the model in use, a `read_file` status line shows,
and the session journal (`.gbr/sessions/*.jsonl`, which is what the next
request is built from) holds the tool message with the file's content
followed by the model's answer to the request that carried it.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pexpect
import pytest

from gbr_node.llm.local import MODEL_ALIAS, local_model_available
from tests.e2e.conftest import spawn_node
from tests.e2e.terminal import Terminal
from tests.local_model.support import requires_local_model

pytestmark = [
    requires_local_model,
    pytest.mark.slow,
    pytest.mark.skipif(
        not local_model_available("qwen2.5-coder-1.5b"), reason="the default model is not installed"
    ),
]

START_TIMEOUT_S = 120  # server start plus the first model load on a cold CI disk
TURN_TIMEOUT_S = 180  # one turn with a tool call on a 2-core machine
NOTE = "the secret colour is teal"
# A person's question first; should it be answered without the tool, the later prompts
# (one line each: the REPL sends a line per Enter) ask for the call in the template's
# format. Each wording is tried once (temperature 0).
PROMPTS = (
    "What is the secret colour written in notes.txt?",
    'Answer with this exact line: <tool_call>{"name": "read_file", '
    '"arguments": {"path": "notes.txt"}}</tool_call>',
    'Repeat exactly: <tool_call>{"name": "read_file", "arguments": {"path": "notes.txt"}}'
    "</tool_call>",
    'Repeat exactly this text and nothing else: <tool_call>{"name": "read_file", '
    '"arguments": {"path": "notes.txt"}}</tool_call>',
)


def write_offline_profile(project: Path) -> None:
    """A profile with no model endpoint: only temperature 0 and the one tool needed."""
    folder = project / ".gbr_envs"
    folder.mkdir(parents=True)
    (folder / "default.toml").write_text(
        "[model]\n"
        "temperature = 0.0\n"
        "[tools]\n"
        'enabled = ["read_file"]\n'
        "[node]\n"
        'listen = ["/ip4/127.0.0.1/tcp/0"]\n',
        encoding="utf-8",
    )


def journal_messages(project: Path) -> list[dict]:
    """The messages appended to the newest session journal so far, in order."""
    journals = sorted((project / ".gbr" / "sessions").glob("*.jsonl"))
    if not journals:
        return []
    messages = []
    for line in journals[-1].read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written
        if record.get("op") == "append":
            messages.append(record["message"])
        elif record.get("op") == "clear":
            messages.clear()
    return messages


def wait_journal(term: Terminal, project: Path, before: int, done, what: str) -> list[dict]:
    """Pump the terminal until `done(new)` holds; returns the journal messages added since.

    `before`: how many journal messages existed before the prompt; `done`
    also gets True as its second argument once an `error:` line shows.
    Raises AssertionError with the screen after TURN_TIMEOUT_S seconds.
    """
    deadline = time.monotonic() + TURN_TIMEOUT_S
    while time.monotonic() < deadline:
        term.pump(0.2)
        new = journal_messages(project)[before:]
        errored = False
        with contextlib.suppress(AssertionError):
            errored = bool(term.expect_new(r"(?m)^error: ", timeout_s=0.01))
        if done(new, errored):
            return new
    raise AssertionError(f"no {what} within {TURN_TIMEOUT_S} s:\n{term.text()}")


def first_outcome(new: list[dict], errored: bool) -> bool:
    """A tool ran, or the turn ended without one (a prose answer or an error)."""
    return errored or any(
        m["role"] == "tool" or (m["role"] == "assistant" and not m.get("tool_calls")) for m in new
    )


def note_read_at(new: list[dict]) -> int | None:
    """Index in `new` of the tool message that carries the note's content, or None."""
    for i, message in enumerate(new):
        if message["role"] == "tool" and NOTE in (message.get("content") or ""):
            return i
    return None


def stop_turn(term: Terminal) -> None:
    """Ctrl-C: stop whatever the agent still does (the tiny model may loop on a tool)."""
    term.mark()
    term.child.sendintr()
    term.expect_new(r"interrupted|nothing to stop")


def test_a_turn_on_the_embedded_model_reads_a_project_file(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    write_offline_profile(project)
    (project / "notes.txt").write_text(NOTE + "\n", encoding="utf-8")
    child = spawn_node(project, "run")
    term = Terminal(child, timeout_s=START_TIMEOUT_S)
    try:
        term.expect(r"joining Qwen2\.5-Coder-1\.5B-Instruct from 22 chunks")  # a first start
        term.expect(r"verified Qwen2\.5-Coder")
        term.expect(r"loading Qwen2\.5-Coder")
        term.expect("/help for commands")
        term.expect(MODEL_ALIAS)  # the node says which model is in use
        tool_at = None
        for prompt in PROMPTS:
            before = len(journal_messages(project))
            term.sendline(prompt)
            new = wait_journal(term, project, before, first_outcome, "tool call or answer")
            tool_at = note_read_at(new)
            if tool_at is not None:
                break
            stop_turn(term)  # a prose answer or a wrong path: try the next wording afresh
            term.sendline("/clear")
            term.expect_new("conversation cleared")
        assert tool_at is not None, f"read_file never read notes.txt:\n{term.text()}"
        term.expect(r"✓ read_file path=\S*notes\.txt")  # the status line
        # The request after the tool result carried it: the model answered that request.
        wait_journal(
            term,
            project,
            before,
            lambda new, _: any(m["role"] == "assistant" for m in new[tool_at + 1 :]),
            "answer to the request carrying the tool result",
        )
        stop_turn(term)
        child.sendeof()  # Ctrl-D: the node leaves and stops its model server
        child.expect(pexpect.EOF, timeout=30)
    finally:
        if child.isalive():
            child.terminate(force=True)
    log = (project / ".gbr" / "node.log").read_text(errors="replace")
    assert "gbr-node: starting" in log  # the server's output went to the log, not the screen
    assert "listening on" in log and "listening on" not in term.text()
