"""Conversation validity as the chat-completions API enforces it (temporary; see tests/support)."""


def assert_valid_conversation(messages):
    pending = []
    for i, msg in enumerate(messages):
        role = msg["role"]
        if role == "system":
            assert i == 0, "system message only first"
        if role == "tool":
            assert msg["tool_call_id"] in pending, f"tool message {i} answers nothing"
            pending.remove(msg["tool_call_id"])
            continue
        assert not pending, f"tool calls {pending} unanswered before message {i}"
        if role == "assistant":
            pending = [c["id"] for c in msg.get("tool_calls") or []]
    assert not pending, f"tool calls {pending} unanswered at the end"
