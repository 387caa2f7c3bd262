"""The conversation as the embedded server's template can render it (local_server). Pure."""

from __future__ import annotations

from gbr_node.llm.local_server import adapt_messages

CALL = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


def test_tool_results_become_user_messages_naming_the_tool() -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "colour: teal"},
        {"role": "tool", "tool_call_id": "unknown", "content": "x"},
    ]
    adapted = adapt_messages(messages)
    assert adapted[:2] == messages[:2]
    assert adapted[2] == {"role": "assistant", "content": "", "tool_calls": [CALL]}
    assert adapted[3] == {"role": "user", "content": "Result of read_file:\ncolour: teal"}
    assert adapted[4] == {"role": "user", "content": "Result of tool:\nx"}


def test_an_assistant_message_without_content_gets_an_empty_one() -> None:
    [adapted] = adapt_messages([{"role": "assistant", "tool_calls": [CALL]}])
    assert adapted["content"] == ""
