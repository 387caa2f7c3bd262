"""Grammar-constrained tool calls (llm.grammar): the GBNF the node sends, the calls it reads back.

Whether llama.cpp accepts the grammar and samples under it is tested against the
real embedded model (tests/local_model/test_client_real_server.py).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gbr_node.llm.grammar import (
    MAX_OLD_STRING_CHARS,
    MAX_OLD_STRINGS,
    Workspace,
    answered,
    asks_for_change,
    change_pending,
    changed_last,
    old_strings,
    parse_text_call,
    paths_named,
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


def grammar_for(tools: list[dict], *, must_call: bool = False) -> str:
    grammar = tool_call_grammar(tools, must_call=must_call)
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
        ("edit_file", {"path": "notes.txt", "old_string": "crimson", "new_string": "c"}, True),
        ("edit_file", {"path": "src/a.py", "old_string": "x = 1", "new_string": "x = 2"}, True),
        (
            "edit_file",
            {"path": "notes.txt", "old_string": "red", "new_string": "b"},
            False,
        ),  # twice
        ("edit_file", {"path": "notes.txt", "old_string": "x = 1", "new_string": "b"}, False),
        ("edit_file", {"path": "notes.txt", "old_string": "colo", "new_string": "b"}, False),
        ("edit_file", {"path": "logo.png", "old_string": "PNG", "new_string": "b"}, False),
        ("edit_file", {"path": "new.txt", "old_string": "a", "new_string": "b"}, False),
        ("write_file", {"path": "new.txt", "content": "hi"}, True),
        ("write_file", {"path": "notes.txt.new", "content": "hi"}, True),
        ("write_file", {"path": "src/b.py", "content": "hi"}, True),
        ("write_file", {"path": "note", "content": "hi"}, True),  # a prefix of a file is new
        ("write_file", {"path": "notes.txt", "content": "hi"}, False),  # never overwritten whole
        ("write_file", {"path": "src/a.py", "content": "hi"}, False),
        ("write_file", {"path": "src", "content": "hi"}, False),  # a folder
        ("write_file", {"path": "", "content": "hi"}, False),
        ("write_file", {"path": "n\\u006ftes.txt", "content": "hi"}, False),  # no escapes
    ],
)
def test_with_a_workspace_calls_name_what_exists(name: str, arguments: dict, allowed: bool) -> None:
    grammar = Gbnf(tool_call_grammar([READ, WRITE, EDIT, LIST], workspace=PROJECT))
    text = call(name, arguments).replace("\\\\u006f", "\\u006f")
    assert grammar.matches(text) is allowed
    assert Gbnf(tool_call_grammar([READ, WRITE, EDIT, LIST])).matches(text)  # free without


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
    # logo.png, changed since it was read, may be read again but not edited again.
    assert done == {("read_file", "notes.txt"), ("list_dir", "."), ("edit_file", "logo.png")}
    grammar = Gbnf(tool_call_grammar([READ, LIST, EDIT], workspace=replace(PROJECT, done=done)))
    edit = {"path": "notes.txt", "old_string": "crimson", "new_string": "red"}
    assert grammar.matches(call("edit_file", edit))
    again = Workspace(PROJECT.files, PROJECT.folders, frozenset({("edit_file", "notes.txt")}))
    assert not Gbnf(tool_call_grammar([EDIT, READ], workspace=again)).matches(
        call("edit_file", edit)
    )
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
    binary_only = Workspace({"logo.png": None}, (".",))
    assert "edit_file" not in call_rule(tool_call_grammar([EDIT, READ], workspace=binary_only))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("colour: red\n", ["colour: red", "colour", "red"]),
        ("version = 1.0\n", ["version = 1.0", "version", "1.0"]),
        ('print("hi")\r\n', ['print("hi")', "print", "hi"]),
        ("a a\n", ["a a"]),  # a word found twice is no edit target
        ("", []),
        ("x" * (MAX_OLD_STRING_CHARS + 1), []),
    ],
)
def test_edit_targets_are_lines_then_words_found_once(text: str, expected: list[str]) -> None:
    assert old_strings(text) == expected


def test_edit_targets_are_bounded() -> None:
    text = "\n".join(f"line {n}" for n in range(1000))
    assert len(old_strings(text)) == MAX_OLD_STRINGS


def made(*names: str) -> dict:
    calls = [{"id": n, "function": {"name": n, "arguments": "{}"}} for n in names]
    return {"role": "assistant", "tool_calls": calls}


@pytest.mark.parametrize(
    ("tail", "changed"),
    [
        ([made("write_file"), {"role": "tool", "content": "created a.txt (2 bytes)"}], True),
        ([made("read_file", "edit_file"), {"role": "tool", "content": "a.txt: lines 1-1 of 1"},
          {"role": "tool", "content": "edited a.txt: replaced 1 occurrence"}], True),
        ([made("write_file"), {"role": "tool", "content": "error: a is a folder"}], False),
        ([made("read_file"), {"role": "tool", "content": "a.txt: lines 1-1 of 1"}], False),
        ([made("write_file"), {"role": "tool", "content": "created a"},
          {"role": "user", "content": "again"}], False),  # a new request: calls again
        ([], False),
    ],
)  # fmt: skip
def test_a_successful_change_ends_the_calls_of_the_turn(tail: list, changed: bool) -> None:
    messages = [{"role": "user", "content": "go"}, *tail]
    assert changed_last(messages) is changed
    grammar = tool_call_grammar([READ, WRITE], must_answer=changed_last(messages))
    assert Gbnf(grammar).matches("Done.")
    assert Gbnf(grammar).matches(call("read_file", {"path": "a"})) is not changed


@pytest.mark.parametrize(
    ("request_text", "asks"),
    [
        ("Create a file hello.txt containing: Hello, world", True),
        ("In greet.py replace the word hi with hello.", True),  # "greet.py" splits nothing
        ("In colors.txt, change red to blue.", True),
        ("Please make logs/today.log containing started", True),
        ("Read name.txt, then create hello.txt that says Hello", True),
        ("Find the file with apple and copy its content into found.txt.", True),
        ("Set the timeout in app.toml to 30 (it is 10 now).", True),
        ("WRITE notes.txt", True),
        ("Search the files for HOST and tell me the host name set there.", False),
        ("Read config.ini and tell me which port it sets.", False),
        ("What is the password written in secret.txt?", False),
        ("How many files are in the docs folder?", False),
        ("Which file would you change to fix this?", False),
        ("", False),
    ],
)
def test_a_request_asks_for_a_change_when_a_clause_leads_with_a_change_verb(
    request_text: str, asks: bool
) -> None:
    assert asks_for_change(request_text) is asks


EDIT_ASKED = "Change red to blue in a.txt"


def result(call_id: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


@pytest.mark.parametrize(
    ("request_text", "tail", "pending"),
    [
        (EDIT_ASKED, [], True),
        (EDIT_ASKED, [made("read_file"), result("read_file", "a.txt: 1")], True),
        (EDIT_ASKED, [made("edit_file"), result("edit_file", "error: no")], True),
        (EDIT_ASKED, [made("edit_file"), result("edit_file", "edited a.txt")], False),
        ("What is in a.txt?", [made("read_file"), result("read_file", "a.txt: 1")], False),
    ],
)  # fmt: skip
def test_a_change_asked_for_is_pending_until_a_write_or_edit_succeeds(
    request_text: str, tail: list, pending: bool
) -> None:
    messages = [{"role": "user", "content": "Create b.txt"}, made("write_file")]
    messages += [result("write_file", "created b.txt"), {"role": "assistant", "content": "Done."}]
    messages += [{"role": "user", "content": request_text}, *tail]  # the earlier turn's write
    assert change_pending(messages) is pending  # does not count for this one


@pytest.mark.parametrize(
    ("request_text", "new", "existing"),
    [
        ("Read notes.txt and write the same text into copy.txt.", ("copy.txt",), ("notes.txt",)),
        ("Create the file docs/todo.md with: milk", ("docs/todo.md",), ()),
        ('Save it as "out.md", then as out.md again.', ("out.md",), ()),
        ("Set the version to 2.0 in notes.txt", (), ("notes.txt",)),  # 2.0 is no path
        ("Read src/a.py", (), ("src/a.py",)),
        ("Mail ann@example.com", (), ()),
        ("Write .gbr/x.txt and ../up.txt", (), ()),  # dot-folders and parents: never offered
        ("", (), ()),
    ],
)
def test_the_paths_a_request_names_are_found_new_and_existing(
    request_text: str, new: tuple, existing: tuple
) -> None:
    assert paths_named([{"role": "user", "content": request_text}], PROJECT) == (new, existing)


def test_while_a_named_file_is_still_to_be_made_only_it_is_written_and_nothing_edited() -> None:
    waiting = replace(PROJECT, named=("copy.txt", "docs/b.md"))
    grammar = Gbnf(tool_call_grammar([READ, WRITE, EDIT], workspace=waiting))
    assert grammar.matches(call("write_file", {"path": "copy.txt", "content": "hi"}))
    assert grammar.matches(call("write_file", {"path": "docs/b.md", "content": "hi"}))
    assert not grammar.matches(call("write_file", {"path": "notes.md", "content": "hi"}))
    edit = {"path": "notes.txt", "old_string": "size: big", "new_string": "s"}
    assert not grammar.matches(call("edit_file", edit))
    assert Gbnf(tool_call_grammar([READ, WRITE, EDIT], workspace=PROJECT)).matches(
        call("edit_file", edit)
    )
    assert grammar.matches(call("read_file", {"path": "notes.txt"}))


def test_while_a_change_is_pending_the_files_named_are_the_only_ones_acted_on() -> None:
    """Asked to edit greet.py, the tiny model wrote greet.py.txt, or listed and searched."""
    search = tool("search_text", {"pattern": STR}, ["pattern"])
    edit = {"path": "notes.txt", "old_string": "size: big", "new_string": "s"}
    focused = replace(PROJECT, focus=("notes.txt",))
    grammar = Gbnf(tool_call_grammar([READ, WRITE, EDIT, LIST, search], workspace=focused))
    assert grammar.matches(call("read_file", {"path": "notes.txt"}))
    assert grammar.matches(call("edit_file", edit))
    assert not grammar.matches(call("read_file", {"path": "src/a.py"}))
    assert not grammar.matches(
        call("edit_file", {**edit, "path": "src/a.py", "old_string": "x = 1"})
    )
    assert not grammar.matches(call("write_file", {"path": "notes.txt.new", "content": "x"}))
    assert not grammar.matches(call("list_dir", {"path": "."}))
    assert not grammar.matches(call("search_text", {"pattern": "big"}))
    copying = replace(focused, named=("copy.txt",))
    grammar = Gbnf(tool_call_grammar([READ, WRITE, EDIT], workspace=copying))
    assert grammar.matches(call("write_file", {"path": "copy.txt", "content": "x"}))
    assert grammar.matches(call("read_file", {"path": "notes.txt"}))


def test_an_answer_due_is_the_only_answer_even_when_no_tool_could_be_offered() -> None:
    """Issue 15, fourth round: with every call already made, no grammar was sent at all,
    and the tiny model listed the folder it had just listed again."""
    listed = Workspace({}, (".",), done=frozenset({("list_dir", ".")}))
    assert tool_call_grammar([LIST], workspace=listed) is None  # nothing to offer
    grammar = Gbnf(tool_call_grammar([LIST], must_answer=True, workspace=listed))
    assert grammar.matches("The folder is empty.")
    assert not grammar.matches(call("list_dir", {"path": "."}))


def test_a_tool_fixed_for_the_next_call_that_cannot_be_offered_leaves_the_call_free() -> None:
    fixed = replace(PROJECT, only="list_dir", focus=("lib",))  # no folder lib: nothing to list
    grammar = Gbnf(tool_call_grammar([READ, LIST], workspace=fixed))
    assert grammar.matches(call("read_file", {"path": "notes.txt"}))
    only_list = Gbnf(tool_call_grammar([READ, LIST], workspace=replace(PROJECT, only="list_dir")))
    assert not only_list.matches(call("read_file", {"path": "notes.txt"}))
    assert only_list.matches(call("list_dir", {"path": "src"}))
