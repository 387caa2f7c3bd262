"""Grammar-constrained tool calls (llm.grammar): the GBNF the node sends, the calls it reads back.

Whether llama.cpp accepts the grammar and samples under it is tested against the
real embedded model (tests/local_model/test_client_real_server.py).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gbr_node.llm.grammar import (
    MAX_FORCED_AFTER_ERRORS,
    Workspace,
    answered,
    must_call,
    parse_text_call,
    seen_in_turn,
    tool_call_grammar,
)
from tests.support.gbnf import Gbnf


def tool(name: str, properties: dict, required: list[str] | None = None) -> dict:
    parameters: dict = {"type": "object", "properties": properties}
    if required is not None:
        parameters["required"] = required
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


STR = {"type": "string"}
READ = tool("read_file", {"path": STR}, ["path"])
WRITE = tool("write_file", {"path": STR, "content": STR}, ["path", "content"])
LIST = tool("list_dir", {"path": STR})
RUN = tool("run_command", {"argv": {"type": "array", "items": STR}}, ["argv"])
NESTED = tool("configure", {"options": {"type": "object"}}, ["options"])


def grammar_for(tools: list[dict]) -> str:
    grammar = tool_call_grammar(tools)
    assert grammar is not None, "the grammar left every tool out"
    return grammar


def call_rule(grammar: str | None) -> str:
    assert grammar is not None
    return next(line for line in grammar.splitlines() if line.startswith("call ::="))


def test_the_call_rule_names_only_the_tools_offered_with_their_required_arguments() -> None:
    grammar = grammar_for([READ, WRITE])
    rule = call_rule(grammar)
    assert grammar.startswith("root ::= call | answer\n")
    assert r'"{\"name\": \"read_file\", \"arguments\": " "{" "\"path\": " jstr' in rule
    assert r'"\"path\": " jstr ", " "\"content\": " jstr' in rule  # in schema order
    assert rule.startswith(r'call ::= "<tool_call>\n" (') and rule.endswith(r'"\n</tool_call>"')
    assert "list_dir" not in rule and "run_command" not in rule


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (LIST, r'"{" ("\"path\": " jstr )? "}"'),  # no required key: `{}` or the optional one
        (RUN, r'"\"argv\": " jstrs'),  # an array of strings
        (tool("t", {"n": {"type": "integer"}}, ["n"]), r'"\"n\": " jint'),
        (tool("t", {"x": {"type": "number"}}, ["x"]), r'"\"x\": " jnum'),
        (tool("t", {"b": {"type": "boolean"}}, ["b"]), r'"\"b\": " jbool'),
        (tool("t", {"m": {"enum": ["r", "w"]}}, ["m"]), r'("\"r\"" | "\"w\"")'),
        (tool("t", {}), r'"{}"'),
        (tool("t", {"p": STR, "o": {"type": "integer"}}, ["p"]), r'(", " "\"o\": " jint)?'),
    ],
)
def test_argument_types_become_grammar_rules(spec: dict, expected: str) -> None:
    assert expected in call_rule(grammar_for([spec]))


def test_tools_the_grammar_cannot_express_are_left_out_never_offered_loosely() -> None:
    rule = call_rule(grammar_for([READ, NESTED]))
    assert "configure" not in rule and "read_file" in rule
    optional_nested = tool("t", {"p": STR, "o": {"type": "object"}}, ["p"])
    assert '"\\"o\\"' not in call_rule(grammar_for([optional_nested]))
    assert tool_call_grammar([NESTED]) is None
    assert tool_call_grammar([]) is None
    assert tool_call_grammar([{"type": "function"}, {"function": {"name": 3}}]) is None


@pytest.mark.parametrize(
    ("text", "allowed"),
    [
        ("The list has eggs and bread.", True),
        ("Done: ```python\nprint(1)\n```", True),  # a code block inside an answer
        ("Привет, готово.", True),  # any language
        ('{"name": "read_file", "arguments": {"path": "a"}}', False),  # a call written bare
        ("```python\nprint(1)\n```", False),  # a code block instead of a call
        (" Done.", False),
        ("\nDone.", False),
        ("<tool_call>", False),  # half a call
        ("", False),
    ],
)
def test_a_text_answer_never_starts_like_a_call_a_code_block_or_whitespace(
    text: str, allowed: bool
) -> None:
    grammar = Gbnf(grammar_for([READ]))
    assert grammar.matches(text) is allowed
    assert grammar.matches(call("read_file", {"path": "a.txt"}))


def test_must_call_leaves_no_text_answer() -> None:
    """The first answer of a turn (`ModelClient` sets `must_call` after the person's
    message): a call, whatever the request says or in whatever language."""
    grammar = tool_call_grammar([READ], must_call=True)
    assert grammar is not None and grammar.startswith("root ::= call\n")
    assert not Gbnf(grammar).matches("The file says hi.")
    assert Gbnf(grammar).matches(call("read_file", {"path": "a.txt"}))


def test_json_strings_in_the_grammar_follow_rfc_8259() -> None:
    grammar = grammar_for([READ])
    assert r'jchar ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u"' in grammar


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>',
         ("read_file", {"path": "a.txt"})),
        ('<tool_call>{"name": "list_dir", "arguments": {}}</tool_call>\n', ("list_dir", {})),
        ('<tool_call>\n{"name": "list_dir"}\n</tool_call>', ("list_dir", {})),
        ('<tool_call>\n{"name": "w", "arguments": {"t": "a\\nb \\u00e9"}}\n</tool_call>',
         ("w", {"t": "a\nb é"})),
    ],
)  # fmt: skip
def test_a_written_call_is_read_back(text: str, expected: tuple) -> None:
    parsed = parse_text_call(text)
    assert parsed is not None
    assert (parsed[0], json.loads(parsed[1])) == expected


@pytest.mark.parametrize(
    "text",
    [
        "just an answer",
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}\n</tool_call>',  # cut JSON
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}',  # no closing tag
        '<tool_call>\n{"name": "read_file", "arguments": "path=a"}\n</tool_call>',
        '<tool_call>\n{"arguments": {"path": "a"}}\n</tool_call>',  # no name
        '<tool_call>\n["read_file"]\n</tool_call>',
        'Sure: <tool_call>\n{"name": "read_file", "arguments": {}}\n</tool_call>',  # text before
    ],
)
def test_anything_else_is_not_a_call(text: str) -> None:
    assert parse_text_call(text) is None


EDIT = tool("edit_file", {"path": STR, "old_string": STR, "new_string": STR},
            ["path", "old_string", "new_string"])  # fmt: skip
PROJECT = Workspace(
    {"notes.txt": "colour: red\nsize: big\nred again? no: crimson\n", "src/a.py": "x = 1\n",
     "logo.png": None, 'we"ird.txt': "q\n"},
    (".", "src"),
)  # fmt: skip


def call(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@pytest.mark.parametrize(
    ("name", "arguments", "allowed"),
    [
        ("read_file", {"path": "notes.txt"}, True),
        ("read_file", {"path": "src/a.py"}, True),
        ("read_file", {"path": "logo.png"}, True),  # exists: the tool says it is binary
        ("read_file", {"path": "notes"}, False),  # invented names
        ("read_file", {"path": "a.py"}, False),
        ("read_file", {"path": "notes.txt.bak"}, False),
        ("list_dir", {"path": "src"}, True),
        ("list_dir", {"path": "."}, True),
        ("list_dir", {}, True),
        ("list_dir", {"path": "notes.txt"}, False),  # a file is no folder
        ("list_dir", {"path": "lib"}, False),
        ("edit_file", {"path": "notes.txt", "old_string": "size: big", "new_string": "s"}, True),
        ("edit_file", {"path": "notes.txt", "old_string": "anything", "new_string": "c"}, False),
        ("edit_file", {"path": "src/a.py", "old_string": "x = 1", "new_string": "x = 2"}, False),
        ("edit_file", {"path": "logo.png", "old_string": "PNG", "new_string": "b"}, False),
        ("edit_file", {"path": "new.txt", "old_string": "a", "new_string": "b"}, False),
        ("write_file", {"path": "new.txt", "content": "hi"}, True),
        ("write_file", {"path": "src/b.py", "content": "print('hi')\n"}, True),
        ("write_file", {"path": "notes.txt", "content": "hi"}, True),  # the tool decides
        ("write_file", {"path": "src/a.py", "content": "hi"}, True),
    ],
)
def test_with_a_workspace_calls_name_what_exists(name: str, arguments: dict, allowed: bool) -> None:
    """Only notes.txt was read in the turn, so only it may be edited."""
    project = replace(PROJECT, seen=frozenset({"notes.txt", "gone.txt"}))
    grammar = Gbnf(tool_call_grammar([READ, WRITE, EDIT, LIST], workspace=project))
    text = call(name, arguments)
    assert grammar.matches(text) is allowed
    assert Gbnf(tool_call_grammar([READ, WRITE, EDIT, LIST])).matches(text)  # free without


SOURCE = 'def f(x):\n\treturn "a\\\\b"  # é\n\n    y = 1\r\nend\n'


@pytest.mark.parametrize(
    ("old_string", "allowed"),
    [
        ("def f(x):", True),  # a whole line
        ("def f(x):\n", True),  # with its newline
        ('def f(x):\n\treturn "a\\\\b"  # é', True),  # lines that follow, escapes kept
        ('\treturn "a\\\\b"  # é\n\n    y = 1\r', True),  # across a blank line, CR kept
        ("    y = 1\r\nend\n", True),  # to the end
        ("end", True),
        ("f(x)", False),  # part of a line
        ("def f(x)", False),
        ("return", False),
        ('return "a\\\\b"  # é', False),  # indentation dropped
        ("     1\tdef f(x):", False),  # read_file's line number copied
        ("\n    y = 1", False),  # a run starts at a line that is not blank
        ("def f(x):\n    y = 1", False),  # lines that do not follow each other
        ("    y = 1\nend", False),  # the CR dropped
        ("end\n\n", False),  # past the end
    ],
)
def test_an_edit_replaces_whole_lines_the_file_holds(old_string: str, allowed: bool) -> None:
    """Issue 32: a file read in the turn whose text is known is edited by whole,
    consecutive lines of that text (what `edit_file` finds), never by text the model
    made up; `new_string` stays free."""
    project = Workspace(
        {"a.py": SOURCE, "big.py": None}, (".",), seen=frozenset({"a.py", "big.py"})
    )
    grammar = Gbnf(tool_call_grammar([EDIT], workspace=project))
    edit = {"path": "a.py", "old_string": old_string, "new_string": "anything\tat all"}
    assert old_string in SOURCE or not allowed
    written = json.dumps({"name": "edit_file", "arguments": edit}, ensure_ascii=False)
    assert grammar.matches(f"<tool_call>\n{written}\n</tool_call>") is allowed
    assert grammar.matches(call("edit_file", {**edit, "path": "big.py"}))  # text unknown: free


def test_calls_already_answered_in_the_turn_are_not_offered_again() -> None:
    def made(name: str, arguments: dict) -> dict:
        function = {"name": name, "arguments": json.dumps(arguments)}
        return {"role": "assistant", "tool_calls": [{"id": "1", "function": function}]}

    messages = [
        {"role": "user", "content": "earlier turn"},
        made("read_file", {"path": "src/a.py"}),
        {"role": "user", "content": "now"},
        made("read_file", {"path": "notes.txt"}),
        made("list_dir", {}),
        made("read_file", {"path": "logo.png"}),
        made("edit_file", {"path": "logo.png", "old_string": "a", "new_string": "b"}),
    ]
    done = answered(messages)
    # logo.png, changed since it was read, may be read again (and edited again).
    assert done == {("read_file", "notes.txt"), ("list_dir", ".")}
    assert seen_in_turn(messages) == {"notes.txt", "logo.png"}  # not src/a.py: another turn
    workspace = replace(PROJECT, done=done, seen=seen_in_turn(messages))
    grammar = Gbnf(tool_call_grammar([READ, LIST, EDIT], workspace=workspace))
    edit = {"path": "notes.txt", "old_string": "red again? no: crimson\n", "new_string": "red"}
    assert grammar.matches(call("edit_file", edit))
    assert grammar.matches(call("edit_file", {**edit, "path": "logo.png"}))
    assert not grammar.matches(call("edit_file", {**edit, "path": "src/a.py"}))
    assert not grammar.matches(call("read_file", {"path": "notes.txt"}))
    assert not grammar.matches(call("list_dir", {"path": "."}))
    assert grammar.matches(call("read_file", {"path": "src/a.py"}))  # another turn's read
    assert grammar.matches(call("read_file", {"path": "logo.png"}))
    assert grammar.matches(call("list_dir", {"path": "src"}))


def test_a_tool_with_nothing_to_act_on_is_not_offered() -> None:
    empty = Workspace({}, (".",))
    grammar = tool_call_grammar([READ, EDIT, WRITE], workspace=empty)
    assert "read_file" not in call_rule(grammar) and "edit_file" not in call_rule(grammar)
    assert Gbnf(grammar).matches(call("write_file", {"path": "a.txt", "content": ""}))
    nothing_read = Workspace({"logo.png": None}, (".",))
    assert "edit_file" not in call_rule(tool_call_grammar([EDIT, READ], workspace=nothing_read))


# Schema bounds that make a value invalid are part of the syntax (issue 32: the model
# wrote `"glob": ""` and `"package": ""`, refused by the tool, then gave up).
NONEMPTY = {"type": "string", "minLength": 1}
SEARCH = tool("search_text", {"pattern": NONEMPTY, "path": STR, "glob": NONEMPTY}, ["pattern"])
COUNTED = tool(
    "t",
    {
        "offset": {"type": "integer", "minimum": 1},
        "depth": {"type": "integer", "minimum": 0},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0},
        "argv": {"type": "array", "items": NONEMPTY, "minItems": 1},
    },
)


@pytest.mark.parametrize(
    ("spec", "arguments", "allowed"),
    [
        (SEARCH, {"pattern": "port"}, True),
        (SEARCH, {"pattern": "port", "glob": "*.py"}, True),
        (SEARCH, {"pattern": ""}, False),
        (SEARCH, {"pattern": "port", "glob": ""}, False),
        (COUNTED, {"offset": 1}, True),
        (COUNTED, {"offset": 12}, True),
        (COUNTED, {"offset": 0}, False),
        (COUNTED, {"offset": -3}, False),
        (COUNTED, {"offset": 1, "depth": 0}, True),
        (COUNTED, {"offset": 1, "depth": -1}, False),
        (COUNTED, {"offset": 1, "depth": 1, "timeout_s": 2.5}, True),
        (COUNTED, {"offset": 1, "depth": 1, "timeout_s": 0.5}, True),
        (COUNTED, {"offset": 1, "depth": 1, "timeout_s": 0}, False),
        (COUNTED, {"offset": 1, "depth": 1, "timeout_s": -1}, False),
        (COUNTED, {"offset": 1, "depth": 1, "timeout_s": 1, "argv": ["ls"]}, True),
        (COUNTED, {"offset": 1, "depth": 1, "timeout_s": 1, "argv": []}, False),
        (COUNTED, {"offset": 1, "depth": 1, "timeout_s": 1, "argv": [""]}, False),
    ],
)
def test_values_the_schema_forbids_cannot_be_written(
    spec: dict, arguments: dict, allowed: bool
) -> None:
    assert Gbnf(grammar_for([spec])).matches(call(spec["function"]["name"], arguments)) is allowed


DELETE = tool("delete_path", {"path": STR}, ["path"])
MOVE = tool("move_path", {"source": STR, "destination": STR}, ["source", "destination"])


@pytest.mark.parametrize(
    ("name", "arguments", "allowed"),
    [
        ("search_text", {"pattern": "x", "path": "src"}, True),
        ("search_text", {"pattern": "x", "path": "notes.txt"}, True),
        ("search_text", {"pattern": "x", "path": "."}, True),
        ("search_text", {"pattern": "x"}, True),
        ("search_text", {"pattern": "x", "path": "server.py"}, False),
        ("delete_path", {"path": "notes.txt"}, True),
        ("delete_path", {"path": "src"}, True),
        ("delete_path", {"path": "old.txt"}, False),
        ("move_path", {"source": "notes.txt", "destination": "n.txt"}, True),
        ("move_path", {"source": "nope.txt", "destination": "n.txt"}, False),
    ],
)
def test_paths_that_must_exist_to_search_delete_or_move_do(
    name: str, arguments: dict, allowed: bool
) -> None:
    grammar = Gbnf(tool_call_grammar([SEARCH, DELETE, MOVE], workspace=PROJECT))
    assert grammar.matches(call(name, arguments)) is allowed


def _turn(*results: str) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": "do it"}]
    for n, text in enumerate(results):
        function = {"name": "read_file", "arguments": json.dumps({"path": f"{n}.txt"})}
        messages.append({"role": "assistant", "tool_calls": [{"id": str(n), "function": function}]})
        messages.append({"role": "tool", "tool_call_id": str(n), "content": text})
    return messages


@pytest.mark.parametrize(
    ("messages", "forced"),
    [
        (_turn(), True),  # the person's message
        (_turn("1\tprint('hi')"), False),  # a result: the model may answer
        (_turn("error: old_string not found"), True),  # a failure: try another way
        (_turn("fine", "error: nope"), True),
        (_turn(*["error: nope"] * MAX_FORCED_AFTER_ERRORS), True),
        (_turn(*["error: nope"] * (MAX_FORCED_AFTER_ERRORS + 1)), False),  # then it may say so
        (_turn("error: nope", "fine"), False),
        ([], False),
    ],
)
def test_must_call_after_the_person_and_after_a_failed_call(
    messages: list[dict], forced: bool
) -> None:
    """Roles and the results' `error:` mark decide, never the words of the request: the
    same messages in another language force the same."""
    assert must_call(messages) is forced
    translated = [{**m, "content": "fais-le"} if m.get("role") == "user" else m for m in messages]
    assert must_call(translated) is forced


@pytest.mark.parametrize(("pattern", "forced"), [("http_timeout", True), ("timeout", False)])
def test_a_search_that_found_nothing_is_followed_by_a_call(tmp_path, pattern, forced) -> None:
    """Issue 32: after `search_text` found no line (a guessed key, `http_timeout` where
    the file says `timeout`), the model answered from memory ("set to 30"); the answer
    after such a search must be a call, as after a failed one. The text is the real
    tool's."""
    from gbr_node.config.profile import ToolsConfig
    from gbr_node.sandbox import Sandbox
    from gbr_node.tools.registry import build_registry

    (tmp_path / "config.yaml").write_text("http:\n  timeout: 45\n")
    registry = build_registry(ToolsConfig(), Sandbox(tmp_path))
    result = registry.call("search_text", {"pattern": pattern, "path": "config.yaml"})
    assert not result.is_error
    assert must_call(_turn(result.content[0]["text"])) is forced


def _answered_call(call_id: str, name: str, arguments: dict, result: str) -> list[dict]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return [
        {"role": "assistant", "tool_calls": [{"id": call_id, "function": function}]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def test_a_search_of_a_path_that_found_nothing_is_not_offered_again() -> None:
    """Issue 32: the model searched `.env` for the same guessed key three times; after a
    search of a path found nothing, only other calls (a read shows the file) are
    offered for it, until the file changes. Ids repeat across answers, as some
    servers send them."""
    nothing = "[0 matching lines in 1 files searched]"
    messages = [
        {"role": "user", "content": "which port?"},
        *_answered_call("call_0", "search_text", {"pattern": "PORT", "path": "notes.txt"}, nothing),
        *_answered_call("call_0", "search_text", {"pattern": "x", "path": "src"}, "src/a.py:1: x"),
    ]
    done = answered(messages)
    assert done == {("search_text", "notes.txt")}
    grammar = Gbnf(tool_call_grammar([SEARCH, READ], workspace=replace(PROJECT, done=done)))
    assert not grammar.matches(call("search_text", {"pattern": "port", "path": "notes.txt"}))
    assert grammar.matches(call("search_text", {"pattern": "port", "path": "src"}))
    assert grammar.matches(call("read_file", {"path": "notes.txt"}))
    edit = {"path": "notes.txt", "old_string": "a", "new_string": "b"}
    changed = [*messages, *_answered_call("call_0", "edit_file", edit, "edited notes.txt")]
    assert answered(changed) == set()
    read = _answered_call("call_0", "read_file", {"path": "notes.txt"}, "1\tcolour: red")
    assert seen_in_turn([*messages, *read, *_answered_call("call_0", "list_dir", {}, "")]) == {
        "notes.txt"
    }
