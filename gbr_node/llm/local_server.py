"""Child-process entry point of the embedded model server: llama-cpp-python's, adapted and tied.

Run as `python -m gbr_node.llm.local_server ARGS...` with ARGS exactly as
`python -m llama_cpp.server` takes them (`--model GGUF --host 127.0.0.1
--port N --chat_format gbr-chatml-tools ...`). Two things happen before
llama-cpp-python's server takes over:

- Parent watchdog: a daemon thread reads stdin, which the parent keeps as
  an open pipe and never writes to. End-of-file means the parent closed the
  pipe or died (even by SIGKILL: the kernel closes a dead process's
  descriptors), and the server exits at once. A killed node never leaves an
  orphan server holding a port and the model's memory.
- Chat format `gbr-chatml-tools` (`register_chat_format`): llama-cpp-python's
  `chatml-function-calling` with the conversation adapted to its template,
  which (in 0.3.36) renders only system, user and assistant messages. Tool
  messages are rendered as nothing, so the model would never see a tool's
  result; an assistant message with `content: null` (OpenAI's shape for a
  message holding only tool calls) fails its request validation, and a
  missing `content` fails its template. The adapter turns each tool message
  into a user message `Result of TOOL:\\n...`, gives tool-call messages
  `content: ""`, and reads a missing `tool_choice` as "auto" when tools are
  offered (OpenAI's default; the stock handler takes it as "none").
  Streaming with tools still fails in that handler (HTTP 200, no event): the
  node sends such requests with `stream: false` (`stream_tools=False`).
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
from typing import Any

CHAT_FORMAT = "gbr-chatml-tools"


def adapt_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages rewritten for the chatml-function-calling template. Pure.

    Tool messages become user messages naming the tool (found through
    `tool_call_id` in the earlier assistant tool calls; "tool" if unknown);
    an assistant `content` that is null or missing becomes "".
    """
    names: dict[str, str] = {}
    adapted = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                names[call.get("id", "")] = call.get("function", {}).get("name", "tool")
            adapted.append({**message, "content": message.get("content") or ""})
        elif role == "tool":
            name = names.get(message.get("tool_call_id", ""), "tool")
            adapted.append({"role": "user", "content": f"Result of {name}:\n{message['content']}"})
        else:
            adapted.append(message)
    return adapted


def register_chat_format() -> None:
    """Register `gbr-chatml-tools` with llama-cpp-python (imports llama_cpp)."""
    from llama_cpp import llama_chat_format

    def handler(**kwargs: Any) -> Any:
        kwargs["messages"] = adapt_messages(kwargs["messages"])
        if kwargs.get("tools") and kwargs.get("tool_choice") is None:
            kwargs["tool_choice"] = "auto"
        return llama_chat_format.chatml_function_calling(**kwargs)

    llama_chat_format.register_chat_completion_handler(CHAT_FORMAT)(handler)


def _exit_when_parent_goes() -> None:
    """Block on stdin until end-of-file, then end the whole process."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        os._exit(0)  # no cleanup wanted: the server holds nothing that needs it


def main() -> None:
    """Start the stdin watchdog, register the chat format, run `llama_cpp.server` with our argv."""
    threading.Thread(target=_exit_when_parent_goes, name="parent-watchdog", daemon=True).start()
    register_chat_format()
    sys.argv = ["llama_cpp.server", *sys.argv[1:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
