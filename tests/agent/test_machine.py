"""The agent state machine (ADR-0012b, ADR-0010), driven message by message."""

import pytest

from gbr_node.agent.machine import (
    AgentMachine,
    CancelInference,
    RunTool,
    Show,
    StartInference,
    State,
    UnexpectedMessage,
)
from gbr_node.agent.messages import (
    Interrupt,
    InterruptAndSuggest,
    OracleChunk,
    OracleDone,
    OracleFailed,
    ToolExecutionFeedback,
    UpdateEnv,
    UserPrompt,
)
from gbr_node.agent.session import INTERRUPTED_MARK, Session
from gbr_node.llm.events import InvalidToolCall, ToolCall
from tests.support.chat_rules import chat_request_problem

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


def make(max_steps=25):
    return AgentMachine(Session("be brief"), lambda: TOOLS, max_steps=max_steps)


def only(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def ok(prompt_id, call_id, text="done"):
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return ToolExecutionFeedback(prompt_id, call_id, "read_file", result=result)


def call(call_id, path="a.txt"):
    return ToolCall(call_id, "read_file", {"path": path}, f'{{"path": "{path}"}}')


def test_prompt_starts_an_inference_with_system_first_and_tools():
    m = make()
    (start,) = only(m.handle(UserPrompt("hi")), StartInference)
    assert m.state is State.STREAMING
    assert [x["role"] for x in start.prompt.messages] == ["system", "user"]
    assert start.prompt.messages[0]["content"].startswith("be brief")
    assert start.prompt.tools == tuple(TOOLS)


def test_plain_answer_ends_the_turn_and_is_kept_in_history():
    m = make()
    pid = only(m.handle(UserPrompt("hi")), StartInference)[0].prompt.prompt_id
    assert m.handle(OracleChunk(pid, "text", "Hel")) == [Show("text", "Hel")]
    actions = m.handle(OracleDone(pid, "Hello"))
    assert Show("turn_end") in actions
    assert m.state is State.IDLE
    assert m.session.request_messages()[-1] == {"role": "assistant", "content": "Hello"}


def test_tool_calls_run_concurrently_and_reprompt_when_all_results_are_in():
    m = make()
    pid = only(m.handle(UserPrompt("read two")), StartInference)[0].prompt.prompt_id
    actions = m.handle(OracleDone(pid, "", (call("c1"), call("c2", "b.txt"))))
    assert [a.call.id for a in only(actions, RunTool)] == ["c1", "c2"]
    assert m.state is State.AWAITING_TOOLS
    assert not only(m.handle(ok(pid, "c2", "B")), StartInference)
    (start,) = only(m.handle(ok(pid, "c1", "A")), StartInference)
    msgs = list(start.prompt.messages)
    assert_valid(msgs)
    # tool results are in the order of the calls, whatever order they arrived in
    assert [(x["tool_call_id"], x["content"]) for x in msgs[-2:]] == [("c1", "A"), ("c2", "B")]
    assert start.prompt.prompt_id != pid


def test_late_feedback_of_an_interrupted_turn_is_stale_and_not_added():
    m = make()
    pid = only(m.handle(UserPrompt("go")), StartInference)[0].prompt.prompt_id
    m.handle(OracleDone(pid, "", (call("c1"),)))
    m.handle(Interrupt())
    before = m.session.request_messages()
    (shown,) = m.handle(ok(pid, "c1", "LATE"))
    assert shown.kind == "stale"
    assert m.session.request_messages() == before
    assert_valid(before)
    assert "not awaited" in before[-1]["content"]
    # recorded for /history and the journal, marked stale
    assert m.session.entries[-1].message["content"] == "LATE"
    assert m.session.entries[-1].meta["stale"] is True


def test_stale_result_arriving_mid_turn_keeps_the_next_request_valid():
    m = make()
    old = only(m.handle(UserPrompt("go")), StartInference)[0].prompt.prompt_id
    m.handle(OracleDone(old, "", (call("c1"),)))
    new = only(m.handle(InterruptAndSuggest("other")), StartInference)[0].prompt.prompt_id
    m.handle(OracleDone(new, "", (call("c2"),)))
    m.handle(ok(old, "c1", "LATE"))
    (start,) = only(m.handle(ok(new, "c2", "fresh")), StartInference)
    msgs = list(start.prompt.messages)
    assert_valid(msgs)
    assert "LATE" not in str(msgs) and msgs[-1]["content"] == "fresh"


def test_suggestion_while_idle_is_a_plain_prompt_and_ctrl_c_does_nothing():
    m = make()
    assert m.handle(Interrupt()) == []
    (start,) = only(m.handle(InterruptAndSuggest("hello")), StartInference)
    assert start.prompt.messages[-1] == {"role": "user", "content": "hello"}


def test_chunks_of_an_old_prompt_never_reach_the_current_turn():
    m = make()
    old = only(m.handle(UserPrompt("one")), StartInference)[0].prompt.prompt_id
    new = only(m.handle(InterruptAndSuggest("two")), StartInference)[0].prompt.prompt_id
    assert m.handle(OracleChunk(old, "text", "zombie"))[0].kind == "stale"
    assert m.handle(OracleDone(old, "zombie"))[0].kind == "stale"
    m.handle(OracleDone(new, "fresh"))
    contents = [x["content"] for x in m.session.request_messages()]
    assert "zombie" not in contents and contents[-1] == "fresh"


def test_suggestion_keeps_partial_text_marked_interrupted_and_reprompts():
    m = make()
    pid = only(m.handle(UserPrompt("write a poem")), StartInference)[0].prompt.prompt_id
    m.handle(OracleChunk(pid, "text", "Roses are "))
    actions = m.handle(InterruptAndSuggest("make it about trio"))
    assert actions[0] == CancelInference(pid)
    (start,) = only(actions, StartInference)
    msgs = list(start.prompt.messages)
    assert msgs[-2] == {"role": "assistant", "content": f"Roses are \n\n{INTERRUPTED_MARK}"}
    assert msgs[-1]["role"] == "user" and msgs[-1]["content"].endswith("make it about trio")
    assert m.session.entries[-2].meta == {"interrupted": True}
    assert_valid(msgs)


def test_invalid_tool_arguments_are_never_run_and_the_model_is_told():
    m = make()
    pid = only(m.handle(UserPrompt("go")), StartInference)[0].prompt.prompt_id
    bad = InvalidToolCall("c1", "read_file", '{"path": ', "arguments not JSON")
    actions = m.handle(OracleDone(pid, "", (bad,)))
    assert not only(actions, RunTool)
    (start,) = only(actions, StartInference)
    msgs = list(start.prompt.messages)
    assert msgs[-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert "arguments not JSON" in msgs[-1]["content"]
    assert_valid(msgs)


def test_step_cap_stops_running_tools():
    m = make(max_steps=2)
    pid = only(m.handle(UserPrompt("loop")), StartInference)[0].prompt.prompt_id
    m.handle(OracleDone(pid, "", (call("c1"),)))
    pid = only(m.handle(ok(pid, "c1")), StartInference)[0].prompt.prompt_id
    actions = m.handle(OracleDone(pid, "", (call("c2"),)))
    assert not only(actions, RunTool)
    assert not only(actions, StartInference)
    assert m.state is State.IDLE
    assert "step limit" in m.session.request_messages()[-1]["content"]


def test_prompt_typed_while_busy_is_queued_then_sent_when_the_turn_ends():
    m = make()
    pid = only(m.handle(UserPrompt("one")), StartInference)[0].prompt.prompt_id
    assert m.handle(UserPrompt("two"))[0].kind == "queued"
    (start,) = only(m.handle(OracleDone(pid, "first")), StartInference)
    assert start.prompt.messages[-1] == {"role": "user", "content": "two"}


def test_failed_inference_keeps_partial_text_and_returns_to_idle():
    m = make()
    pid = only(m.handle(UserPrompt("hi")), StartInference)[0].prompt.prompt_id
    actions = m.handle(OracleFailed(pid, "connection closed", partial="Hal"))
    assert Show("error", "connection closed") in actions
    assert m.state is State.IDLE
    assert m.session.request_messages()[-1]["content"].startswith("Hal")


def test_update_env_replaces_only_the_system_message():
    m = make()
    pid = only(m.handle(UserPrompt("hi")), StartInference)[0].prompt.prompt_id
    m.handle(OracleDone(pid, "hello"))
    before = m.session.request_messages()
    m.handle(UpdateEnv("be verbose"))
    after = m.session.request_messages()
    assert after[0]["content"].startswith("be verbose")
    assert after[1:] == before[1:]


def test_unexpected_message_is_a_named_error():
    m = make()
    with pytest.raises(UnexpectedMessage):
        m.handle(object())


def assert_valid(messages):
    """The request the agent would send passes the chat-completions rules."""
    assert chat_request_problem({"model": "m", "messages": list(messages)}) is None


def test_an_empty_answer_is_announced_and_not_kept_in_history():
    m = make()
    pid = only(m.handle(UserPrompt("hi")), StartInference)[0].prompt.prompt_id
    actions = m.handle(OracleDone(pid, "", finish_reason="stop"))
    notices = [a for a in actions if isinstance(a, Show) and a.kind == "notice"]
    assert len(notices) == 1 and "empty answer" in notices[0].text
    assert m.state is State.IDLE
    assert m.session.request_messages()[-1] == {"role": "user", "content": "hi"}


def failed(prompt_id, call_id, text="no such file: a.txt"):
    result = {"content": [{"type": "text", "text": text}], "isError": True}
    return ToolExecutionFeedback(prompt_id, call_id, "read_file", result=result)


def test_a_call_repeated_in_one_answer_runs_once_and_the_rest_are_answered():
    m = make()
    pid = only(m.handle(UserPrompt("go")), StartInference)[0].prompt.prompt_id
    calls = (call("c1"), call("c2"), call("c3", "b.txt"))
    runs = only(m.handle(OracleDone(pid, "", calls, "tool_calls")), RunTool)
    assert [r.call.id for r in runs] == ["c1", "c3"]
    m.handle(ok(pid, "c1"))
    (start,) = only(m.handle(ok(pid, "c3")), StartInference)
    assert chat_request_problem({"model": "m", "messages": list(start.prompt.messages)}) is None
    answers = {
        x["tool_call_id"]: x["content"] for x in start.prompt.messages if x["role"] == "tool"
    }
    assert answers["c2"].startswith("error: not run: the same call")


def test_more_than_sixteen_calls_in_one_answer_are_not_run():
    m = make()
    pid = only(m.handle(UserPrompt("go")), StartInference)[0].prompt.prompt_id
    calls = tuple(call(f"c{n}", f"f{n}.txt") for n in range(20))
    runs = only(m.handle(OracleDone(pid, "", calls, "tool_calls")), RunTool)
    assert len(runs) == 16


def test_the_same_failure_three_times_ends_the_turn_but_different_errors_do_not():
    m = make()
    pid = only(m.handle(UserPrompt("go")), StartInference)[0].prompt.prompt_id
    for n, error in enumerate(["no such file: a.txt", "permission denied", "no such file: a.txt"]):
        m.handle(OracleDone(pid, "", (call(f"c{n}"),), "tool_calls"))
        actions = m.handle(failed(pid, f"c{n}", error))
        (start,) = only(actions, StartInference)
        pid = start.prompt.prompt_id
    m.handle(OracleDone(pid, "", (call("c9"),), "tool_calls"))
    actions = m.handle(failed(pid, "c9"))
    assert not only(actions, StartInference) and m.state is State.IDLE
    (notice,) = [a for a in only(actions, Show) if a.kind == "notice"]
    assert notice.text == "stopped: read_file failed 3 times with the same arguments and error"
    assert "[stopped: this same call failed 3 times" in m.session.entries[-1].message["content"]


def test_a_context_error_gets_one_compacted_retry_then_one_error():
    m = make()
    for n in range(3):
        pid = only(m.handle(UserPrompt(f"q{n}")), StartInference)[0].prompt.prompt_id
        m.handle(OracleDone(pid, f"a{n}"))
    pid = only(m.handle(UserPrompt("last")), StartInference)[0].prompt.prompt_id
    actions = m.handle(OracleFailed(pid, "too long", context_exceeded=True, context_limit=2048))
    (retry,) = only(actions, StartInference)
    assert [x["role"] for x in retry.prompt.messages] == ["system", "user"]
    assert m.context.window.tokens == 2048
    notices = [a.text for a in only(actions, Show) if a.kind == "notice"]
    assert notices and "compacted 3 old turns" in notices[0]
    again = m.handle(OracleFailed(retry.prompt.prompt_id, "too long", context_exceeded=True))
    assert not only(again, StartInference) and m.state is State.IDLE
    (error,) = [a for a in only(again, Show) if a.kind == "error"]
    assert "does not fit the model's context window" in error.text


def test_every_message_that_starts_a_turn_is_shown_as_a_prompt_queued_ones_when_they_run():
    m = make()
    first = m.handle(UserPrompt("one"))
    assert [a.text for a in first if isinstance(a, Show) and a.kind == "prompt"] == ["one"]
    pid = m.prompt_id
    queued = m.handle(UserPrompt("two"))
    assert [(a.kind, a.text) for a in queued] == [("queued", "two")]
    done = m.handle(OracleDone(pid, "answer one", usage={"prompt_tokens": 3}))
    kinds = [a.kind for a in done if isinstance(a, Show)]
    assert kinds == ["usage", "turn_end", "prompt"]
    assert done[0].data == {"usage": {"prompt_tokens": 3}}
    assert [a.text for a in done if isinstance(a, Show) and a.kind == "prompt"] == ["two"]


def test_an_interrupt_that_drops_queued_messages_says_how_many():
    m = make()
    m.handle(UserPrompt("one"))
    m.handle(UserPrompt("two"))
    actions = m.handle(Interrupt())
    (dropped,) = [a for a in actions if isinstance(a, Show) and a.data.get("dropped")]
    assert dropped.data["dropped"] == 1 and "dropped 1 queued" in dropped.text


def test_the_same_call_with_the_same_result_three_times_ends_the_turn_too():
    """Issue 15: the embedded model ran the same successful search until its step limit."""
    m = make()
    pid = only(m.handle(UserPrompt("go")), StartInference)[0].prompt.prompt_id
    for n in range(2):
        m.handle(OracleDone(pid, "", (call(f"c{n}"),), "tool_calls"))
        (start,) = only(m.handle(ok(pid, f"c{n}")), StartInference)
        pid = start.prompt.prompt_id
    m.handle(OracleDone(pid, "", (call("c9"),), "tool_calls"))
    actions = m.handle(ok(pid, "c9"))
    assert not only(actions, StartInference) and m.state is State.IDLE
    (notice,) = [a for a in only(actions, Show) if a.kind == "notice"]
    assert notice.text == "stopped: read_file was called 3 times with the same arguments and result"
    assert (
        "[stopped: this same call gave this same result 3 times"
        in (m.session.entries[-1].message["content"])
    )


def test_each_call_carries_the_paths_read_or_written_earlier_in_the_turn():
    """`RunTool.seen` feeds `tools.base.SEEN`: write_file may replace only those (issue 32)."""
    m = make()
    m.handle(UserPrompt("earlier"))
    pid = m.prompt_id
    m.handle(OracleDone(pid, "", (call("c0", "old.txt"),)))
    pid = only(m.handle(ok(pid, "c0")), StartInference)[0].prompt.prompt_id
    m.handle(OracleDone(pid, "Done."))
    pid = only(m.handle(UserPrompt("now")), StartInference)[0].prompt.prompt_id
    (first,) = only(m.handle(OracleDone(pid, "", (call("c1", "a.txt"),))), RunTool)
    assert first.seen == frozenset()  # nothing before this answer; not another turn's read
    pid = only(m.handle(ok(pid, "c1")), StartInference)[0].prompt.prompt_id
    write = ToolCall("c2", "write_file", {"path": "a.txt"}, '{"path": "a.txt", "content": "x"}')
    (second,) = only(m.handle(OracleDone(pid, "", (write, call("c3", "b.txt")))), RunTool)[:1]
    assert second.seen == frozenset({"a.txt"})
