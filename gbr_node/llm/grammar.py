"""Grammar-constrained tool calls for the embedded model, pure: GBNF out, calls parsed back.

llama.cpp's server can constrain sampling with a GBNF grammar (`grammar` in
the request body; llama.cpp `grammars/README.md`), but refuses one together
with `tools` unless `tool_choice` is "none" - and then it renders the tool
specs in the prompt but no longer parses calls (its native parser does not
read Qwen2.5-Coder's output either). So the node does both ends itself
(issues 15 and 32). Every rule here is about the syntax of a call and the
values it may take, never about the words of the request (issue 32 removed
the rules that read them):

- `tool_call_grammar(tools, workspace)`: an answer is either one tool call,
  written as Qwen's and our ChatML templates show them (`<tool_call>\\n{"name":
  ..., "arguments": {...}}\\n</tool_call>`), naming a tool offered, with its
  required arguments in schema order, each of the schema's type and within
  the bounds that would make it invalid (no empty string where `minLength` is
  1, no zero or negative count), optional ones optional; or (unless
  `must_call`: the first answer after the person's message, and the answer
  after one of the turn's first failed calls or searches that found nothing,
  so a request is met by looking
  at the project, not by describing a call in prose) plain text that does
  not start with `<`, `{`, a backtick or whitespace (a call or a code block
  written as text). Tools whose parameters the grammar cannot express
  (nested objects, unions) are left out of it: they cannot be called, never
  called badly.
- With a `Workspace` (the files and folders the project holds), paths that
  must exist do: `read_file` and `edit_file` name a file that exists,
  `list_dir` a folder that exists, `search_text`, `delete_path` and
  `move_path`'s source either; `edit_file` only a file read (or written)
  in the turn, so the model has seen what it replaces, and when the file's
  text is known its `old_string` is whole, consecutive lines of it (text
  `edit_file` will find: no line number of `read_file`'s output, no
  guessed indentation); and a read or listing
  already answered in the turn is not offered again (`answered`; a file
  changed since may be read again). A tool none of whose targets exists is
  left out. Without a workspace (too large, or not given) paths are free.
- `parse_text_call(text)`: the name and JSON arguments of such a call, or
  None.

JSON strings follow RFC 8259 section 7 (no raw control characters; escapes
`\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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
jstr1 ::= "\"" jchar+ "\""
jstrs1 ::= "[" jstr1 (", " jstr1)* "]"
jnat ::= "0" | [1-9] [0-9]*
jpos ::= [1-9] [0-9]*
jposnum ::= (jpos ("." [0-9]+)?) | ("0." [0-9]* [1-9] [0-9]*)
"""
_TYPES = {"string": "jstr", "integer": "jint", "number": "jnum", "boolean": "jbool"}
# The node's own tools whose path argument must name something that exists: a file, a
# folder, or either ("any").
_EXISTING = {
    ("read_file", "path"): "file",
    ("edit_file", "path"): "file",
    ("list_dir", "path"): "folder",
    ("search_text", "path"): "any",
    ("delete_path", "path"): "any",
    ("move_path", "source"): "any",
}
_READS = ("read_file", "list_dir")  # not offered again for what the turn already answered
MAX_FORCED_AFTER_ERRORS = 2  # failed calls in a turn after which an answer may be text
NOTHING_FOUND = "[0 matching lines in "  # how `tools.search`'s answer starts when none matched
_EDIT = "edit_file"  # offered for a file only once it was read (or written) in the turn
_CHANGES = ("write_file", "edit_file")
# Text, not a call: its first character is none of `<` (a call), `{` (a call's JSON
# written bare), a backtick (a code block) or whitespace.
ANSWER_RULE = r"answer ::= [^<{`\x00 \t\r\n] [^\x00]*"


@dataclass(frozen=True)
class Workspace:
    """What the project holds, for the grammar: `files` maps each root-relative file
    path to its text (None when it is not small UTF-8 text; the grammar uses only
    the paths), `folders` the root-relative folders ("." for the root)."""

    files: Mapping[str, str | None] = field(default_factory=dict)
    folders: tuple[str, ...] = (".",)
    done: frozenset[tuple[str, str]] = frozenset()
    """`(tool, path)` not offered again in this turn, so a model cannot loop: the
    reads and listings already answered (a file changed since may be read again)."""
    seen: frozenset[str] = frozenset()
    """Files read or written in this turn: the only ones `edit_file` may name."""


def answered(messages: list[dict[str, Any]]) -> frozenset[tuple[str, str]]:
    """`Workspace.done` of a conversation, from the calls made since the person's last
    message: `read_file` and `list_dir` ones, less the files written or edited after,
    and `search_text` of a path where it found nothing (the model searched the same
    guessed key three times; `read_file` shows what the file holds)."""
    done: set[tuple[str, str]] = set()
    for name, path, result in _calls_in_turn(messages):
        found_nothing = name == "search_text" and (result or "").startswith(NOTHING_FOUND)
        if name in _CHANGES:
            done.discard(("read_file", path))
            done.discard(("search_text", path))
        elif name in _READS or found_nothing:
            done.add((name, path))
    return frozenset(done)


def must_call(messages: list[dict[str, Any]]) -> bool:
    """Whether the next answer must be a tool call: the first answer after the person's
    message (a request is met by looking at the project, not by describing a call in
    prose), and the answer right after a failed call, for the first
    `MAX_FORCED_AFTER_ERRORS` failures of the turn (the model said "let's try again"
    and stopped). A failed call is a tool message starting `error:` (the wire form of
    `ToolExecutionFeedback.as_text`) or a search that found nothing (`NOTHING_FOUND`).
    Reads the roles and results, never the words."""
    if not messages:
        return False
    last = messages[-1]
    if last.get("role") == "user":
        return True
    if last.get("role") != "tool" or not _failed(last):
        return False
    failures = 0
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        failures += message.get("role") == "tool" and _failed(message)
    return failures <= MAX_FORCED_AFTER_ERRORS


def _failed(message: dict[str, Any]) -> bool:
    """A tool message of a failed call (`error:`), or of a search that found nothing
    (`NOTHING_FOUND`): the model then answered from memory ("It is set to 5432")."""
    content = message.get("content")
    return isinstance(content, str) and content.startswith(("error:", NOTHING_FOUND))


def seen_in_turn(messages: list[dict[str, Any]]) -> frozenset[str]:
    """`Workspace.seen`: the paths `read_file` or `write_file` named since the person's
    last message."""
    return frozenset(
        path for name, path, _ in _calls_in_turn(messages) if name in ("read_file", "write_file")
    )


def _calls_in_turn(messages: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    """`(tool, path, result)` of each call since the person's last message, in order
    (`path` "." when the call names none; `result` the text of the tool message
    answering it, None until it came; calls whose arguments do not parse are left
    out). Ids may repeat across answers: a result answers the latest call of its id."""
    calls: list[list[Any]] = []
    for message in messages:
        if message.get("role") == "user":
            calls.clear()
        content = message.get("content")
        if message.get("role") == "tool" and isinstance(content, str):
            waiting = [c for c in calls if c[3] == message.get("tool_call_id") and c[2] is None]
            if waiting:
                waiting[-1][2] = content
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                continue
            path = arguments.get("path", ".") if isinstance(arguments, dict) else None
            name = function.get("name")
            if isinstance(path, str) and isinstance(name, str):
                calls.append([name, path, None, call.get("id")])
    return [(name, path, result) for name, path, result, _ in calls]


def _one_of(values: Iterable[str]) -> str:
    """The GBNF of one of the JSON strings `values`."""
    return "(" + " | ".join(_literal(json.dumps(v, ensure_ascii=False)) for v in values) + ")"


def _literal(text: str) -> str:
    """`text` as a GBNF string literal (its escapes are JSON's)."""
    return json.dumps(text, ensure_ascii=False)


def _value_rule(schema: Any) -> str | None:
    """The GBNF of a value of JSON schema `schema`, or None when it is not a plain type.
    The schema's bounds that make a value invalid are kept (JSON Schema validation,
    sections 6.2-6.4): `minLength` 1 (no empty string), `minItems` 1, an integer's
    `minimum` of 0 or 1, a number's `exclusiveMinimum` 0; others stay free."""
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "(" + " | ".join(_literal(json.dumps(v)) for v in schema["enum"]) + ")"
    kind = schema.get("type")
    if kind == "array" and (schema.get("items") or {}).get("type") == "string":
        items = schema["items"]
        if (schema.get("minItems") or 0) >= 1:
            return "jstrs1" if (items.get("minLength") or 0) >= 1 else "jstrs"
        return "jstrs"
    if kind == "string" and (schema.get("minLength") or 0) >= 1:
        return "jstr1"
    if kind == "integer" and isinstance(schema.get("minimum"), int) and schema["minimum"] >= 0:
        return "jpos" if schema["minimum"] >= 1 else "jnat"
    if kind == "number" and schema.get("exclusiveMinimum") == 0:
        return "jposnum"
    return _TYPES.get(kind) if isinstance(kind, str) else None


def _arguments_rules(
    name: str, parameters: Any, workspace: Workspace | None, rules: list[str]
) -> list[str]:
    """The GBNF alternatives of tool `name`'s arguments: one, or for `edit_file` with a
    `workspace` one per file it may name whose text is known, its `old_string` bound
    to whole lines of that text (`_lines_rule`, whose rules go to `rules`), and one
    for the others."""
    if name != _EDIT or workspace is None:
        return [rule for rule in [_arguments_rule(name, parameters, workspace)] if rule]
    targets = _targets(name, "path", workspace) or []
    known = [path for path in targets if workspace.files.get(path)]
    unknown = [path for path in targets if path not in known]
    found = []
    for path in known:
        text = workspace.files[path] or ""
        fixed = {"path": _one_of([path]), "old_string": _lines_rule(len(rules), text, rules)}
        found.append(_arguments_rule(name, parameters, workspace, fixed))
    if unknown:
        found.append(_arguments_rule(name, parameters, workspace, {"path": _one_of(unknown)}))
    return [rule for rule in found if rule]


def _lines_rule(index: int, text: str, rules: list[str]) -> str:
    """The GBNF of an `old_string` that is one or more whole, consecutive lines of `text`
    (a run starts at a line that is not blank; it may end with the line's newline):
    text the file holds, as `edit_file` requires, never a line number of `read_file`'s
    output nor a guessed indentation. Its rules `eN-L` are appended to `rules`."""
    lines = text.split("\n")
    ends = lines[-1] == ""
    if ends:
        lines.pop()
    starts = []
    for number, line in enumerate(lines):
        piece = [_literal(json.dumps(line, ensure_ascii=False)[1:-1])] if line else []
        if number + 1 < len(lines):
            piece.append(f"({_literal(chr(92) + 'n')} e{index}-{number + 1}?)?")
        elif ends:
            piece.append(f"{_literal(chr(92) + 'n')}?")
        rules.append(f"e{index}-{number} ::= {' '.join(piece)}")
        if line.strip():
            starts.append(f"e{index}-{number}")
    if not starts:
        return "jstr1"
    return f'"\\"" ({" | ".join(starts)}) "\\""'


def _arguments_rule(
    name: str,
    parameters: Any,
    workspace: Workspace | None = None,
    fixed: Mapping[str, str] | None = None,
) -> str | None:
    """The GBNF of tool `name`'s arguments object: required keys in order, then optional
    ones; with `workspace`, paths as the module docstring says; `fixed` gives the value
    rule of some keys."""
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
        targets = _targets(name, key, workspace)
        if fixed and key in fixed:
            value = fixed[key]
        elif targets is not None:
            if not targets and key in required:
                return None  # nothing it could act on: not offered
            value = _one_of(targets) if targets else None
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


def _targets(name: str, key: str, workspace: Workspace | None) -> list[str] | None:
    """The paths argument `key` of tool `name` may name in `workspace`, or None when
    they are free."""
    kind = _EXISTING.get((name, key))
    if workspace is None or kind is None:
        return None
    paths: Iterable[str] = {
        "folder": workspace.folders,
        "file": workspace.files,
        "any": [*workspace.files, *workspace.folders],
    }[kind]
    if name == _EDIT:
        paths = [path for path in paths if path in workspace.seen]
    return [path for path in paths if (name, path) not in workspace.done]


def tool_call_grammar(
    tools: list[dict[str, Any]], *, must_call: bool = False, workspace: Workspace | None = None
) -> str | None:
    """A GBNF grammar for one answer offering `tools` (chat-completions `tools` entries).

    The answer is one `<tool_call>` block or, unless `must_call`, text (see the
    module docstring). With `workspace`, the paths it names are bounded by what
    exists. None when no tool can be expressed (then no grammar should be sent).
    """
    calls = []
    rules: list[str] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        name, parameters = function["name"], function.get("parameters") or {}
        head = _literal('{"name": ' + json.dumps(name) + ', "arguments": ')
        for arguments in _arguments_rules(name, parameters, workspace, rules):
            calls.append(f'{head} {arguments} "}}"')
    if not calls:
        return None
    lines = [
        "root ::= call" if must_call else "root ::= call | answer",
        f"call ::= {_literal(CALL_OPEN)} ({' | '.join(calls)}) {_literal(CALL_CLOSE)}",
        ANSWER_RULE,
        *rules,
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
