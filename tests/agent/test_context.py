"""GBR-CTX-01, the pure parts: estimates, cuts, compaction, window reports, journal replay."""

from __future__ import annotations

import json

import pytest

from gbr_node.agent.context import ContextManager, Window, short_spec
from gbr_node.agent.journal import Journal, read_journal
from gbr_node.agent.session import Session
from gbr_node.agent.tokens import cut_tool_result, request_tokens, text_tokens
from gbr_node.llm.window import (
    OLLAMA_DEFAULT_NUM_CTX,
    from_llama_props,
    from_model_list,
    from_ollama_show,
    is_context_overflow,
    reported_limit,
)
from tests.support.chat_rules import chat_request_problem

BIG = "\n".join(f"{n:>6}\tline {n} of a long file, with some words in it" for n in range(1, 800))


def numbered(first: int, last: int) -> str:
    head = f"big.txt: lines {first}-{last} of 799"
    return head + "\n" + "\n".join(BIG.split("\n")[first - 1 : last])


def add_turn(session: Session, n: int, *, result: str = "ok", tool: str = "read_file", **meta):
    session.append({"role": "user", "content": f"request {n}"})
    call = {"id": f"c{n}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
    session.append({"role": "assistant", "content": None, "tool_calls": [call]})
    session.append({"role": "tool", "tool_call_id": f"c{n}", "content": result}, tool=tool, **meta)
    session.append({"role": "assistant", "content": f"answer {n}"})


def valid(messages) -> bool:
    return chat_request_problem({"model": "m", "messages": messages}) is None


def test_a_read_file_result_is_cut_at_a_line_with_the_offset_and_limit_to_read_on():
    text = numbered(1, 799)
    cut = cut_tool_result(text, 300, "read_file")
    assert text_tokens(cut) <= 300 + 60
    last_line = cut.split("\n")[-2]
    shown = int(last_line.split("\t")[0])
    assert cut.endswith(f"call read_file with offset={shown + 1} and limit={shown} to read on]")
    assert cut_tool_result("short", 300, "read_file") == "short"


def test_another_tool_result_is_cut_with_what_was_left_out():
    cut = cut_tool_result("x" * 10_000, 100, "run_command")
    assert "more characters not shown" in cut and len(cut) < 1000


def test_the_estimate_counts_messages_tool_calls_and_specs():
    call = {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}" * 300}}
    small = request_tokens([{"role": "user", "content": "hi"}], [])
    assert request_tokens([{"role": "assistant", "tool_calls": [call]}], []) > 150
    assert request_tokens([{"role": "user", "content": "hi"}], [{"x": "y" * 900}]) > small + 250


def test_nothing_changes_while_the_request_fits():
    session = Session("sys")
    add_turn(session, 1)
    prepared = ContextManager(Window(100_000, "t")).prepare(session, [])
    assert prepared.notice is None and session.cut == 1
    assert [m["role"] for m in prepared.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_compaction_keeps_system_last_request_approvals_files_and_a_valid_conversation():
    session = Session("sys prompt")
    add_turn(session, 1, result="pending approval #7", tool="write_file", approval_id=7, path="p")
    add_turn(session, 2, result="written", tool="write_file", changed="src/a.py")
    add_turn(session, 3, result="pending approval #8", tool="edit_file", approval_id=8, path="q")
    session.append({"role": "user", "content": "[approval #8 decided] applied"}, decided=8)
    session.append({"role": "assistant", "content": "ok"})
    for n in range(4, 30):
        add_turn(session, n, result=numbered(1, 200))
    session.append({"role": "user", "content": "the last request"})
    context = ContextManager(Window(4096, "t"))
    prepared = context.prepare(session, [])
    assert prepared.fits and prepared.notice.startswith("context ")
    assert "compacted" in prepared.notice
    messages = list(prepared.messages)
    assert valid(messages)
    assert messages[-1] == {"role": "user", "content": "the last request"}
    system = messages[0]["content"]
    assert system.startswith("sys prompt")
    (pending,) = [line for line in system.splitlines() if line.startswith("Approvals still")]
    assert "#7 write_file p" in pending and "#8" not in pending
    assert "src/a.py" in system
    assert "request 1" in system  # the first request is always quoted
    assert len(session.entries) > 100  # nothing deleted


def test_old_big_results_are_shortened_before_turns_are_left_out():
    session = Session("sys")
    for n in range(1, 4):
        add_turn(session, n, result=numbered(1, 100))
    session.append({"role": "user", "content": "now"})
    context = ContextManager(Window(1200, "t"))
    prepared = context.prepare(session, [])
    assert "shortened" in prepared.notice and "compacted" not in prepared.notice
    assert session.cut == 1 and prepared.fits
    assert any(
        "left out to fit the context window" in (m.get("content") or "") for m in prepared.messages
    )


def test_compact_by_hand_keeps_the_last_turn_only():
    session = Session("sys")
    for n in range(1, 4):
        add_turn(session, n)
    prepared = ContextManager(Window(100_000, "t")).prepare(session, [], mode="manual")
    assert prepared.notice.endswith("compacted 2 old turns")
    assert [m.get("content") for m in prepared.messages if m["role"] == "user"] == ["request 3"]
    again = ContextManager(Window(100_000, "t")).prepare(session, [], mode="manual")
    assert again.notice.endswith("nothing left to compact")


def test_the_server_count_corrects_the_estimate_within_bounds():
    context = ContextManager(Window(4096, "t"))
    context.observe(1000, 1500)
    assert context.ratio == 1.5
    context.observe(1000, 10)
    assert context.ratio == 0.7
    context.observe(1000, "many")
    assert context.ratio == 0.7
    context.server_overflow(2048)
    assert context.window == Window(2048, "the model server's error answer")


def test_short_specs_keep_names_types_and_required_but_not_prose():
    tool = {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Create a file. It replaces an existing one.",
            "parameters": {
                "type": "object",
                "title": "WriteFileParams",
                "properties": {
                    "title": {"type": "string", "description": "a parameter named title"},
                    "content": {"type": "string", "title": "Content"},
                },
                "required": ["title", "content"],
            },
        },
    }
    short = short_spec(tool)["function"]
    assert short["description"] == "Create a file"
    assert short["parameters"] == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "content": {"type": "string"}},
        "required": ["title", "content"],
    }
    many = [json.loads(json.dumps(tool).replace("write_file", f"t{n}")) for n in range(60)]
    sent = ContextManager(Window(4096, "t")).fit_tools(many)
    assert 0 < len(sent) < 60 and request_tokens([], sent) <= 0.3 * 4096
    assert ContextManager(Window(1_000_000, "t")).fit_tools(many) == many


def test_compaction_survives_a_journal_replay(tmp_path):
    path = tmp_path / "s.jsonl"
    journal = Journal(path)
    session = Session("sys", on_change=journal.record)
    for n in range(1, 20):
        add_turn(session, n, result=numbered(1, 150))
    session.append({"role": "user", "content": "last"})
    ContextManager(Window(4096, "t")).prepare(session, [])
    journal.close()
    replayed = Session("sys")
    for op, payload in read_journal(path):
        replayed.apply(op, payload)
    assert (replayed.cut, replayed.trimmed) == (session.cut, session.trimmed)
    assert len(replayed.entries) == len(session.entries)
    replayed.clear()
    assert (replayed.cut, replayed.trimmed) == (1, frozenset())


def test_a_cut_that_is_not_a_turn_start_is_refused():
    session = Session("sys")
    add_turn(session, 1)
    with pytest.raises(ValueError, match="not the start of a turn"):
        session.compact(2, frozenset())


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, '{"error":{"code":"context_length_exceeded","message":"too long"}}'),
        (400, "This model's maximum context length is 4096 tokens. However, you asked 5000"),
        (400, '{"error":{"type":"exceed_context_size_error","n_ctx":4096}}'),
        (400, "the request exceeds the available context size, try increasing it"),
        (400, "The input token count (40000) exceeds the maximum number of tokens allowed"),
        (413, "prompt is too long: 210000 tokens > 200000 maximum"),
    ],
)
def test_context_errors_of_known_servers_are_recognised(status, body):
    assert is_context_overflow(status, body)


@pytest.mark.parametrize(
    ("status", "body"),
    [(401, "maximum context length"), (400, "invalid tool name"), (429, "too many requests")],
)
def test_other_errors_are_not_context_errors(status, body):
    assert not is_context_overflow(status, body)


def test_the_stated_limit_is_read():
    assert reported_limit("maximum context length is 4096 tokens") == 4096
    assert reported_limit('{"n_ctx": 8192, "n_prompt_tokens": 9000}') == 8192
    assert reported_limit("too long") is None


def test_window_reports_of_llama_cpp_vllm_and_ollama():
    assert from_llama_props({"default_generation_settings": {"n_ctx": 4096}}) == 4096
    assert from_llama_props({"n_ctx": 2048}) == 2048
    assert from_llama_props({"default_generation_settings": {"n_ctx": True}}) is None
    vllm = {"data": [{"id": "a", "max_model_len": 32768}, {"id": "b", "max_model_len": 8}]}
    assert from_model_list(vllm, "a") == 32768
    assert from_model_list(vllm, "c") is None
    llama = {"data": [{"id": "x", "meta": {"n_ctx": 4096, "n_ctx_train": 8192}}]}
    assert from_model_list(llama, "other") == 4096
    assert from_model_list({"data": [{"id": "x"}]}, "x") is None
    show = {"model_info": {"llama.context_length": 131072}, "parameters": "num_ctx 16384\n"}
    assert from_ollama_show(show) == 16384
    assert from_ollama_show({"model_info": {}}) == OLLAMA_DEFAULT_NUM_CTX
    assert from_ollama_show({"error": "no such model"}) is None
