"""The delta assembler against OpenAI chat-completions chunks and compatible servers' quirks."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gbr_node.llm.deltas import DeltaAssembler, error_message
from gbr_node.llm.events import Completion, ReasoningDelta, TextDelta, ToolCallStarted
from gbr_node.llm.sse import SseDecoder, SseEvent


def ids():
    counter = itertools.count(1)
    return lambda: f"gen_{next(counter)}"


def delta(finish: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


def call(index: int | None = None, id: str | None = None, name=None, args=None) -> dict:
    fragment: dict[str, Any] = {"function": {}}
    if index is not None:
        fragment["index"] = index
    if id is not None:
        fragment["id"] = id
    if name is not None:
        fragment["function"]["name"] = name
    if args is not None:
        fragment["function"]["arguments"] = args
    return fragment


def calls(*fragments: dict, finish: str | None = None) -> dict:
    return delta(finish, tool_calls=list(fragments))


STOP = delta("stop")
DONE = "[DONE]"


def assemble(*payloads: Any) -> tuple[list, Completion]:
    assembler = DeltaAssembler(new_id=ids())
    events = []
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        events += assembler.feed_data(data)
    return events, assembler.result()


def runnable(completion: Completion) -> list[tuple[str, str, dict]]:
    return [(c.id, c.name, c.arguments) for c in completion.tool_calls]


# (name, payloads, runnable calls expected)
TOOL_CASES = [
    ("per_index_interleaved_parallel_calls", [
        calls(call(0, "a", "read", ""), call(1, "b", "list", "")),
        calls(call(0, args='{"p":'), call(1, args='{"d":')),
        calls(call(1, args='"x"}'), call(0, args='"y"}')),
        delta("tool_calls"), DONE,
    ], [("a", "read", {"p": "y"}), ("b", "list", {"d": "x"})]),
    ("index_omitted_fragments_continue_the_call", [
        calls(call(id="a", name="read", args='{"p"')),
        calls(call(args=': 1}')), delta("tool_calls"), DONE,
    ], [("a", "read", {"p": 1})]),
    ("all_parallel_calls_at_index_0_with_different_ids", [
        calls(call(0, "a", "read", '{"p": 1}')),
        calls(call(0, "b", "read", '{"p": 2}')), delta("tool_calls"), DONE,
    ], [("a", "read", {"p": 1}), ("b", "read", {"p": 2})]),
    ("ids_omitted_are_generated", [
        calls(call(0, name="read", args="{}"), call(1, name="list", args="{}")), STOP, DONE,
    ], [("gen_1", "read", {}), ("gen_2", "list", {})]),
    ("name_repeated_in_later_fragments_not_doubled", [
        calls(call(0, "a", "read", '{"p"')), calls(call(0, name="read", args=": 1}")),
        delta("tool_calls"), DONE,
    ], [("a", "read", {"p": 1})]),
    ("name_blanked_in_later_fragments_kept", [
        calls(call(0, "a", "read", '{"p"')), calls(call(0, name="", args=": 1}")),
        delta("tool_calls"), DONE,
    ], [("a", "read", {"p": 1})]),
    ("whole_arguments_in_one_fragment", [
        calls(call(0, "a", "read", '{"p": [1, 2]}'), finish="tool_calls"), DONE,
    ], [("a", "read", {"p": [1, 2]})]),
    ("arguments_as_a_json_object", [
        calls(call(0, "a", "read", {"p": "x"}), finish="tool_calls"), DONE,
    ], [("a", "read", {"p": "x"})]),
    ("complete_arguments_resent_in_final_chunk_not_doubled", [
        calls(call(0, "a", "read", '{"p": ')), calls(call(0, args='"x"}')),
        calls(call(0, "a", "read", '{"p": "x"}'), finish="tool_calls"), DONE,
    ], [("a", "read", {"p": "x"})]),
    ("complete_arguments_resent_as_object_not_doubled", [
        calls(call(0, "a", "read", '{"p":"x"}')),
        calls(call(0, args={"p": "x"}), finish="tool_calls"), DONE,
    ], [("a", "read", {"p": "x"})]),
    ("tool_calls_ending_with_finish_reason_stop_still_run", [
        calls(call(0, "a", "read", "{}")), STOP, DONE,
    ], [("a", "read", {})]),
    ("finish_reason_without_done_is_a_normal_end", [
        calls(call(0, "a", "read", "{}"), finish="tool_calls"),
    ], [("a", "read", {})]),
    ("same_name_whole_calls_without_id_or_index_are_two_calls", [
        calls(call(name="read", args='{"p": 1}')), calls(call(name="read", args='{"p": 2}')),
        STOP, DONE,
    ], [("gen_1", "read", {"p": 1}), ("gen_2", "read", {"p": 2})]),
    ("blank_arguments_mean_no_arguments", [
        calls(call(0, "a", "now", "")), delta("tool_calls"), DONE,
    ], [("a", "now", {})]),
    # Servers that put the call's id inside `function` instead of beside it.
    ("id_inside_function_is_the_call_id", [
        calls({"index": 0, "function": {"id": "f1", "name": "read", "arguments": "{}"}}),
        delta("tool_calls"), DONE,
    ], [("f1", "read", {})]),
    ("ids_inside_function_tell_parallel_calls_apart", [
        calls({"index": 0, "function": {"id": "f1", "name": "read", "arguments": '{"p": 1}'}}),
        calls({"index": 0, "function": {"id": "f2", "name": "read", "arguments": '{"p": 2}'}}),
        delta("tool_calls"), DONE,
    ], [("f1", "read", {"p": 1}), ("f2", "read", {"p": 2})]),
    ("id_inside_function_then_continuation_without_id", [
        calls({"index": 0, "id": "",
               "function": {"id": "f1", "name": "read", "arguments": '{"p"'}}),
        calls({"index": 0, "id": "", "function": {"arguments": ": 1}"}}),
        delta("tool_calls"), DONE,
    ], [("f1", "read", {"p": 1})]),
    # Servers that first send "{}" as a placeholder, then the real arguments.
    ("placeholder_then_whole_arguments", [
        calls(call(0, "a", "read", "{}")), calls(call(0, args='{"p": 1}')),
        delta("tool_calls"), DONE,
    ], [("a", "read", {"p": 1})]),
    ("placeholder_then_arguments_in_pieces", [
        calls(call(0, "a", "read", "{}")), calls(call(0, args='{"p"')), calls(call(0, args=": 1}")),
        delta("tool_calls"), DONE,
    ], [("a", "read", {"p": 1})]),
    ("placeholder_object_then_arguments_object", [
        calls(call(0, "a", "read", {})), calls(call(0, args={"p": 1})), delta("tool_calls"), DONE,
    ], [("a", "read", {"p": 1})]),
    ("placeholder_with_spaces_then_arguments_with_the_name_again", [
        calls(call(0, "a", "read", " { } ")), calls(call(0, name="read", args=' {"p": 1}')),
        delta("tool_calls"), DONE,
    ], [("a", "read", {"p": 1})]),
    ("placeholder_without_index_or_id_then_arguments", [
        calls(call(name="read", args="{}")), calls(call(args='{"p": 1}')), STOP, DONE,
    ], [("gen_1", "read", {"p": 1})]),
    ("id_inside_function_only_on_a_later_fragment", [
        calls(call(0, name="read", args="")),
        calls({"index": 0, "function": {"id": "f1", "arguments": '{"p": 1}'}}),
        delta("tool_calls"), DONE,
    ], [("f1", "read", {"p": 1})]),
    ("placeholder_then_the_object_byte_by_byte_with_the_id_in_function", [
        calls({"index": 0, "function": {"id": "f1", "name": "read", "arguments": "{}"}}),
        *[calls({"index": 0, "function": {"id": "f1", "arguments": c}}) for c in '{"p": "{}"}'],
        delta("tool_calls"), DONE,
    ], [("f1", "read", {"p": "{}"})]),
    ("empty_string_then_the_object_byte_by_byte", [
        calls(call(0, "a", "read", "")), *[calls(call(0, args=c)) for c in '{"p": 1}'],
        delta("tool_calls"), DONE,
    ], [("a", "read", {"p": 1})]),
    # Poolside: one id with the name, another with every later fragment of the call.
    ("id_changing_after_the_first_fragment", [
        calls(call(0, "a", "read", "")), calls(call(0, "b", args='{"p"')),
        calls(call(0, "b", args=": 1}")), delta("tool_calls"), DONE,
    ], [("a", "read", {"p": 1})]),
    ("id_changing_after_a_placeholder", [
        calls(call(0, "a", "read", "{}")), calls(call(0, "b", args='{"p": 1}')),
        delta("tool_calls"), DONE,
    ], [("a", "read", {"p": 1})]),
    # DeepSeek, GLM: parallel calls share one id (the later ones get fresh ids).
    ("parallel_calls_sharing_an_id_at_their_own_indexes", [
        calls(call(0, "x", "read", '{"p"'), call(1, "x", "list", '{"d"')),
        calls(call(0, args=": 1}"), call(1, args=": 2}")), delta("tool_calls"), DONE,
    ], [("x", "read", {"p": 1}), ("gen_1", "list", {"d": 2})]),
    ("parallel_calls_sharing_an_id_repeated_in_every_fragment", [
        calls(call(0, "x", "read", '{"p"')), calls(call(0, "x", args=": 1}")),
        calls(call(1, "x", "read", '{"p"')), calls(call(1, "x", args=": 2}")),
        delta("tool_calls"), DONE,
    ], [("x", "read", {"p": 1}), ("gen_1", "read", {"p": 2})]),
    ("parallel_calls_sharing_an_id_whole_one_after_the_other", [
        calls(call(0, "x", "read", '{"p": 1}')), calls(call(1, "x", "read", '{"p": 2}')),
        calls(call(2, "x", "list", "{}")), delta("tool_calls"), DONE,
    ], [("x", "read", {"p": 1}), ("gen_1", "read", {"p": 2}), ("gen_2", "list", {})]),
    # OpenRouter engines: the same index and id for every parallel call.
    ("same_index_and_id_for_a_call_of_another_tool", [
        calls(call(0, "x", "read", '{"p": 1}')), calls(call(0, "x", "list", "")),
        calls(call(0, "x", args='{"d": 2}')), delta("tool_calls"), DONE,
    ], [("x", "read", {"p": 1}), ("gen_1", "list", {"d": 2})]),
    ("same_index_and_id_for_a_second_whole_call_of_the_same_tool", [
        calls(call(0, "x", "read", '{"p": 1}')), calls(call(0, "x", "read", '{"p": 2}')),
        delta("tool_calls"), DONE,
    ], [("x", "read", {"p": 1}), ("gen_1", "read", {"p": 2})]),
    ("same_id_placeholder_then_the_arguments_with_the_name_again", [
        calls(call(0, "x", "read", "{}")), calls(call(0, "x", "read", '{"p": 1}')),
        delta("tool_calls"), DONE,
    ], [("x", "read", {"p": 1})]),
    # Foundry Local: a chunk's only choice comes with a running index.
    ("only_choice_with_a_running_index", [
        {"choices": [{"index": 7, "delta": {"tool_calls": [call(0, "a", "read", '{"p"')]}}]},
        {"choices": [{"index": 8, "delta": {"tool_calls": [call(0, args=": 1}")]}}]},
        {"choices": [{"index": 9, "delta": {}, "finish_reason": "tool_calls"}]}, DONE,
    ], [("a", "read", {"p": 1})]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("payloads", "expected"), [c[1:] for c in TOOL_CASES], ids=[c[0] for c in TOOL_CASES]
)
def test_tool_calls_are_assembled_whatever_the_server_quirk(payloads: list, expected: list) -> None:
    _, completion = assemble(*payloads)
    assert not completion.partial and completion.error is None
    assert runnable(completion) == expected
    assert completion.invalid_tool_calls == ()
    assert [c["id"] for c in completion.message["tool_calls"]] == [e[0] for e in expected]


INVALID_CASES = [
    ("arguments_not_json", '{"p": ', "not valid JSON"),
    ("arguments_a_list", "[1, 2]", "must be a JSON object"),
    ("arguments_repeat_a_key", '{"p": 1, "p": 2}', "repeat the key"),
    ("arguments_use_nan", '{"p": NaN}', "NaN"),
]


@pytest.mark.parametrize(
    ("raw", "reason"), [c[1:] for c in INVALID_CASES], ids=[c[0] for c in INVALID_CASES]
)
def test_arguments_that_are_not_a_strict_json_object_never_run(raw: str, reason: str) -> None:
    _, completion = assemble(calls(call(0, "a", "write", raw)), delta("tool_calls"), DONE)
    assert completion.tool_calls == ()
    [invalid] = completion.invalid_tool_calls
    assert (invalid.id, invalid.name, invalid.raw_arguments) == ("a", "write", raw)
    assert reason in invalid.reason
    assert "tool_calls" not in completion.message


# (name, payloads): an answer cut short by the server, whose calls parse as they stand
CUT_SHORT = [
    ("cut_after_the_name_with_vllms_placeholder", [
        calls(call(0, "a", "write_file", "{}")), delta("length"), DONE]),
    ("cut_after_the_name_with_no_arguments", [
        calls(call(0, "a", "list_dir", "")), delta("length"), DONE]),
    ("cut_after_a_first_whole_call", [
        calls(call(0, "a", "read", '{"p": 1}')), calls(call(1, "b", "write", '{"p": "x", "c')),
        delta("length"), DONE]),
    ("content_filter_stops_a_call", [
        calls(call(0, "a", "run", '{"argv": ["ls"]}'), finish="content_filter"), DONE]),
    ("cut_without_done", [calls(call(0, "a", "read", '{"p": 1}'), finish="length")]),
]  # fmt: skip


@pytest.mark.parametrize("payloads", [c[1] for c in CUT_SHORT], ids=[c[0] for c in CUT_SHORT])
def test_no_tool_call_of_an_answer_cut_short_runs(payloads: list) -> None:
    _, completion = assemble(*payloads)
    assert completion.tool_calls == ()
    assert completion.invalid_tool_calls
    for invalid in completion.invalid_tool_calls:
        assert "cut the answer short" in invalid.reason
    assert "tool_calls" not in completion.message


def test_tool_call_without_a_name_never_runs() -> None:
    _, completion = assemble(calls(call(0, "a", None, "{}")), STOP, DONE)
    assert completion.tool_calls == ()
    assert completion.invalid_tool_calls[0].reason == "the tool call has no tool name"


def test_text_streams_as_deltas_and_ends_with_a_stop_message() -> None:
    events, completion = assemble(delta(role="assistant", content=""), delta(content="Hel"),
                                  delta(content="lo"), STOP, DONE)  # fmt: skip
    assert events == [TextDelta("Hel"), TextDelta("lo")]
    assert completion.message == {"role": "assistant", "content": "Hello"}
    assert (completion.text, completion.finish_reason, completion.partial) == (
        "Hello",
        "stop",
        False,
    )


@pytest.mark.parametrize("choices", [[], None], ids=["empty_choices", "null_choices"])
def test_usage_only_chunk_sets_usage(choices: list | None) -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    _, completion = assemble(delta(content="x"), STOP, {"choices": choices, "usage": usage}, DONE)
    assert completion.usage == usage
    assert completion.text == "x"


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_reasoning_is_kept_apart_from_the_answer(key: str) -> None:
    events, completion = assemble(delta(**{key: "think"}), delta(content="answer"), STOP, DONE)
    assert events == [ReasoningDelta("think"), TextDelta("answer")]
    assert (completion.reasoning, completion.text) == ("think", "answer")
    assert completion.message["content"] == "answer"


def test_only_tool_calls_give_a_message_with_null_content() -> None:
    events, completion = assemble(calls(call(0, "a", "read", "{}")), delta("tool_calls"), DONE)
    assert events == [ToolCallStarted(0, "read")]
    assert completion.message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        ],
    }


ERROR_CASES = [
    ("openai_error_object", {"error": {"message": "overloaded", "code": 529}}, "overloaded [529]"),
    ("gemini_list_error", [{"error": {"message": "quota", "status": "RESOURCE_EXHAUSTED"}}],
     "quota [RESOURCE_EXHAUSTED]"),
    ("error_string", {"error": "boom"}, "boom"),
    ("vllm_error_chunk", {"object": "error", "message": "CUDA out of memory",
                          "type": "InternalServerError", "param": None, "code": 500},
     "CUDA out of memory [500]"),
    ("vllm_error_chunk_without_code", {"object": "error", "message": "bad request"},
     "bad request"),
    ("data_not_json", "not json at all", "not JSON"),
    ("typed_error_chunk", {"type": "error", "message": "proxy gave up"}, "proxy gave up"),
    ("anthropic_style_error_chunk",
     {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
     "Overloaded [overloaded_error]"),
    ("openrouter_finish_reason_error_with_its_error",
     {"id": "gen-1", "object": "chat.completion.chunk", "provider": "x",
      "error": {"code": 502, "message": "Provider disconnected"},
      "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]},
     "Provider disconnected [502]"),
    ("finish_reason_error_alone",
     {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]},
     "finish_reason error"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("bad", "message"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_error_in_the_middle_keeps_partial_text_and_marks_it(bad: Any, message: str) -> None:
    _, completion = assemble(
        delta(content="half "), calls(call(0, "a", "read", '{"p": 1}')), bad, delta(content="x")
    )
    assert completion.partial
    assert completion.error is not None and message in completion.error
    assert completion.text == "half "
    assert completion.message == {"role": "assistant", "content": "half "}
    assert completion.tool_calls == ()
    assert completion.invalid_tool_calls[0].reason.startswith("the answer ended before")


def test_finish_reason_error_then_done_is_still_an_error() -> None:
    bad = {"choices": [{"index": 0, "delta": {}, "finish_reason": "error"}]}
    _, completion = assemble(delta(content="half "), bad, "[DONE]")
    assert completion.partial and completion.error and "finish_reason error" in completion.error


def test_sse_error_event_ends_the_turn_with_its_message() -> None:
    assembler = DeltaAssembler()
    assembler.feed_data(json.dumps(delta(content="a")))
    assembler.feed_data('{"message": "server melted"}', event="error")
    assert assembler.ended
    assert assembler.result().error == "server melted"


def test_stream_closed_without_finish_reason_is_partial() -> None:
    _, completion = assemble(delta(content="cut"))
    assert completion.partial
    assert completion.error == "the connection closed before the model finished its answer"
    assert completion.text == "cut"


def test_data_after_done_is_ignored() -> None:
    _, completion = assemble(delta(content="a"), STOP, DONE, delta(content="b"))
    assert completion.text == "a"


def test_non_streamed_answer_gives_the_same_completion_as_its_stream() -> None:
    message = {
        "role": "assistant",
        "content": "ok",
        "tool_calls": [{"id": "a", "type": "function",
                        "function": {"name": "read", "arguments": '{"p": 1}'}}],
    }  # fmt: skip
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    assembler = DeltaAssembler()
    events = assembler.feed_message(body)
    _, streamed = assemble(delta(content="ok"), calls(call(0, "a", "read", '{"p": 1}')),
                           delta("tool_calls"), DONE)  # fmt: skip
    assert events == [TextDelta("ok"), ToolCallStarted(0, "read")]
    assert assembler.result() == streamed


@pytest.mark.parametrize(
    "entries",
    [
        [{"id": "same"}, {"id": "same"}],
        [{"id": "same", "index": 0}, {"id": "same", "index": 1}],
        [{"id": "same"}, {"id": ""}, {"id": "same"}],
    ],
    ids=["no_indexes", "with_indexes", "with_a_blank_id_between"],
)
def test_a_non_streamed_answer_with_calls_sharing_an_id_runs_each_under_its_own_id(entries):
    tool_calls = [
        {**entry, "type": "function", "function": {"name": "read", "arguments": f'{{"p": {n}}}'}}
        for n, entry in enumerate(entries)
    ]
    assembler = DeltaAssembler(new_id=ids())
    assembler.feed_message(
        {
            "choices": [
                {
                    "message": {"role": "assistant", "tool_calls": tool_calls},
                    "finish_reason": "tool_calls",
                }
            ]
        }  # fmt: skip
    )
    completion = assembler.result()
    assert [c.arguments for c in completion.tool_calls] == [{"p": n} for n in range(len(entries))]
    assert completion.tool_calls[0].id == "same"
    assert len({c.id for c in completion.tool_calls}) == len(entries)
    assert completion.invalid_tool_calls == ()


def _snapshot(**message: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "finish_reason": "stop"}]}  # fmt: skip


# (name, payloads, text and runnable calls expected): streams that end with the whole answer
SNAPSHOT_ENDS = [
    ("text_restated", [delta(content="Hel"), delta(content="lo"), _snapshot(content="Hello"),
                       DONE], "Hello", []),
    ("text_restated_with_its_last_piece", [delta(content="Hel"), _snapshot(content="Hello"),
                                           DONE], "Hello", []),
    ("reasoning_and_text_restated", [delta(reasoning_content="hm"), delta(content="ok"),
                                     _snapshot(reasoning_content="hm", content="ok"), DONE],
     "ok", []),
    ("snapshot_that_disagrees_keeps_what_streamed", [delta(content="Hello"),
                                                     _snapshot(content="Bye"), DONE],
     "Hello", []),
    ("tool_calls_restated", [
        calls(call(0, "a", "read", '{"p": 1}'), call(1, "b", "read", '{"p": 2}')),
        _snapshot(content=None, tool_calls=[
            {"id": "a", "type": "function", "function": {"name": "read", "arguments": '{"p": 1}'}},
            {"id": "b", "type": "function", "function": {"name": "read", "arguments": '{"p": 2}'}},
        ]), DONE,
    ], "", [("a", "read", {"p": 1}), ("b", "read", {"p": 2})]),
    ("tool_calls_without_ids_restated", [
        calls(call(name="read", args='{"p": 1}')), calls(call(name="read", args='{"p": 2}')),
        _snapshot(tool_calls=[{"function": {"name": "read", "arguments": '{"p": 1}'}},
                              {"function": {"name": "read", "arguments": '{"p": 2}'}}]), DONE,
    ], "", [("gen_1", "read", {"p": 1}), ("gen_2", "read", {"p": 2})]),
    ("only_a_snapshot", [_snapshot(content="Hi", tool_calls=[
        {"id": "a", "function": {"name": "read", "arguments": "{}"}}]), DONE],
     "Hi", [("a", "read", {})]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("payloads", "text", "expected"),
    [c[1:] for c in SNAPSHOT_ENDS],
    ids=[c[0] for c in SNAPSHOT_ENDS],
)
def test_a_stream_ending_with_the_whole_message_doubles_nothing(payloads, text, expected):
    events, completion = assemble(*payloads)
    assert completion.text == text
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text
    assert runnable(completion) == expected
    assert completion.error is None


def test_non_streamed_answer_without_choices_is_an_error() -> None:
    assembler = DeltaAssembler()
    assembler.feed_message({"id": "x"})
    assert assembler.result().error == "the model server answered without any choices"


def test_error_message_reads_proxy_shapes_and_rejects_non_errors() -> None:
    assert error_message({"detail": "Not Found"}) == "Not Found"
    assert error_message({"choices": []}) is None
    assert error_message("text") is None


def _stream_bytes() -> bytes:
    payloads = [
        ": OPENROUTER PROCESSING",
        delta(role="assistant", reasoning_content="hmm ☃"),
        delta(content="Héllo"),
        calls(call(0, "a", "read", ""), call(1, name="list")),
        calls(call(0, args='{"path": "ä/'), call(1, args="{}")),
        calls(call(0, args='b.txt"}')),
        calls(call(2, "c", "grep", "{}")),
        calls(call(2, args='{"q": "x"}')),
        calls({"index": 3, "function": {"id": "f4", "name": "now", "arguments": "{}"}}),
        delta("tool_calls"),
        {"choices": [], "usage": {"total_tokens": 9}},
        DONE,
    ]
    lines = []
    for payload in payloads:
        if isinstance(payload, str) and payload.startswith(":"):
            lines.append(payload + "\r\n\r\n")
        else:
            data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
            lines.append(f"data:{data}\r\n\r\n")
    return "".join(lines).encode()


STREAM = _stream_bytes()


def run_stream(chunks: list[bytes]) -> tuple[list, Completion]:
    decoder, assembler, events = SseDecoder(), DeltaAssembler(new_id=ids()), []
    for chunk in [*chunks, None]:
        items = decoder.feed(chunk) if chunk is not None else decoder.close()
        for item in items:
            if isinstance(item, SseEvent):
                events += assembler.feed_data(item.data, item.event)
    return events, assembler.result()


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=16))
def test_any_split_of_a_valid_stream_gives_the_same_result(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(STREAM)]
    events, completion = run_stream([STREAM[a:b] for a, b in itertools.pairwise(points)])
    assert (events, completion) == run_stream([STREAM])
    assert runnable(completion) == [
        ("a", "read", {"path": "ä/b.txt"}),
        ("gen_1", "list", {}),
        ("c", "grep", {"q": "x"}),
        ("f4", "now", {}),
    ]
    assert (completion.text, completion.reasoning) == ("Héllo", "hmm ☃")
