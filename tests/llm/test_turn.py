"""What a request fixes for the embedded model's next call (llm.turn), issue 15's fourth round.

Each rule is checked on the grammar the node would send (`bound_turn` then
`tool_call_grammar`), so a test says which calls the tiny model can still make.
"""

from __future__ import annotations

import json

import pytest

from gbr_node.llm.grammar import Workspace, asks_for_change, tool_call_grammar
from gbr_node.llm.turn import (
    answer_due,
    asks_to_copy,
    asks_to_find,
    bound_turn,
    edit_named,
    folders_named,
    spelled_content,
)
from tests.support.gbnf import Gbnf


def tool(name: str, *required: str) -> dict:
    properties = {key: {"type": "string"} for key in required}
    parameters = {"type": "object", "properties": properties, "required": list(required)}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


TOOLS = [
    tool("read_file", "path"),
    tool("write_file", "path", "content"),
    tool("edit_file", "path", "old_string", "new_string"),
    {
        "type": "function",
        "function": {
            "name": "list_dir",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
    tool("search_text", "pattern"),
]


def call(name: str, **arguments: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def asked(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def called(messages: list[dict], name: str, result: str, **arguments: str) -> list[dict]:
    """`messages` with one more call of `name` and its `result`."""
    call_id = f"c{len(messages)}"
    function = {"name": name, "arguments": json.dumps(arguments)}
    made = {"role": "assistant", "tool_calls": [{"id": call_id, "function": function}]}
    return [*messages, made, {"role": "tool", "tool_call_id": call_id, "content": result}]


def grammar(messages: list[dict], project: Workspace) -> Gbnf:
    workspace = bound_turn(messages, project)
    return Gbnf(
        tool_call_grammar(
            TOOLS,
            must_call=True,
            must_answer=answer_due(messages, workspace),
            workspace=workspace,
        )
    )


PROJECT = Workspace(
    {"pot.txt": "soup\n", "jar.cfg": "mode = slow\n", "bin/a.txt": "x\n", "bin/b.txt": "y\n",
     "src/main.c": "int LIMIT = 4;\n", "src/io.c": "int x;\n"},
    (".", "bin", "src"),
)  # fmt: skip


@pytest.mark.parametrize(
    ("request_text", "spelled"),
    [
        ("Create a file kite.txt containing: red and gold", "red and gold"),
        ("Add a file kite.txt with the words: fly high.", "fly high"),
        ("Put the text 'up up' into a new file kite.txt", "up up"),
        ('Write "lift" to kite.txt', "lift"),
        ("Make kite.txt that says windy day", "windy day"),
        ("Please make out/kite.log containing begun", "begun"),
        ("Save it as 'kite.txt'", None),  # a quoted file name is no text
        ("Create kite.txt", None),
        ("Read the dog's file", None),  # an apostrophe quotes nothing
    ],
)
def test_the_text_a_request_spells_out_is_found(request_text: str, spelled: str | None) -> None:
    assert spelled_content(request_text) == spelled


def test_a_new_file_whose_text_the_request_spells_is_written_with_exactly_that_text() -> None:
    """It wrote "The text is eggs and bread. The text is ..." until its token limit, then
    the error's words into the file."""
    rules = grammar(asked("Create a file kite.txt with the words: red and gold"), PROJECT)
    assert rules.matches(call("write_file", path="kite.txt", content="red and gold"))
    assert not rules.matches(call("write_file", path="kite.txt", content="The text is red"))
    assert not rules.matches(call("list_dir", path="."))  # nothing to look at first
    assert not rules.matches(call("search_text", pattern="kite"))


def test_a_copy_writes_exactly_the_text_read_and_nothing_before_the_read() -> None:
    """It wrote "The quick brown fox is the quick brown fox" for a copy."""
    messages = asked("Read pot.txt and put its content into lid.txt.")
    assert asks_to_copy(messages[0]["content"])
    before = grammar(messages, PROJECT)
    assert before.matches(call("read_file", path="pot.txt"))
    assert not before.matches(call("write_file", path="lid.txt", content="soup\n"))
    after = grammar(called(messages, "read_file", "pot.txt: 1\tsoup", path="pot.txt"), PROJECT)
    assert after.matches(call("write_file", path="lid.txt", content="soup\n"))
    assert not after.matches(call("write_file", path="lid.txt", content="The soup"))
    assert not after.matches(call("read_file", path="jar.cfg"))


def test_a_file_made_from_a_named_file_holds_its_text_after_words_the_request_spells() -> None:
    """It wrote the request's words ("Hello followed by that name"), or "Hello, World!"
    for a word in capitals."""
    messages = asked("Read pot.txt, then create menu.txt that says Today followed by it.")
    read = called(messages, "read_file", "pot.txt: 1\tsoup", path="pot.txt")
    rules = grammar(read, PROJECT)
    assert rules.matches(call("write_file", path="menu.txt", content="Today soup"))
    assert rules.matches(call("write_file", path="menu.txt", content="Today followed by soup"))
    assert not rules.matches(call("write_file", path="menu.txt", content="soup"))
    assert not rules.matches(call("write_file", path="menu.txt", content="Today is good"))
    loud = asked("Look at pot.txt and create loud.txt with its word in capital letters.")
    rules = grammar(called(loud, "read_file", "pot.txt: 1\tsoup", path="pot.txt"), PROJECT)
    assert rules.matches(call("write_file", path="loud.txt", content="SOUP"))
    assert not rules.matches(call("write_file", path="loud.txt", content="soup"))


@pytest.mark.parametrize(
    ("request_text", "text", "edit"),
    [
        ("In jar.cfg, change slow to fast.", "mode = slow\n", ("slow", "fast")),
        ("Replace the word slow with fast in jar.cfg", "mode = slow\n", ("slow", "fast")),
        ("Switch jar.cfg from slow to fast", "mode = slow\n", ("slow", "fast")),
        ("Edit jar.cfg so the mode is fast instead of slow.", "mode = slow\n", ("slow", "fast")),
        ("Set the mode in jar.cfg to fast.", "mode = slow\n", ("slow", "fast")),
        ("Fix jar.cfg: it should say mode = fast", "mode = slow\n", ("mode = slow", "mode = fast")),
        ("Update v.txt so that it is 3.1 instead of 3.0.", "v 3.0\n", ("3.0", "3.1")),
        ("In jar.cfg, change quick to fast.", "mode = slow\n", None),  # quick is not there
        ("In jar.cfg, change slow to fast.", "slow slow\n", None),  # twice: not one edit
        ("Tidy jar.cfg", "mode = slow\n", None),
    ],
)
def test_the_edit_a_request_spells_out_is_found_in_the_file(
    request_text: str, text: str, edit: tuple | None
) -> None:
    assert edit_named(request_text, text) == edit


def test_an_edit_the_request_spells_out_is_the_one_edit_offered() -> None:
    """It replaced "today" for "change rainy to sunny", and "level" by "level.cfg"."""
    rules = grammar(asked("In jar.cfg, change slow to fast."), PROJECT)
    made = {"path": "jar.cfg", "old_string": "slow", "new_string": "fast"}
    assert rules.matches(call("edit_file", **made))
    assert not rules.matches(call("edit_file", **{**made, "old_string": "mode"}))
    assert not rules.matches(call("edit_file", **{**made, "new_string": "quick"}))
    assert rules.matches(call("read_file", path="jar.cfg"))
    vague = grammar(asked("Tidy up jar.cfg and fix it up."), PROJECT)  # nothing spelled
    assert vague.matches(call("edit_file", **{**made, "old_string": "mode", "new_string": "up"}))


def test_a_question_about_a_folder_it_names_is_a_listing_of_it_then_the_answer() -> None:
    """It listed the folder, then listed, read and searched until its step limit."""
    messages = asked("What does the bin folder hold?")
    assert folders_named(messages[0]["content"], PROJECT.folders) == ("bin",)
    first = grammar(messages, PROJECT)
    assert first.matches(call("list_dir", path="bin"))
    assert not first.matches(call("list_dir", path="."))
    assert not first.matches(call("read_file", path="bin/a.txt"))
    listed = called(messages, "list_dir", "bin/ (depth 1): 2 files\nbin/a.txt", path="bin")
    then = grammar(listed, PROJECT)
    assert then.matches("bin/ (depth 1): 2 files\nbin/a.txt: bin holds a.txt and b.txt.")
    assert not then.matches("bin holds c.txt.")  # the answer starts with the listing
    assert not then.matches(call("read_file", path="bin/a.txt"))


def test_a_question_which_file_holds_a_word_searches_it_then_answers_from_a_line_found() -> None:
    """It read a file it guessed, searched "timeout_ms" for TIMEOUT_MS, or answered that
    a file it had not found held the word."""
    messages = asked("Which source file defines LIMIT?")
    assert asks_to_find(messages[0]["content"])
    first = grammar(messages, PROJECT)
    assert first.matches(call("search_text", pattern="LIMIT"))
    assert not first.matches(call("search_text", pattern="limit"))  # not as written
    assert not first.matches(call("search_text", pattern="source"))  # in no file
    assert not first.matches(call("read_file", path="src/io.c"))
    hit = "src/main.c:1: int LIMIT = 4;"
    searched = called(messages, "search_text", hit + "\n[1 matching lines]", pattern="LIMIT")
    then = grammar(searched, PROJECT)
    assert then.matches(hit + ": LIMIT is 4.")
    assert not then.matches("src/io.c defines it.")
    assert not then.matches(call("read_file", path="src/main.c"))


def test_to_copy_a_file_it_must_find_it_searches_then_reads_what_it_found() -> None:
    """It listed, then searched the same word until its step limit."""
    messages = asked("Find the file with LIMIT and copy its text into limit.txt.")
    assert grammar(messages, PROJECT).matches(call("search_text", pattern="LIMIT"))
    assert not grammar(messages, PROJECT).matches(call("list_dir", path="src"))
    hit = "src/main.c:1: int LIMIT = 4;"
    searched = called(messages, "search_text", hit, pattern="LIMIT")
    assert grammar(searched, PROJECT).matches(call("read_file", path="src/main.c"))
    assert not grammar(searched, PROJECT).matches(call("read_file", path="src/io.c"))
    assert not grammar(searched, PROJECT).matches(call("search_text", pattern="LIMIT"))
    read = called(searched, "read_file", "src/main.c: 1\tint LIMIT = 4;", path="src/main.c")
    text = PROJECT.files["src/main.c"] or ""
    assert grammar(read, PROJECT).matches(call("write_file", path="limit.txt", content=text))


@pytest.mark.parametrize(
    ("request_text", "text", "edit"),
    [
        ("Please swap slow for fast in jar.cfg.", "mode = slow\n", ("slow", "fast")),
        ("Make the mode in jar.cfg fast rather than slow.", "mode = slow\n", ("slow", "fast")),
    ],
)
def test_fifth_round_edit_shapes_are_found(request_text: str, text: str, edit: tuple) -> None:
    """Issue 15, fifth round (from held out 6's first run): "swap" leads a change, and
    "rather than" says what "instead of" says."""
    assert edit_named(request_text, text) == edit
    assert asks_for_change(request_text)
    assert grammar(asked(request_text), PROJECT).matches(
        call("edit_file", path="jar.cfg", old_string="slow", new_string="fast")
    )


@pytest.mark.parametrize(
    "request_text",
    ["Look up LIMIT in the code.", "Where is LIMIT defined?", "Look for LIMIT, please."],
)
def test_fifth_round_find_shapes_search_first(request_text: str) -> None:
    """From held out 5 and 6's first runs: it read a file it guessed."""
    assert asks_to_find(request_text)
    rules = grammar(asked(request_text), PROJECT)
    assert rules.matches(call("search_text", pattern="LIMIT"))
    assert not rules.matches(call("read_file", path="src/main.c"))


def test_a_duplicate_is_a_copy() -> None:
    """From held out 5: "Duplicate a as b" was no change, and it echoed the file read."""
    messages = asked("Duplicate pot.txt as pan.txt.")
    read = called(messages, "read_file", "pot.txt: 1\tsoup", path="pot.txt")
    assert grammar(read, PROJECT).matches(call("write_file", path="pan.txt", content="soup\n"))
    assert not grammar(read, PROJECT).matches(call("write_file", path="pan.txt", content="soup"))
    assert not grammar(read, PROJECT).matches("pot.txt: 1 soup")


def test_a_request_naming_only_new_files_is_the_write_with_words_it_was_given() -> None:
    """From held out 5 and 6: it listed and searched for a folder not made yet, or wrote
    a text to its token limit and then the error's words into the file."""
    rules = grammar(asked("Make out/kit.txt and put the word ready in it"), PROJECT)
    assert rules.matches(call("write_file", path="out/kit.txt", content="ready"))
    assert rules.matches(call("write_file", path="out/kit.txt", content="the word ready"))
    assert not rules.matches(call("write_file", path="out/kit.txt", content="The word ready"))
    error = "error: not run: the tool call is not a JSON object"
    assert not rules.matches(call("write_file", path="out/kit.txt", content=error))
    assert not rules.matches(call("list_dir", path="."))
    assert not rules.matches(call("search_text", pattern="ready"))


def test_a_file_made_from_a_named_file_starts_with_the_request_s_capitalised_words() -> None:
    """From held out 6: "write Welcome plus the guest's name" gave only the name."""
    messages = asked("Open pot.txt and write Lunch plus its dish into menu.txt.")
    rules = grammar(called(messages, "read_file", "pot.txt: 1\tsoup", path="pot.txt"), PROJECT)
    assert rules.matches(call("write_file", path="menu.txt", content="Lunch soup"))
    assert not rules.matches(call("write_file", path="menu.txt", content="soup"))
    assert not rules.matches(call("write_file", path="menu.txt", content="Lunch Lunch soup"))
