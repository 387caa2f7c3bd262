"""Grammar-constrained tool calls (llm.grammar): the GBNF the node sends, the calls it reads back.

Whether llama.cpp accepts the grammar and samples under it is tested against the
real embedded model (tests/local_model/test_client_real_server.py).
"""

from __future__ import annotations

import json

import pytest

from gbr_node.llm.grammar import parse_text_call, tool_call_grammar


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


def grammar_for(tools: list[dict], *, must_call: bool = False) -> str:
    grammar = tool_call_grammar(tools, must_call=must_call)
    assert grammar is not None, "the grammar left every tool out"
    return grammar


def call_rule(grammar: str) -> str:
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


def test_must_call_leaves_no_text_answer() -> None:
    grammar = grammar_for([READ], must_call=True)
    assert grammar.startswith("root ::= call\n")
    free = grammar_for([READ])
    assert "answer ::= [^<" in free  # a text answer never starts like a call


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
