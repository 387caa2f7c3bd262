"""The chat-completions request rules the test model server enforces, as a pure function.

What the OpenAI API answers 400 for (and what DESIGN.md "Wire contracts"
requires of every request gbr-node sends):
- the body is a JSON object with a non-empty string `model` and a non-empty
  `messages` list of objects with a known `role`;
- a system (or developer) message may only come first;
- an assistant message has `content` (a string) or `tool_calls`; each call
  has a non-empty `id`, `type: "function"`, a non-empty `function.name`,
  and `function.arguments` as a string holding valid JSON;
- after an assistant message with `tool_calls`, each call is answered by
  exactly one `tool` message (matching `tool_call_id`) before any other
  message; a tool message only answers a pending call of that assistant;
- `tools`, when present, is a list of `{"type": "function", "function": {"name": ...}}`.
"""

from __future__ import annotations

import json
from typing import Any

ROLES = ("system", "developer", "user", "assistant", "tool")


def chat_request_problem(body: Any) -> str | None:
    """The first rule `body` breaks, worded like the OpenAI API's 400 message, or None."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    problem = _tools_problem(body.get("tools"))
    if problem:
        return problem
    pending: list[str] = []
    for i, message in enumerate(messages):
        problem = _message_problem(i, message, pending)
        if problem:
            return problem
    if pending:
        return _unanswered(pending)
    return None


def _message_problem(i: int, message: Any, pending: list[str]) -> str | None:
    where = f"messages[{i}]"
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        return f"{where}: role must be one of {', '.join(ROLES)}"
    role = message["role"]
    if role == "tool":
        call_id = message.get("tool_call_id")
        if call_id not in pending:
            return (
                f"{where}: messages with role 'tool' must be a response to a preceeding "
                f"message with 'tool_calls' (unknown or already answered tool_call_id {call_id!r})"
            )
        pending.remove(call_id)
        if not isinstance(message.get("content"), str | list):
            return f"{where}: a tool message needs content"
        return None
    if pending:
        return _unanswered(pending)
    if role in ("system", "developer") and i != 0:
        return f"{where}: a {role} message may only come first"
    if role == "assistant":
        calls = message.get("tool_calls")
        if calls is None or calls == []:
            if not isinstance(message.get("content"), str | list):
                return f"{where}: an assistant message needs content or tool_calls"
            return None
        problem = _calls_problem(where, calls)
        if problem:
            return problem
        pending.extend(call["id"] for call in calls)
        return None
    if not isinstance(message.get("content"), str | list):
        return f"{where}: a {role} message needs content"
    return None


def _calls_problem(where: str, calls: Any) -> str | None:
    if not isinstance(calls, list):
        return f"{where}.tool_calls must be an array"
    seen: set[str] = set()
    for j, call in enumerate(calls):
        at = f"{where}.tool_calls[{j}]"
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call["id"]:
            return f"{at}.id must be a non-empty string"
        if call["id"] in seen:
            return f"{at}.id {call['id']!r} is repeated"
        seen.add(call["id"])
        if call.get("type") != "function":
            return f"{at}.type must be 'function'"
        function = call.get("function")
        if not isinstance(function, dict) or not function.get("name"):
            return f"{at}.function.name must be a non-empty string"
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            return f"{at}.function.arguments must be a string"
        try:
            json.loads(arguments)
        except ValueError:
            return f"{at}.function.arguments is not valid JSON: {arguments[:80]!r}"
    return None


def _tools_problem(tools: Any) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "'tools' must be an array"
    for k, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type") != "function":
            return f"tools[{k}] must be {{'type': 'function', 'function': {{...}}}}"
        if not isinstance(function.get("name"), str) or not function["name"]:
            return f"tools[{k}].function.name must be a non-empty string"
    return None


def _unanswered(pending: list[str]) -> str:
    return (
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(pending)
    )
