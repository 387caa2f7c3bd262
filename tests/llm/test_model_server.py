"""The test model server itself: its chat-completions validator and its standalone CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from gbr_node.errors import ModelError
from gbr_node.llm.client import ModelClient
from gbr_node.llm.settings import ClientSettings
from tests.support.chat_rules import chat_request_problem

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = {"role": "system", "content": "s"}
USER = {"role": "user", "content": "u"}


def assistant_calling(*ids: str, arguments: object = "{}") -> dict:
    calls = [
        {"id": i, "type": "function", "function": {"name": "t", "arguments": arguments}}
        for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def tool(call_id: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": "r"}


VALID = [
    ("plain", [SYSTEM, USER]),
    ("answered_parallel_calls", [USER, assistant_calling("a", "b"), tool("b"), tool("a"), USER]),
    ("assistant_text_last", [USER, {"role": "assistant", "content": "x"}]),
]
INVALID = [
    ("no_messages", [], "non-empty"),
    ("unanswered_call", [USER, assistant_calling("a"), USER], "did not have response messages: a"),
    ("unanswered_at_end", [USER, assistant_calling("a", "b"), tool("a")], "messages: b"),
    ("answered_twice", [USER, assistant_calling("a"), tool("a"), tool("a")], "'a'"),
    ("tool_without_call", [USER, tool("a")], "must be a response to a preceeding"),
    ("system_not_first", [USER, SYSTEM], "may only come first"),
    ("arguments_not_json", [USER, assistant_calling("a", arguments="{x"), tool("a")],
     "not valid JSON"),
    ("arguments_not_string", [USER, assistant_calling("a", arguments={}), tool("a")],
     "must be a string"),
    ("unknown_role", [{"role": "robot", "content": "x"}], "role must be"),
    ("assistant_without_content", [USER, {"role": "assistant"}], "needs content or tool_calls"),
]  # fmt: skip


@pytest.mark.parametrize("messages", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_conversations_pass(messages: list) -> None:
    assert chat_request_problem({"model": "m", "messages": messages}) is None


@pytest.mark.parametrize(
    ("messages", "problem"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_conversations_are_named(messages: list, problem: str) -> None:
    found = chat_request_problem({"model": "m", "messages": messages})
    assert found is not None and problem in found


def test_model_must_be_set() -> None:
    assert chat_request_problem({"messages": [USER]}) == "you must provide a model parameter"


async def test_cli_serves_its_script_records_requests_then_default_text(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "scripted"}, {"status": 401, "body": "no key"}]))
    record = tmp_path / "requests.jsonl"
    command = [sys.executable, str(ROOT / "scripts" / "model_server.py"), "--script", str(script),
               "--record", str(record), "--default-text", "fallback"]  # fmt: skip
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            with trio.fail_after(10):
                assert process.stdout is not None
                base_url = await trio.to_thread.run_sync(process.stdout.readline)
            settings = ClientSettings(base_url=base_url.strip(), model="test-model", max_retries=0)
            async with ModelClient(settings) as client:
                with trio.fail_after(10):
                    assert (await client.complete([USER])).text == "scripted"
                    with pytest.raises(ModelError, match="HTTP 401"):
                        await client.complete([USER])
                    assert (await client.complete([USER])).text == "fallback"
        finally:
            process.terminate()
        assert process.wait(timeout=10) == 0
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["body"]["messages"] for line in lines] == [[USER]] * 3
    assert all(line["problem"] is None for line in lines)
