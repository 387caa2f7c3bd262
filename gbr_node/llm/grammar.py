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
- With a `Workspace` (the files and folders the project holds, the small
  text files' contents), the grammar also carries what the model cannot be
  trusted to know: `read_file` and `edit_file` name a file that exists,
  `list_dir` a folder that exists, and `edit_file`'s `old_string` is a line
  or a word that occurs exactly once in the file its `path` names (what the
  tool needs to succeed).
  A tool none of whose targets exists (`read_file` in an empty project) is
  left out. Without a workspace (too large, or not given) paths are free.
  `write_file` never names an existing file or folder (the embedded model
  edits files, it never overwrites one whole). `answered(messages)` gives
  the calls not to offer again in the turn (`Workspace.done`), and
  `changed_last(messages)` says a write or edit just succeeded: then the
  answer must be text (`must_answer`).
- `parse_text_call(text)`: the name and JSON arguments of such a call, or
  None.

JSON strings follow RFC 8259 section 7 (no raw control characters; escapes
`\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gbr_node.library.present import without_lookup

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
# The node's own tools whose `path` must name something that exists: a file or a folder.
_EXISTING = {"read_file": "file", "edit_file": "file", "list_dir": "folder"}
_EDIT = "edit_file"  # its `old_string` must occur once in the file `path` names
_CREATE = "write_file"  # its `path` must not name a file or folder that exists
_CHANGES = ("write_file", "edit_file")
_SEARCH = "search_text"  # its `pattern` is a word of the request (`Workspace.patterns`)
_PCHAR = r"[^\"\\\x00-\x1f]"  # a path character, unescaped (new paths take no escapes)
MAX_OLD_STRINGS = 64  # choices of `old_string` per file (its lines first, then its words)
MAX_OLD_STRING_CHARS = 200
_WORD_RE = re.compile(r"\w+(?:[.\-]\w+)*")
AROUND_WORDS = 6  # words of the request allowed before and after a text `Workspace.around`
FREE_WORDS = 16  # words in a free text argument made of `Workspace.words`


@dataclass(frozen=True)
class Workspace:
    """What the project holds, for the grammar: `files` maps each root-relative file
    path to its text (None when it is not small UTF-8 text), `folders` the
    root-relative folders ("." for the root)."""

    files: Mapping[str, str | None] = field(default_factory=dict)
    folders: tuple[str, ...] = (".",)
    done: frozenset[tuple[str, str]] = frozenset()
    """`(tool, path)` not offered again in this turn, so a model cannot loop: the
    reads and listings already answered (a file changed since may be read again),
    and `edit_file` of a file already changed in the turn (no edit undone)."""
    named: tuple[str, ...] = ()
    """Paths the person's last message names that do not exist yet (`paths_named`):
    while there are any, `write_file` names one of them and `edit_file` is not
    offered (asked to copy a.txt into b.txt, the tiny model edited a.txt or wrote
    notes.txt for notes/todo.txt)."""
    focus: tuple[str, ...] = ()
    """Existing files the person's last message names, set while the change it asks
    for is pending: then only `read_file`, `edit_file` (of these files) and
    `write_file` (of `named`, if any) are offered (asked to edit greet.py, the tiny
    model wrote greet.py.txt, or listed and searched until its step limit). Set by
    `llm.turn` to the folders a question names too, while `only` is `list_dir`."""
    content: tuple[str, ...] | None = None
    """`write_file`'s content, one of these texts (`llm.turn`: the text the request
    spells out, or the text of the files a copy read); None leaves it free, and
    with none at all no `write_file` is offered yet."""
    around: tuple[str, ...] = ()
    """Texts read in the turn one of which `write_file`'s content must be, after one to
    AROUND_WORDS words of `lead` (no more words than `lead` has) when there are any
    (a file made from a file the request names, `llm.turn`)."""
    lead: tuple[str, ...] = ()
    """Words that lead a content made from `around` (the text the request spells)."""
    edits: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """`path -> (old, new)`: the one edit `edit_file` makes in that file (the edit the
    request spells out, `llm.turn.edit_named`)."""
    patterns: tuple[str, ...] = ()
    """The words `search_text` may look for (the request's, as written); empty: free."""
    only: str = ""
    """The one tool the next call uses, when the request fixes it (`llm.turn`); a tool
    the grammar cannot offer leaves the call free again (and `focus` unset)."""
    found: tuple[str, ...] = ()
    """What a tool found for the question asked (lines a search found, a listing): an
    answer starts with one of them (the tiny model named a file it had guessed, or
    one that was not in the listing)."""
    words: tuple[str, ...] = ()
    """The words a free `write_file` content or `edit_file` new_string is made of, one to
    FREE_WORDS of them one space apart (the request's and those of the files read in
    the turn, `llm.turn`); empty: free. The tiny model wrote "The text is ... The text
    is ..." to its token limit, then the error that followed into the file."""


def person_text(message: Mapping[str, Any] | None) -> str:
    """The text a user message's person wrote: its content less the node's
    library lookup block (`library.present.without_lookup`), whose names,
    paths and words the embedded model must never be steered to write."""
    return without_lookup(str((message or {}).get("content") or ""))


def answered(messages: list[dict[str, Any]]) -> frozenset[tuple[str, str]]:
    """`Workspace.done` of a conversation, from the calls made since the person's last
    message: `read_file` and `list_dir` ones, less the files written or edited
    after; and `("edit_file", path)` for each file written or edited."""
    done: set[tuple[str, str]] = set()
    for message in messages:
        if message.get("role") == "user":
            done.clear()
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                continue
            path = arguments.get("path", ".") if isinstance(arguments, dict) else None
            if not isinstance(path, str):
                continue
            name = function.get("name")
            if name in _CHANGES:
                done.discard(("read_file", path))
                done.add((_EDIT, path))
            elif name in _EXISTING:
                done.add((name, path))
    return frozenset(done)


def old_strings(text: str) -> list[str]:
    """The `edit_file` targets of `text`: its lines, then its words (runs of word
    characters, with inner `.` or `-`), each that occurs exactly once in `text`
    and is at most MAX_OLD_STRING_CHARS long; at most MAX_OLD_STRINGS, in order."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    candidates = [line for line in lines if line.strip()] + _WORD_RE.findall(text)
    chosen: list[str] = []
    for candidate in dict.fromkeys(candidates):
        if len(chosen) == MAX_OLD_STRINGS:
            break
        if len(candidate) <= MAX_OLD_STRING_CHARS and text.count(candidate) == 1:
            chosen.append(candidate)
    return chosen


def _one_of(values: list[str]) -> str:
    """The GBNF of one of the JSON strings `values`."""
    return "(" + " | ".join(_literal(json.dumps(v, ensure_ascii=False)) for v in values) + ")"


def _one_inner(values: Iterable[str]) -> str:
    """The GBNF of one of `values` written inside a JSON string (escaped, no quotes)."""
    inner = [_literal(json.dumps(v, ensure_ascii=False)[1:-1]) for v in values]
    return "(" + " | ".join(inner) + ")"


def _one_of_text(values: Iterable[str]) -> str:
    """The GBNF of one of the plain texts `values`."""
    return "(" + " | ".join(_literal(v) for v in values) + ")"


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


def _arguments_rule(name: str, parameters: Any, workspace: Workspace | None = None) -> str | None:
    """The GBNF of tool `name`'s arguments object: required keys in order, then optional
    ones; with `workspace`, paths and `old_string` as the module docstring says."""
    if not isinstance(parameters, dict):
        return None
    properties = parameters.get("properties") or {}
    if not isinstance(properties, dict):
        return None
    required = [k for k in parameters.get("required") or () if k in properties]
    optional = [k for k in properties if k not in required]
    targets = _targets(name, workspace)
    if name == _EDIT and workspace is not None and workspace.named:
        return None  # a file the person named is still to be made: not an edit
    if targets is not None and "path" in properties:
        if not targets:
            return None  # nothing it could act on: not offered
        if name == _EDIT and required[:2] == ["path", "old_string"]:
            return _edit_rule(targets, workspace, required, properties)
    pairs = {}
    for key in [*required, *optional]:
        value = _value_rule(properties[key])
        if key == "path" and targets is not None:
            value = _one_of(targets)
        elif key == "path" and name == _CREATE and workspace is not None:
            value = _one_of(list(workspace.named)) if workspace.named else "newpath"
        elif key == "content" and name == _CREATE and workspace is not None:
            if workspace.content is not None and not workspace.content:
                return None  # not yet: a file to read first, or nothing read to copy
            if workspace.content:
                value = _one_of(list(workspace.content))
            elif workspace.around:
                value = "around"
            elif workspace.words:
                value = "words"
        elif key == "pattern" and name == _SEARCH and workspace and workspace.patterns:
            value = _one_of(list(workspace.patterns))
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


def _targets(name: str, workspace: Workspace | None) -> list[str] | None:
    """The paths tool `name` may name in `workspace`, or None when they are free."""
    kind = _EXISTING.get(name)
    if workspace is None or kind is None:
        return None
    paths: Iterable[str] = workspace.folders if kind == "folder" else workspace.files
    if workspace.focus:
        paths = [path for path in paths if path in workspace.focus]
    return [path for path in paths if (name, path) not in workspace.done]


def _offered(name: str, workspace: Workspace | None) -> bool:
    """False for the tools `Workspace.focus` leaves out (module docstring)."""
    if workspace is not None and workspace.only:
        return name == workspace.only
    if workspace is None or not workspace.focus:
        return True
    if name == _CREATE:
        return bool(workspace.named)
    return name in ("read_file", _EDIT)


def _new_path_rules(existing: list[str]) -> list[str]:
    """GBNF rules `newpath ...`: a non-empty JSON string of path characters, without
    escapes, that is none of `existing` (a trie over them: each node either closes
    the string, when that is no existing path, or goes on with any other character,
    or follows a child)."""
    trie: dict[str, Any] = {}
    for path in existing:
        node = trie
        for char in path:
            node = node.setdefault(char, {})
        node[""] = {}  # the end of an existing path
    rules: list[str] = []

    def rule(node: dict[str, Any], name: str, first: bool) -> None:
        children = sorted(c for c in node if c)
        branches = [] if first or "" in node else ['"\\""']
        excluded = "".join(f"\\u{ord(c):04x}" for c in children)
        branches.append(f'[^"\\\\\\x00-\\x1f{excluded}] {_PCHAR}* "\\""')
        for index, char in enumerate(children):
            child = f"{name}-{index}"
            branches.append(f"{_literal(char)} {child}")
            rule(node[char], child, False)
        rules.insert(0, f"{name} ::= " + " | ".join(branches))

    rule(trie, "newpath-t", True)
    return ['newpath ::= "\\"" newpath-t', *rules]


def _edit_rule(
    files: list[str], workspace: Workspace | None, required: list[str], properties: dict[str, Any]
) -> str | None:
    """`edit_file`'s arguments: a file with text, one of its `old_strings`, then the rest;
    or, for a file in `Workspace.edits`, exactly that edit."""
    texts = workspace.files if workspace is not None else {}
    edits = workspace.edits if workspace is not None else {}
    rest = []
    for key in required[2:]:
        value = _value_rule(properties[key])
        if value is None:
            return None
        if key == "new_string" and workspace is not None and workspace.words:
            value = "words"
        rest.append(f'", " {_literal(json.dumps(key) + ": ")} {value}')
    branches = []
    for path in files:
        head = _literal(json.dumps(path, ensure_ascii=False) + ', "old_string": ')
        if path in edits and required[2:] == ["new_string"]:
            old, new = (json.dumps(text, ensure_ascii=False) for text in edits[path])
            made = _literal(old + ', "new_string": ' + new)
            branches.append(f"{head} {made}")
            continue
        choices = old_strings(texts.get(path) or "")
        if choices:
            branches.append(" ".join([head, _one_of(choices), *rest]))
    if not branches:
        return None
    opening = _literal('{"path": ')
    return f'{opening} ({" | ".join(branches)}) "}}"'


def _around_rules(workspace: Workspace) -> list[str]:
    """GBNF rule `around ...`: a JSON string that is one of `workspace.around`, after one
    to AROUND_WORDS of `workspace.lead` (at most as many as it has) when there are
    any, one space apart."""
    rules = [f"around-core ::= {_one_inner(workspace.around)}"]
    line = '"\\"" around-core "\\""'
    if workspace.lead:
        rules.append(f"around-word ::= {_one_inner(workspace.lead)}")
        more = '(around-word " ")? ' * (min(AROUND_WORDS, len(workspace.lead)) - 1)
        line = f'"\\"" around-word " " {more}around-core "\\""'
    return [f"around ::= {line}", *rules]


def changed_last(messages: list[dict[str, Any]]) -> bool:
    """True when the last answer's calls include a `write_file` or `edit_file` and every
    result sent back for them succeeded (no result starting with "error")."""
    index = len(messages)
    while index and messages[index - 1].get("role") == "tool":
        index -= 1
    if index == len(messages) or not index:
        return False
    calls = messages[index - 1].get("tool_calls") or ()
    names = {call.get("function", {}).get("name") for call in calls}
    results = [str(m.get("content") or "") for m in messages[index:]]
    return bool(names & set(_CHANGES)) and not any(r.startswith("error") for r in results)


# A clause of the person's request that starts with one of these verbs asks for a change.
_CHANGE_VERBS = frozenset(
    {"add", "append", "change", "copy", "create", "duplicate", "edit", "fix", "insert", "make"}
    | {"modify", "put", "rename", "replace", "save", "set", "store", "swap", "switch", "turn"}
    | {"update", "write"}
)
# Words that may come before the verb at a clause's start ("please", "in notes.txt,").
_LEADING = frozenset({"please", "now", "also", "just", "then", "and", "so"})
_CLAUSE_SPLIT = re.compile(r"[.;:!?,]+(?=\s|$)|\n|\b(?:and|then)\b", re.IGNORECASE)


def asks_for_change(request: str) -> bool:
    """True when a clause of `request` (split at punctuation before a space, at "and"
    and "then") is an imperative whose verb makes or changes a file ("create",
    "edit", "copy ... into", "set", ...), after a leading "please"/"now" and a
    leading "in <file>". English only; "tell me the value set there" is no such
    clause (the verb must lead it)."""
    for clause in _CLAUSE_SPLIT.split(request):
        words = [w.lower() for w in clause.split()]
        while words and words[0] in _LEADING:
            words.pop(0)
        if len(words) > 2 and words[0] == "in":
            words = words[2:]
        if words and words[0].strip("'\"") in _CHANGE_VERBS:
            return True
    return False


# A path in a request: no spaces, a name with a letter-led extension ("notes/todo.txt").
_NAMED_PATH_RE = re.compile(r"(?<![\w@./-])(?:[\w-]+/)*[\w-]+\.[A-Za-z]\w*(?![\w/-])")


def paths_named(
    messages: list[dict[str, Any]], workspace: Workspace
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The relative paths the person's last message names (`name.ext`, optionally in
    folders; no `..`, none under a dot-folder), in the order named: those that are
    neither a file nor a folder of `workspace`, and the files of `workspace`."""
    request = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    new: list[str] = []
    existing: list[str] = []
    for path in _NAMED_PATH_RE.findall(person_text(request)):
        if any(part.startswith(".") for part in path.split("/")):
            continue
        if path in workspace.files:
            existing.append(path)
        elif path not in workspace.folders:
            new.append(path)
    return tuple(dict.fromkeys(new)), tuple(dict.fromkeys(existing))


def change_pending(messages: list[dict[str, Any]]) -> bool:
    """True when the person's last message asks for a change (`asks_for_change`) and no
    `write_file` or `edit_file` call since it has succeeded (a result not starting
    with "error")."""
    start = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if start is None or not asks_for_change(person_text(messages[start])):
        return False
    changes = {
        call.get("id")
        for message in messages[start:]
        for call in message.get("tool_calls") or ()
        if (call.get("function") or {}).get("name") in _CHANGES
    }
    return not any(
        m.get("role") == "tool"
        and m.get("tool_call_id") in changes
        and not str(m.get("content") or "").startswith("error")
        for m in messages[start:]
    )


def tool_call_grammar(
    tools: list[dict[str, Any]],
    *,
    must_call: bool = False,
    must_answer: bool = False,
    workspace: Workspace | None = None,
) -> str | None:
    """A GBNF grammar for one answer offering `tools` (chat-completions `tools` entries).

    The answer is one `<tool_call>` block (see the module docstring) or, unless
    `must_call`, text whose first character is not `<`; with `must_answer`, only
    such text (a tiny model's turn ends once a change succeeded: it otherwise
    goes on creating files up to its step limit). With `workspace`, the
    paths and edits it names are bounded by what exists (module docstring).
    None when no tool can be expressed (then no grammar should be sent).
    """
    calls = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        if not _offered(function["name"], workspace):
            continue
        arguments = _arguments_rule(function["name"], function.get("parameters") or {}, workspace)
        if arguments is not None:
            head = _literal('{"name": ' + json.dumps(function["name"]) + ', "arguments": ')
            calls.append(f'{head} {arguments} "}}"')
    answer = r"answer ::= [^<\x00] [^\x00]*"
    if workspace is not None and workspace.found:
        answer = f"answer ::= {_one_of_text(workspace.found)} [^\\x00]*"
    if must_answer:
        return f"root ::= answer\n{answer}\n"
    if not calls:
        if workspace is not None and workspace.only:  # that tool cannot be offered: free
            free = replace(workspace, only="", focus=())
            return tool_call_grammar(
                tools, must_call=must_call, must_answer=must_answer, workspace=free
            )
        return None
    root = "root ::= call" if must_call else "root ::= call | answer"
    lines = [
        root,
        f"call ::= {_literal(CALL_OPEN)} ({' | '.join(calls)}) {_literal(CALL_CLOSE)}",
        answer,
    ]
    if workspace is not None and any(" newpath " in call for call in calls):
        lines += _new_path_rules([*workspace.files, *workspace.folders])
    if workspace is not None and any(" around " in call for call in calls):
        lines += _around_rules(workspace)
    if workspace is not None and any(re.search(r"[ (]words[ )]", call) for call in calls):
        more = '(" " words-one)? ' * (FREE_WORDS - 1)
        lines.append(f'words ::= "\\"" words-one {more}"\\""')
        lines.append(f"words-one ::= {_one_inner(workspace.words)}")
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
