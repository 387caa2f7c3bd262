"""The model client against a real scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
import trio

from gbr_node.errors import ModelError
from gbr_node.llm.client import ModelClient
from gbr_node.llm.events import KeepAlive, TextDelta, ToolCallStarted
from gbr_node.llm.grammar import Workspace
from tests.support.gbnf import Gbnf
from tests.support.model_server import ModelServer
from tests.support.replies import (
    Delay,
    Drop,
    ErrorReply,
    Hangup,
    JsonReply,
    SseReply,
    empty_stream,
    text_reply,
    tool_call_reply,
)

USER = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
READ_TOOL = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


def chunk(content: str | None = None, finish: str | None = None) -> dict:
    delta = {} if content is None else {"content": content}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def collect(client: ModelClient, messages=USER, tools=None) -> list:
    with trio.fail_after(10):
        async with client.stream_chat(messages, tools) as stream:
            return [event async for event in stream]


async def test_text_streams_in_pieces_then_completes(server: ModelServer, settings) -> None:
    server.enqueue(text_reply("Hello world", pieces=3))
    async with ModelClient(settings(temperature=0.0)) as client:
        events = await collect(client)
    assert events[:-1] == [TextDelta("Hell"), TextDelta("o wo"), TextDelta("rld")]
    completion = events[-1]
    assert completion.message == {"role": "assistant", "content": "Hello world"}
    assert (completion.finish_reason, completion.partial) == ("stop", False)
    assert completion.usage["total_tokens"] == 15
    [request] = server.requests
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["stream"] is True and request.body["temperature"] == 0.0
    assert request.body["stream_options"] == {"include_usage": True}


async def test_consecutive_turns_reuse_one_connection(server, settings) -> None:
    server.enqueue(text_reply("one"), text_reply("two"), text_reply("three"))
    async with ModelClient(settings()) as client:
        for _ in range(3):
            await collect(client)
    assert len({request.client_port for request in server.requests}) == 1


async def test_tool_call_then_answered_conversation_is_accepted(server, settings) -> None:
    server.enqueue(tool_call_reply("read_file", {"path": "a.txt"}, call_id="c1"), text_reply("ok"))
    async with ModelClient(settings()) as client:
        first = (await collect(client, USER, READ_TOOL))[-1]
        assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
            ("c1", "read_file", {"path": "a.txt"})
        ]
        answered = [*USER, first.message, {"role": "tool", "tool_call_id": "c1", "content": "x"}]
        second = await client.complete(answered, READ_TOOL)
    assert second.text == "ok"
    assert [r.problem for r in server.requests] == [None, None]
    assert server.requests[0].body["tools"] == READ_TOOL


async def test_unanswered_tool_call_gets_400_from_the_validator(server, settings) -> None:
    server.enqueue(text_reply("never sent"))
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    async with ModelClient(settings()) as client:
        with pytest.raises(ModelError, match="did not have response messages: c1") as info:
            await client.complete([*messages, {"role": "user", "content": "next"}])
    assert info.value.status == 400 and not info.value.retryable
    assert server.replies_left == 1


@pytest.mark.parametrize(
    ("reply", "status", "message"),
    [
        (ErrorReply(401, {"error": {"message": "Incorrect API key"}}), 401, "refused the API key"),
        (ErrorReply(403, "forbidden"), 403, "may not use model 'test-model'"),
        (ErrorReply(404, {"error": {"message": "The model `x` does not exist"}}), 404,
         "unknown model 'test-model'"),
        (ErrorReply(404, "404 page not found"), 404, "wrong base_url"),
        (ErrorReply(400, [{"error": {"message": "bad role", "status": "INVALID_ARGUMENT"}}]), 400,
         "bad role [INVALID_ARGUMENT]"),
    ],
    ids=["401_bad_key", "403_forbidden", "404_unknown_model", "404_wrong_base_url",
         "400_gemini_list_body"],
)  # fmt: skip
async def test_client_errors_are_clear_and_never_retried(
    server, settings, reply, status, message
) -> None:
    server.enqueue(reply, text_reply("not reached"))
    async with ModelClient(settings()) as client:
        with pytest.raises(ModelError, match=message.replace("[", r"\[")) as info:
            await collect(client)
    assert info.value.status == status
    assert len(server.requests) == 1


async def test_429_and_503_are_retried_honouring_retry_after(server, settings) -> None:
    server.enqueue(
        ErrorReply(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "20"}),
        ErrorReply(503, "busy", {"Retry-After": "0"}),
        text_reply("finally"),
    )
    async with ModelClient(settings()) as client:
        completion = await client.complete(USER)
    assert completion.text == "finally"
    assert len(server.requests) == 3


async def test_503_exhausting_retries_reports_the_attempts(server, settings) -> None:
    server.enqueue(*[ErrorReply(503, {"error": {"message": "overloaded"}})] * 3, text_reply("x"))
    async with ModelClient(settings(max_retries=2)) as client:
        with pytest.raises(ModelError, match=r"unavailable \(HTTP 503, 3 attempts\): overloaded"):
            await client.complete(USER)
    assert len(server.requests) == 3
    assert server.replies_left == 1


async def test_retry_after_longer_than_the_cap_is_not_waited_for(server, settings) -> None:
    server.enqueue(ErrorReply(429, "later", {"retry-after": "3600"}))
    async with ModelClient(settings(retry_wait_cap_s=5)) as client:
        with pytest.raises(ModelError, match="asks to wait longer than 5 s") as info:
            await client.complete(USER)
    assert info.value.retryable


@pytest.mark.parametrize(
    ("error_chunk", "shown"),
    [
        ({"error": {"message": "overloaded"}}, "overloaded"),
        # vLLM: the error replaces the chunk, then [DONE]
        ({"object": "error", "message": "CUDA out of memory", "type": "InternalServerError",
          "param": None, "code": 500}, "CUDA out of memory [500]"),
        # llama.cpp (2025 builds): an `error:` field, then data: [DONE]
        (b'error: {"code":400,"message":"the request exceeds the available context size",'
         b'"type":"invalid_request_error"}\n\n',
         "the request exceeds the available context size [400]"),
        # OpenRouter: the error object and finish_reason "error", then [DONE]
        ({"id": "gen-1", "object": "chat.completion.chunk", "provider": "OpenAI",
          "error": {"code": "server_error", "message": "Provider disconnected unexpectedly"},
          "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]},
         "Provider disconnected unexpectedly [server_error]"),
        ({"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]},
         "the model server stopped the answer with an error (finish_reason error)"),
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
         "Overloaded [overloaded_error]"),
    ],
    ids=["openai", "vllm", "llama.cpp_error_field", "openrouter", "finish_reason_error",
         "typed_error"],
)  # fmt: skip
async def test_error_chunk_mid_stream_keeps_partial_text_and_shows_its_message(
    server, settings, error_chunk, shown
) -> None:
    server.enqueue(SseReply([chunk("Half an "), error_chunk]))
    async with ModelClient(settings()) as client:
        events = await collect(client)
    completion = events[-1]
    assert (completion.partial, completion.text, completion.error) == (True, "Half an ", shown)


async def test_a_stream_ending_with_the_whole_message_shows_the_text_once(server, settings):
    whole = {"role": "assistant", "content": "Hello world"}
    final = {"choices": [{"index": 0, "message": whole, "finish_reason": "stop"}]}
    server.enqueue(SseReply([chunk("Hello "), chunk("world"), final]))
    async with ModelClient(settings()) as client:
        events = await collect(client)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hello ", "world"]
    assert events[-1].message == whole and not events[-1].partial


async def test_a_tool_call_cut_at_the_token_limit_never_runs(server, settings) -> None:
    cut = {"index": 0, "id": "c1", "function": {"name": "read_file", "arguments": "{}"}}
    server.enqueue(SseReply([{"choices": [{"index": 0, "delta": {"tool_calls": [cut]}}]},
                             chunk(finish="length")]))  # fmt: skip
    async with ModelClient(settings()) as client:
        events = await collect(client, tools=READ_TOOL)
    completion = events[-1]
    assert completion.tool_calls == () and "tool_calls" not in completion.message
    assert "finish_reason length" in completion.invalid_tool_calls[0].reason


async def test_server_dying_mid_stream_keeps_partial_text(server, settings) -> None:
    server.enqueue(SseReply([chunk("Half "), chunk("an answer"), Drop()]))
    async with ModelClient(settings()) as client:
        completion = (await collect(client))[-1]
    assert completion.partial and completion.text == "Half an answer"
    assert "closed the connection before the answer was complete" in completion.error


async def test_empty_200_stream_is_a_clear_error(server, settings) -> None:
    server.enqueue(empty_stream())
    async with ModelClient(settings()) as client:
        with pytest.raises(ModelError, match=r"sent an empty stream \(HTTP 200 with no events\)$"):
            await collect(client)


async def test_non_sse_200_body_is_an_empty_stream_quoting_the_body(server, settings) -> None:
    server.enqueue(SseReply(['{"detail": "no streaming tools"}'], done=False))
    async with ModelClient(settings()) as client:
        with pytest.raises(ModelError, match="empty stream.*began with.*no streaming tools"):
            await collect(client)


async def test_pause_longer_than_idle_timeout_ends_with_partial(server, settings) -> None:
    server.enqueue(SseReply([chunk("slow"), Delay(5), chunk(finish="stop")]))
    async with ModelClient(settings(idle_timeout_s=0.2)) as client:
        completion = (await collect(client))[-1]
    assert completion.partial and completion.text == "slow"
    assert completion.error.endswith("sent nothing for 0.2 s")


async def test_silence_before_any_event_past_idle_timeout_raises(server, settings) -> None:
    server.enqueue(SseReply([Delay(5), chunk("late")]))
    async with ModelClient(settings(idle_timeout_s=0.2)) as client:
        with pytest.raises(ModelError, match="sent nothing for 0.2 s"):
            await collect(client)


async def test_keep_alive_comments_reset_the_idle_timer(server, settings) -> None:
    ping = b": keep-alive\n\n"
    pauses: list[Any] = [Delay(0.15), ping] * 4  # 0.6 s in all, never 0.4 s without a byte
    server.enqueue(SseReply([chunk("a"), *pauses, chunk("b", finish="stop")]))
    async with ModelClient(settings(idle_timeout_s=0.4)) as client:
        events = await collect(client)
    assert events.count(KeepAlive()) == 4
    assert (events[-1].text, events[-1].partial) == ("ab", False)


async def test_stream_tools_false_sends_tool_requests_unstreamed(server, settings) -> None:
    server.enqueue(tool_call_reply("read_file", {"path": "a"}, text="Reading."), text_reply("hi"))
    async with ModelClient(settings(stream_tools=False)) as client:
        events = await collect(client, USER, READ_TOOL)
        plain = await client.complete(USER)
    assert events[:2] == [TextDelta("Reading."), ToolCallStarted(0, "read_file")]
    assert events[-1].tool_calls[0].arguments == {"path": "a"}
    assert plain.text == "hi"
    assert [r.body["stream"] for r in server.requests] == [False, True]
    assert "stream_options" not in server.requests[0].body


async def test_json_answer_to_a_streamed_request_is_accepted(server, settings) -> None:
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"},
                           "finish_reason": "stop"}]}  # fmt: skip
    server.enqueue(JsonReply(answer))
    async with ModelClient(settings()) as client:
        assert (await client.complete(USER)).text == "whole"


@pytest.mark.parametrize("how", ["cancel_scope", "break_out"])
async def test_leaving_a_stream_closes_it_and_leaks_no_connection(server, settings, how) -> None:
    rounds = 12
    server.enqueue(*[SseReply([chunk("part"), Delay(30), chunk("never")])] * rounds)
    server.enqueue(text_reply("still works"))
    async with ModelClient(settings(max_connections=2, idle_timeout_s=5)) as client:
        for n in range(rounds):
            with trio.fail_after(5):
                with trio.CancelScope() as scope:
                    async with client.stream_chat(USER) as stream:
                        async for event in stream:
                            assert event == TextDelta("part")
                            if how == "break_out":
                                break
                            scope.cancel()
                assert stream.completion_so_far().text == "part"
                while len(server.disconnects) <= n:  # the server sees the disconnect
                    await trio.sleep(0.01)
        with trio.fail_after(5):
            completion = await client.complete(USER)
    assert completion.text == "still works"
    assert [d.chunks_sent for d in server.disconnects] == [1] * rounds


async def test_interrupted_turn_drops_half_written_tool_calls(server, settings) -> None:
    head = {"index": 0, "id": "c1", "function": {"name": "write_file", "arguments": '{"pa'}}
    server.enqueue(SseReply([{"choices": [{"index": 0, "delta": {"content": "Writing",
                                                                 "tool_calls": [head]}}]},
                             Delay(30)]))  # fmt: skip
    async with ModelClient(settings()) as client:
        with trio.fail_after(5), trio.CancelScope() as scope:
            async with client.stream_chat(USER) as stream:
                async for event in stream:
                    if isinstance(event, ToolCallStarted):
                        scope.cancel()
    interrupted = stream.completion_so_far("interrupted by /s")
    assert (interrupted.partial, interrupted.error) == (True, "interrupted by /s")
    assert interrupted.message == {"role": "assistant", "content": "Writing"}
    assert interrupted.tool_calls == () and interrupted.invalid_tool_calls[0].name == "write_file"


async def test_unreachable_server_is_a_connect_error(settings) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with ModelClient(settings(base_url=f"http://127.0.0.1:{port}/v1")) as client:
        with trio.fail_after(5), pytest.raises(ModelError, match="cannot connect"):
            await client.complete(USER)


async def test_list_models_reads_the_model_list(server, settings) -> None:
    async with ModelClient(settings()) as client:
        with trio.fail_after(5):
            assert await client.list_models() == ["test-model"]


async def test_empty_messages_are_refused_before_any_request(server, settings) -> None:
    async with ModelClient(settings()) as client:
        with pytest.raises(ValueError, match="messages"):
            client.stream_chat([])
    assert server.requests == []


READ_PATH_TOOL = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
WRITTEN_CALL = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>'


async def test_tool_grammar_constrains_the_request_and_reads_the_call_from_the_text(
    server, settings
) -> None:
    """The embedded model's path (issue 15): llama.cpp takes a grammar with tools only under
    tool_choice "none", and then parses no call, so the node sends one and reads the call."""
    server.enqueue(text_reply(WRITTEN_CALL, pieces=5), text_reply("It says hi.", pieces=2))
    async with ModelClient(settings(tool_grammar=True)) as client:
        first = await collect(client, USER, READ_PATH_TOOL)
        answered = [
            *USER,
            first[-1].message,
            {"role": "tool", "tool_call_id": first[-1].tool_calls[0].id, "content": "hi"},
        ]
        second = await collect(client, answered, READ_PATH_TOOL)
    assert not [e for e in first if isinstance(e, TextDelta)]  # the call is never shown as text
    [call] = first[-1].tool_calls
    assert (call.name, call.arguments) == ("read_file", {"path": "a.txt"})
    assert first[-1].message["content"] is None and first[-1].text == ""
    assert "".join(e.text for e in second if isinstance(e, TextDelta)) == "It says hi."
    assert second[-1].tool_calls == ()
    bodies = [request.body for request in server.requests]
    assert [b["tool_choice"] for b in bodies] == ["none", "none"]
    assert all(b["tools"] == READ_PATH_TOOL for b in bodies)  # the template still shows them
    # The person's request must be answered by a call; after a tool result, text may end it.
    assert bodies[0]["grammar"].startswith("root ::= call\n")
    assert bodies[1]["grammar"].startswith("root ::= call | answer\n")
    assert r"\"name\": \"read_file\"" in bodies[0]["grammar"]


WRITE_TOOL = {
    "type": "function",
    "function": {
        "name": "write_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
}


async def test_the_grammar_edits_only_files_read_in_the_turn_and_repeats_no_read(
    server, settings
) -> None:
    """Issue 32: model-agnostic bounds only. After reading a.txt in this turn, a.txt may
    be edited and is not read again; b.txt, not read, may be read but not edited."""
    server.enqueue(text_reply("ok", pieces=1))
    workspace = Workspace(files={"a.txt": "colour: red\n", "b.txt": "x\n"})
    read = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
            }
        ],
    }
    after_read = [*USER, read, {"role": "tool", "tool_call_id": "c1", "content": "colour: red"}]
    async with ModelClient(
        settings(tool_grammar=True, grammar_workspace=lambda: workspace)
    ) as client:
        await collect(client, after_read, [*READ_PATH_TOOL, EDIT_TOOL])
    grammar = Gbnf(server.requests[0].body["grammar"])

    def call(name: str, path: str, **more: str) -> str:
        arguments = json.dumps({"path": path, **more})
        return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'

    edit = {"old_string": "colour: red", "new_string": "colour: blue"}
    assert grammar.matches(call("edit_file", "a.txt", **edit))
    assert not grammar.matches(call("edit_file", "a.txt", old_string="red", new_string="blue"))
    assert not grammar.matches(call("edit_file", "b.txt", **edit))
    assert not grammar.matches(call("read_file", "a.txt"))
    assert grammar.matches(call("read_file", "b.txt"))
    assert grammar.matches("a.txt says the colour is red.")


async def test_a_connection_dropped_before_the_first_byte_is_retried_once(server, settings) -> None:
    """Issue 32: a stale keep-alive connection to the local server ("closed the connection
    before the answer was complete", the request never served) is sent again once."""
    server.enqueue(Hangup(), text_reply("hello", pieces=1))
    async with ModelClient(settings(max_retries=0)) as client:
        events = await collect(client, USER)
    assert events[-1].text == "hello" and not events[-1].partial
    server.enqueue(Hangup(), Hangup())
    async with ModelClient(settings(max_retries=0)) as client:
        with pytest.raises(ModelError, match="closed the connection"):
            await collect(client, USER)
    assert len(server.requests) == 4


EDIT_TOOL = {
    "type": "function",
    "function": {
        "name": "edit_file",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
            "required": ["path", "old_string", "new_string"],
        },
    },
}


@pytest.mark.parametrize(
    "written",
    [
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.t',  # cut by max_tokens
        "<tool_call>\nnot json\n</tool_call>",
    ],
)
async def test_a_broken_written_call_is_invalid_never_run_nor_shown(
    server, settings, written
) -> None:
    server.enqueue(text_reply(written, pieces=3))
    async with ModelClient(settings(tool_grammar=True)) as client:
        events = await collect(client, USER, READ_PATH_TOOL)
    assert not [e for e in events if isinstance(e, TextDelta)]
    assert events[-1].tool_calls == ()
    [invalid] = events[-1].invalid_tool_calls
    assert "<tool_call> block" in invalid.reason and invalid.raw_arguments == written


async def test_without_tool_grammar_nothing_is_constrained_and_text_stays_text(
    server, settings
) -> None:
    server.enqueue(text_reply(WRITTEN_CALL), text_reply("<b>bold</b>"))
    async with ModelClient(settings()) as client:
        plain = await collect(client, USER, READ_PATH_TOOL)
    async with ModelClient(settings(tool_grammar=True)) as client:
        untooled = await collect(client, USER)  # no tools offered: no grammar, text as it is
    assert plain[-1].text == WRITTEN_CALL and plain[-1].tool_calls == ()
    assert untooled[-1].text == "<b>bold</b>"
    for request in server.requests:
        assert "grammar" not in request.body and "tool_choice" not in request.body
