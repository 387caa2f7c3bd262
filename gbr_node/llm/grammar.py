"""Grammar-constrained tool calls for small models, pure: GBNF out, calls parsed back.

A tiny model (the embedded one) writes tool calls with invented tool names,
unbalanced JSON and missing arguments, or answers in prose about the tool it
should call. llama.cpp's server can constrain sampling with a GBNF grammar
(`grammar` in the request body; llama.cpp `grammars/README.md`), but refuses
one together with `tools` unless `tool_choice` is "none" - and then it
renders the tool specs in the prompt but no longer parses calls. So the node
does both ends itself (issue 15):

- `tool_call_grammar(tools, must_call)`: an answer is either one tool call,
  written exactly as the chat template shows them (`<tool_call>\\n{"name":
  ..., "arguments": {...}}\\n</tool_call>`), naming a tool offered, with its
  required arguments in schema order, each of the schema's type, optional
  ones optional; or (unless `must_call`) plain text that does not start
  with `<`. Tools whose parameters the grammar cannot express (nested
  objects, unions) are left out of it: they cannot be called, never called
  badly.
- `parse_text_call(text)`: the name and JSON arguments of such a call, or
  None.

JSON strings follow RFC 8259 section 7 (no raw control characters; escapes
`\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX`).
"""

from __future__ import annotations

import json
import re
from typing import Any

CALL_OPEN = "<tool_call>\n"
CALL_CLOSE = "\n</tool_call>"
_CALL_RE = re.compile(r"\s*<tool_call>\s*(\{.*\})\s*</tool_call>\s*", re.DOTALL)

_VALUES = r"""jstr ::= "\"" jchar* "\""
jchar ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])
jint ::= "-"? ("0" | [1-9] [0-9]*)
jnum ::= jint ("." [0-9]+)?
jbool ::= "true" | "false"
jstrs ::= "[" (jstr (", " jstr)*)? "]"
"""
_TYPES = {"string": "jstr", "integer": "jint", "number": "jnum", "boolean": "jbool"}


def _literal(text: str) -> str:
    """`text` as a GBNF string literal (its escapes are JSON's)."""
    return json.dumps(text, ensure_ascii=False)


def _value_rule(schema: Any) -> str | None:
    """The GBNF of a value of JSON schema `schema`, or None when it is not a plain type."""
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "(" + " | ".join(_literal(json.dumps(v)) for v in schema["enum"]) + ")"
    kind = schema.get("type")
    if kind == "array" and (schema.get("items") or {}).get("type") == "string":
        return "jstrs"
    return _TYPES.get(kind) if isinstance(kind, str) else None


def _arguments_rule(parameters: Any) -> str | None:
    """The GBNF of a tool's arguments object: required keys in order, then optional ones."""
    if not isinstance(parameters, dict):
        return None
    properties = parameters.get("properties") or {}
    if not isinstance(properties, dict):
        return None
    required = [k for k in parameters.get("required") or () if k in properties]
    optional = [k for k in properties if k not in required]
    pairs = {}
    for key in [*required, *optional]:
        value = _value_rule(properties[key])
        if value is None:
            if key in required:
                return None
            continue  # an optional argument it cannot express is simply not offered
        pairs[key] = f"{_literal(json.dumps(key) + ': ')} {value}"
    if not required:
        # No required key: `{}`, or the optional ones in order, the first one leading.
        keys = list(pairs)
        if not keys:
            return '"{}"'
        tail = " ".join(f'(", " {pairs[k]})?' for k in keys[1:])
        return f'"{{" ({pairs[keys[0]]} {tail})? "}}"'
    head = ' ", " '.join(pairs[k] for k in required)
    tail = " ".join(f'(", " {pairs[k]})?' for k in pairs if k not in required)
    return f'"{{" {head} {tail} "}}"'


def tool_call_grammar(tools: list[dict[str, Any]], *, must_call: bool = False) -> str | None:
    """A GBNF grammar for one answer offering `tools` (chat-completions `tools` entries).

    The answer is one `<tool_call>` block (see the module docstring) or, unless
    `must_call`, text whose first character is not `<`. None when no tool can
    be expressed (then no grammar should be sent).
    """
    calls = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        arguments = _arguments_rule(function.get("parameters") or {})
        if arguments is not None:
            head = _literal('{"name": ' + json.dumps(function["name"]) + ', "arguments": ')
            calls.append(f'{head} {arguments} "}}"')
    if not calls:
        return None
    root = "root ::= call" if must_call else "root ::= call | answer"
    lines = [
        root,
        f"call ::= {_literal(CALL_OPEN)} ({' | '.join(calls)}) {_literal(CALL_CLOSE)}",
        r"answer ::= [^<\x00] [^\x00]*",
    ]
    return "\n".join(lines) + "\n" + _VALUES


def parse_text_call(text: str) -> tuple[str, str] | None:
    """`(name, arguments JSON)` of the one `<tool_call>` block that is all of `text`, else None.

    The arguments are re-serialised from the parsed object, so they are
    always a JSON object's text.
    """
    match = _CALL_RE.fullmatch(text)
    if match is None:
        return None
    try:
        call = json.loads(match.group(1))
    except ValueError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return None
    arguments = call.get("arguments", {})
    if not isinstance(arguments, dict):
        return None
    return call["name"], json.dumps(arguments, ensure_ascii=False)
