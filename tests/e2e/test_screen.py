"""What the person sees of a streamed answer, drawn by a VT100 emulator (GBR-TERM-01).

`gbr-node run` in a real pseudo-terminal of 40, 80 and 200 columns streams an
answer of several hundred words from the test model server while the person
types and deletes, the window is resized, an approval request and a profile
reload arrive. Afterwards the terminal's scrollback (rows scrolled off the
top, then the screen) must hold the whole answer exactly once, in order, with
no notice and no typed character inside it.
"""

from __future__ import annotations

import re
import time

import pytest

from gbr_node.approvals import ApprovalLog, default_path
from gbr_node.errors import ApprovalRequired
from tests.e2e.conftest import spawn_node, write_profile
from tests.e2e.terminal import Terminal
from tests.support.replies import text_reply

FAST_WATCH = "[watch]\npoll_interval_s = 0.1\n"
BASES = [
    "a",
    "to",
    "the",
    "word",
    "quick",
    "stream",
    "answers",
    "terminal",
    "wrapping",
    "exactness",
]
WORD = re.compile(r"\b[a-z]+\d{3}q\b")
STREAM_S = 10.0  # the whole answer streams over about this long


def long_answer(words: int = 320, paragraph: int = 90) -> tuple[str, list[str]]:
    """`words` unique words of varied lengths in paragraphs; (text, the words in order)."""
    tokens = [f"{BASES[(n * 7) % len(BASES)]}{n:03d}q" for n in range(words)]
    parts = []
    for n, token in enumerate(tokens):
        sep = "\n\n" if n and n % paragraph == 0 else " "
        parts.append(token if n == 0 else sep + token)
    return "".join(parts), tokens


def start(project, model_server, *, cols: int, rows: int = 24, color: bool = True) -> Terminal:
    env = {"TERM": "xterm-256color"}
    child = spawn_node(project, "run", env=env, dimensions=(rows, cols), color=color)
    term = Terminal(child, rows=rows, cols=cols)
    term.expect("/help for commands")
    return term


def answer_rows(term: Terminal, words: list[str]) -> list[str]:
    """The rows from the one holding the first word to the one holding the last."""
    rows = term.rows()
    first = next(i for i, row in enumerate(rows) if words[0] in WORD.findall(row))
    last = max(i for i, row in enumerate(rows) if words[-1] in WORD.findall(row))
    return rows[first : last + 1]


def wait_for(term: Terminal, predicate, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{term.transcript()}")
        term.pump(0.02)


def type_slowly(term: Terminal, text: str) -> None:
    for char in text:
        term.child.send(char)
        term.pump(0.03)


@pytest.mark.parametrize(
    ("cols", "color"), [(40, True), (80, True), (80, False), (200, True)], ids=str
)
def test_a_long_answer_reaches_the_scrollback_whole_and_once(tmp_path, model_server, cols, color):
    project = tmp_path / "project"
    project.mkdir()
    profile = write_profile(project, model_server.base_url, extra=FAST_WATCH)
    (project / "pyproject.toml").write_text("[project]\n")
    text, words = long_answer()
    pieces = len(text) // 7
    model_server.enqueue(text_reply(text, pieces=pieces, delay_s=STREAM_S / pieces))
    term = start(project, model_server, cols=cols, color=color)
    try:
        term.sendline("tell me a long story")
        term.expect(re.escape(words[20]))

        # the person types and deletes while it streams
        type_slowly(term, "draft one")
        term.child.send("\x7f" * 3)
        type_slowly(term, "two")

        # an approval request and a profile reload arrive mid-stream
        with ApprovalLog(default_path(project)) as log:
            absolute = str(project / "pyproject.toml")
            request = ApprovalRequired("write_file", "pyproject.toml", absolute, "x = 1\n")
            log.request(request, "local", None, None)
        profile.write_text(profile.read_text().replace("a test agent", "a pirate"))
        term.expect(r"» approval #1 requested")
        term.expect(r"» profile default reloaded")

        # the window is resized, wider then back
        term.resize(cols + 20)
        term.pump(0.5)
        term.resize(cols)
        type_slowly(term, "!")

        term.expect(r"tokens in · \d+ out", timeout_s=STREAM_S * 4)
        term.expect(r"\+x = 1")  # the diff, after the answer
        # what was typed is still on the input line, drawn again under the notices
        wait_for(term, lambda: term.rows()[-1].startswith("› draft two!"), "the input line")

        seen = WORD.findall(term.transcript())
        assert seen == words, _difference(seen, words)
        inside = answer_rows(term, words)
        for row in inside:
            assert not re.search(r"approval|reloaded|draft|queued|›|idle", row), row
        transcript = term.transcript()
        assert transcript.count("draft") == 1  # only in the input line
        after = transcript[transcript.index(words[-1]) :]
        assert "approval #1 requested" in after and "profile default reloaded" in after
    finally:
        term.child.terminate(force=True)


def _difference(seen: list[str], words: list[str]) -> str:
    missing = [w for w in words if w not in seen]
    repeated = sorted({w for w in seen if seen.count(w) > 1})
    order = next((n for n, (a, b) in enumerate(zip(seen, words, strict=False)) if a != b), None)
    return f"missing {missing[:10]}, repeated {repeated[:10]}, first out of order at {order}"


def test_narrowing_the_window_mid_stream_rewraps_the_rest_and_leaves_no_stray_rows(
    tmp_path, model_server
):
    project = tmp_path / "project"
    project.mkdir()
    write_profile(project, model_server.base_url)
    text, words = long_answer(200)
    pieces = len(text) // 7
    model_server.enqueue(text_reply(text, pieces=pieces, delay_s=5.0 / pieces))
    term = start(project, model_server, cols=80)
    try:
        term.sendline("tell me a story")
        term.expect(re.escape(words[30]))
        term.pump(0.01)
        drawn_before = set(WORD.findall(term.transcript()))
        term.resize(50)  # rows already drawn are cut by the terminal, as xterm does
        term.expect(r"tokens in · \d+ out", timeout_s=30)
        seen = WORD.findall(term.transcript())
        assert len(seen) == len(set(seen)), "a word was drawn twice"
        assert seen == [w for w in words if w in seen], "out of order"
        assert [w for w in words if w not in drawn_before and w not in seen] == []
        assert all(len(row) <= 50 for row in answer_rows(term, [seen[-40], words[-1]]))
        stray = [row for row in term.rows()[:-2] if re.search(r"streaming|idle ·|^›  ", row)]
        assert stray == []
    finally:
        term.child.terminate(force=True)


@pytest.mark.parametrize("cols", [40, 80, 200])
def test_a_window_widened_mid_answer_and_narrowed_back_loses_no_word(tmp_path, model_server, cols):
    # A window dragged wider for a moment, then back, mid-answer. Rows the
    # terminal already shows are never redrawn, and narrowing cuts (xterm, pyte)
    # or re-wraps them: rows laid out at the wider width would lose the words
    # past the old edge. Waiting for words (not for time) makes sure rows were
    # written while the window was wide; with the answer laid out at its
    # narrowest width, none of them is wider than the window it ends in.
    project = tmp_path / "project"
    project.mkdir()
    write_profile(project, model_server.base_url)
    text, words = long_answer()
    pieces = len(text) // 7
    model_server.enqueue(text_reply(text, pieces=pieces, delay_s=STREAM_S / pieces))
    term = start(project, model_server, cols=cols)
    try:
        term.sendline("tell me a long story")
        term.expect(re.escape(words[10]))
        term.resize(cols + 20)
        at = words.index(WORD.findall(term.transcript())[-1])
        wide_rows = 3 * (cols + 20) // len("wrapping000q ")  # words on about 3 wide rows
        term.expect(re.escape(words[at + wide_rows]), timeout_s=STREAM_S * 4)
        term.resize(cols)
        term.expect(r"tokens in · \d+ out", timeout_s=STREAM_S * 4)
        seen = WORD.findall(term.transcript())
        assert seen == words, _difference(seen, words)
        assert all(len(row) <= cols for row in answer_rows(term, words))
    finally:
        term.child.terminate(force=True)


@pytest.mark.parametrize(("cols", "color"), [(40, True), (80, True), (80, False)], ids=str)
def test_the_node_s_own_lines_wrap_at_word_boundaries(tmp_path, model_server, cols, color):
    """issue 34: the banner, notices and the usage line broke words at the terminal's edge
    (`namesp|aces`, `tool call|s`); every word of them now stays whole on one row."""
    project = tmp_path / "project"
    project.mkdir()
    write_profile(project, model_server.base_url)
    model_server.enqueue(text_reply("Fine."))
    term = start(project, model_server, cols=cols, color=color)
    term.sendline("hello")
    term.expect_new("Fine.")
    term.expect_new("changed: no files")
    rows = [row.rstrip() for row in term.rows()]
    words = ["namespaces", "read-only", "confined:", "commands", "Ctrl-D", "leaves"]
    text = "\n".join(rows)
    for word in words:
        if word in "".join(rows):  # said on screen, maybe across a row's edge
            assert word in text, f"{word!r} broken across rows at {cols} columns:\n{text}"
    for row in rows:
        assert len(row) <= cols
