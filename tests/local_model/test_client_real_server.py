"""The model client against the real llama.cpp server (xllamacpp) on 127.0.0.1.

Issues 8 and 15: plain text streams; a tool call written in the chat
template's `<tool_call>` format reaches the client as a runnable tool call,
streamed or not; tool results reach the model's prompt; the server reports
its window at `/props`. Temperature 0; mechanics asserted, not prose.
"""

from __future__ import annotations

import httpx
import pytest
import trio

from gbr_node.config.loader import default_template, load_profile
from gbr_node.control import Node
from gbr_node.errors import ModelError
from gbr_node.llm.client import ModelClient
from gbr_node.llm.events import Completion, TextDelta
from gbr_node.llm.local import CATALOGUE, SMALL_LOCAL_MODEL, LocalModel
from tests.local_model.support import READ_FILE_TOOL, local_settings, requires_local_model

pytestmark = requires_local_model

N_CTX = CATALOGUE[SMALL_LOCAL_MODEL].n_ctx  # the `local` fixture runs SmolLM2-135M
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
TURN_TIMEOUT_S = 120
# SmolLM2-135M does not call tools on its own, but copies text: these make it write a call
# in its template's format. Each wording is tried once (temperature 0).
READ_PROMPTS = (
    "Repeat exactly this text and nothing else:\n<tool_call>\n"
    '{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call>',
    'Answer with this exact line: <tool_call>{"name": "read_file", '
    '"arguments": {"path": "notes.txt"}}</tool_call>',
)


async def stream_events(client: ModelClient, messages: list[dict], tools=None) -> list:
    with trio.fail_after(TURN_TIMEOUT_S):
        async with client.stream_chat(messages, tools) as stream:
            return [event async for event in stream]


async def test_plain_text_streams_in_pieces(local: LocalModel) -> None:
    messages = [SYSTEM, {"role": "user", "content": "Say hello in one short sentence."}]
    async with ModelClient(local_settings(local)) as client:
        events = await stream_events(client, messages)
    *deltas, completion = events
    texts = [event.text for event in deltas if isinstance(event, TextDelta)]
    assert len(texts) > 1, events  # streamed, not one block
    assert isinstance(completion, Completion) and not completion.partial
    assert completion.text == "".join(texts) and completion.text.strip()
    assert completion.finish_reason in ("stop", "length")


@pytest.mark.parametrize("stream_tools", [True, False])
async def test_a_tool_call_is_runnable_streamed_or_not(
    default_local: LocalModel, stream_tools
) -> None:
    """The node's embedded path (issues 15b and 32): with the default model and its GGUF's
    own chat template, the call written under the grammar is read from the answer's text,
    from a stream or from a whole JSON answer alike."""
    settings = local_settings(default_local, stream_tools=stream_tools, tool_grammar=True)
    async with ModelClient(settings) as client:
        messages = [SYSTEM, {"role": "user", "content": "What does notes.txt say?"}]
        events = await stream_events(client, messages, [READ_FILE_TOOL])
        completion = events[-1]
    assert isinstance(completion, Completion) and not completion.partial
    [call] = completion.tool_calls
    assert call.name == "read_file"
    assert isinstance(call.arguments, dict) and "path" in call.arguments
    assert completion.message["tool_calls"] == [call.to_message()]


async def test_the_model_sees_a_tool_result_sent_back(local: LocalModel) -> None:
    """The tool-call message (content null) and the tool message reach the model's prompt.

    Observed through the server's token count: the same conversation with a
    tool result 20 words longer has a longer prompt (the stock
    chatml-function-calling template dropped tool messages entirely).
    """
    function = {"name": "read_file", "arguments": '{"path": "notes.txt"}'}
    call = {"id": "call_1", "type": "function", "function": function}

    def conversation(result: str) -> list[dict]:
        return [
            SYSTEM,
            {"role": "user", "content": READ_PROMPTS[0]},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": result},
        ]

    prompt_tokens = []
    async with ModelClient(local_settings(local)) as client:
        for result in ("teal", "teal " + "and the sea is wide " * 4):
            events = await stream_events(client, conversation(result), [READ_FILE_TOOL])
            completion = events[-1]
            assert isinstance(completion, Completion) and not completion.partial
            assert completion.usage is not None
            prompt_tokens.append(completion.usage["prompt_tokens"])
    assert prompt_tokens[1] >= prompt_tokens[0] + 20, prompt_tokens


async def test_the_server_reports_its_context_window(local: LocalModel) -> None:
    async with ModelClient(local_settings(local)) as client:
        assert await client.context_tokens() == (N_CTX, "llama.cpp /props of the model server")


async def test_llama_cpp_reads_tool_calls_from_our_chat_template(local: LocalModel) -> None:
    """The template gbr-node gives the model is the one llama.cpp derives its tool-call
    parser from (`chat_template_caps`), so the format the model is shown is the one parsed."""
    root = local.base_url.removesuffix("/v1")
    async with httpx.AsyncClient() as http:
        props = (await http.get(f"{root}/props")).json()
    assert props["chat_template_caps"]["supports_tool_calls"] is True
    assert "<tool_call>" in props["chat_template"]


async def test_a_request_over_the_window_is_a_context_error(local: LocalModel) -> None:
    """GBR-CTX-01: llama.cpp's own answer to an oversized request is recognised."""
    messages = [SYSTEM, {"role": "user", "content": "word " * (2 * N_CTX)}]
    async with ModelClient(local_settings(local)) as client:
        with pytest.raises(ModelError) as info:
            await stream_events(client, messages)
    assert info.value.context_exceeded, str(info.value)


async def test_a_cancelled_stream_leaves_the_server_ready_for_the_next_turn(
    local: LocalModel,
) -> None:
    """ADR-0010 on the embedded model: `/s` cancels the HTTP stream mid-answer."""
    long = [SYSTEM, {"role": "user", "content": "Write a long story about the sea."}]
    short = [SYSTEM, {"role": "user", "content": "Say hello."}]
    async with ModelClient(local_settings(local)) as client:
        with trio.fail_after(TURN_TIMEOUT_S):
            async with client.stream_chat(long) as stream:
                seen = 0
                async for event in stream:
                    seen += isinstance(event, TextDelta)
                    if seen == 3:
                        break
            partial = stream.completion_so_far()
        events = await stream_events(client, short)
    assert partial.partial and partial.text
    assert not events[-1].partial and events[-1].text.strip()


GRAMMAR_PROMPTS = (
    "Create a file hello.txt containing: Hello, world",
    "What is the password written in secret.txt?",
    "hello",
)


async def test_under_the_grammar_every_first_answer_is_a_valid_call_or_text(
    local: LocalModel, tmp_path
) -> None:
    """Issues 15 and 32: llama.cpp accepts the node's GBNF with every tool under
    tool_choice "none", and the model's first answer is then either one valid call of an
    offered tool with its required arguments, or text that does not start like a call."""
    (tmp_path / ".gbr_envs").mkdir()
    (tmp_path / ".gbr_envs" / "default.toml").write_text(default_template(), encoding="utf-8")
    node = Node(load_profile(tmp_path, "default"))
    node.model.embedded = True
    tools = node.agent.chat_tools()
    system = {"role": "system", "content": node.loaded.system_prompt}
    async with ModelClient(local_settings(local, tool_grammar=True)) as client:
        for prompt in GRAMMAR_PROMPTS:
            messages = [system, {"role": "user", "content": prompt}]
            completion = (await stream_events(client, messages, tools))[-1]
            assert not completion.invalid_tool_calls, completion
            if not completion.tool_calls:
                assert completion.text and completion.text[0] not in "<{` \n\t", completion
                continue
            [call] = completion.tool_calls
            schema = next(t for t in tools if t["function"]["name"] == call.name)
            parameters = schema["function"]["parameters"]
            wanted = set(parameters.get("properties") or {})
            required = parameters.get("required", [])
            assert set(required) <= set(call.arguments) <= wanted, (prompt, call)
    node.approvals.close()
