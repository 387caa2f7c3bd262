"""Session history and its JSONL journal (`--resume` replays it)."""

import os

from gbr_node.agent.journal import Journal, latest_journal, new_journal_path, read_journal
from gbr_node.agent.session import Session
from tests.support.chat_rules import chat_request_problem


def journaled(tmp_path):
    journal = Journal(new_journal_path(tmp_path))
    return Session("sys", on_change=journal.record), journal


def replay(path, prompt="sys"):
    session = Session(prompt)
    for op, payload in read_journal(path):
        session.apply(op, payload)
    return session


def test_replayed_journal_restores_the_same_conversation(tmp_path):
    session, journal = journaled(tmp_path)
    session.append({"role": "user", "content": "héllo"})
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    session.append({"role": "assistant", "content": None, "tool_calls": [call]})
    session.append({"role": "tool", "tool_call_id": "c1", "content": "a.txt"}, tool="ls")
    session.replace_system("new rules")
    journal.close()
    restored = replay(latest_journal(tmp_path))
    assert restored.request_messages() == session.request_messages()
    assert restored.entries[-1].meta == {"tool": "ls"}
    assert restored.system_prompt == "new rules"


def test_torn_last_line_after_a_crash_is_skipped(tmp_path):
    session, journal = journaled(tmp_path)
    session.append({"role": "user", "content": "kept"})
    journal.close()
    with open(journal.path, "a", encoding="utf-8") as f:
        f.write('{"op": "append", "message": {"role": "us')
    restored = replay(journal.path)
    assert restored.request_messages()[-1] == {"role": "user", "content": "kept"}


def test_journal_file_is_private(tmp_path):
    _, journal = journaled(tmp_path)
    assert os.stat(journal.path).st_mode & 0o077 == 0


def test_unanswered_tool_call_is_repaired_before_sending():
    session = Session("sys")
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    session.append({"role": "assistant", "content": None, "tool_calls": [call]})
    session.append({"role": "user", "content": "after a crash"})
    session.append({"role": "tool", "tool_call_id": "nobody", "content": "orphan"})
    msgs = session.request_messages()
    assert_valid(msgs)
    assert msgs[2]["tool_call_id"] == "c1" and "not executed" in msgs[2]["content"]
    assert all(m.get("content") != "orphan" for m in msgs)


def test_clear_keeps_only_the_system_message():
    session = Session("sys")
    session.append({"role": "user", "content": "x"})
    session.clear()
    assert [m["role"] for m in session.request_messages()] == ["system"]


def assert_valid(messages):
    """The request the agent would send passes the chat-completions rules."""
    assert chat_request_problem({"model": "m", "messages": list(messages)}) is None
