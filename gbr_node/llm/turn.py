"""What the person's request fixes for the embedded model's next call, pure (issue 15).

SmolLM2-135M reads a request well enough to pick a tool, not to fill it in:
asked for a file with the text "eggs and bread" it wrote "The text is eggs and
bread. The text is ..." until its token limit; asked to copy a file it wrote
"The quick brown fox is the quick brown fox"; asked to change rainy to sunny it
replaced "today"; asked which file holds TIMEOUT_MS it searched "timeout_ms";
asked what a folder holds it listed it, then read and searched until its step
limit. So the node reads a few plain things from the request's English words
and the turn so far, and `llm.grammar` holds the model to them
(`bound_turn` fills `grammar.Workspace`):

- the text a request spells out for a new file (`spelled_content`): after a
  colon, in quotes, after "says"/"containing": `write_file` writes exactly it;
- a copy (`asks_to_copy`): the text of the files read in the turn, exactly;
- a new file made from a file the request names (not a copy): written only
  after that file is read, holding its text (as read or in capitals) with
  the words the request spells, or else its capitalised words, before it
  (`Workspace.around`, `lead`);
- an edit the request spells out (`edit_named`: "change X to Y", "replace X
  with Y", "from X to Y", "Y instead of X", "set K to V", "should say L"):
  `edit_file` makes exactly it;
- what to search for: a word of the request, as written (`search_words`);
- a question about a folder the request names (`folders_named`): a listing of
  it, then an answer that starts with that listing; a question asking which
  file holds something (`asks_to_find`): a search first, then an answer that
  starts with a line it found;
- a request that names only new files and looks for nothing: the write, at
  once (it listed and searched for a folder that did not exist yet);
- any other text written (`write_file`'s content, `edit_file`'s new_string):
  words of the request and of the files read in the turn (`Workspace.words`).

None of these names a file, word or value of any task: they read English
request shapes. English only, as `grammar.asks_for_change`.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from gbr_node.llm.grammar import (
    Workspace,
    answered,
    asks_for_change,
    change_pending,
    old_strings,
    paths_named,
    person_text,
)

_WORD_RE = re.compile(r"[\w@]+(?:[.\-][\w@]+)*")
_QUOTED_RE = re.compile(r"(?<!\w)(['\"])(.+?)\1(?!\w)")
_AFTER_VERB_RE = re.compile(r"\b(?:says|say|saying|containing)\s+(\S.*?)\s*$", re.IGNORECASE)
_COPY_RE = re.compile(
    r"\b(?:copy|duplicate)\b|\bsame\b|\b(?:its|their)\s+(?:contents?|text|words)\b", re.I
)
_FIND_RE = re.compile(
    r"^\s*(?:please\s+)?(?:find|search|grep|locate|look\s+(?:up|for)|where)\b"
    r"|\b(?:which|what)\s+(?:\w+\s+)?file\b",
    re.IGNORECASE,
)
_FOLDER_RE = re.compile(
    r"\b([\w.\-/]+)\s+(?:folder|directory|dir)\b|\b(?:folder|directory)\s+([\w.\-/]+)",
    re.IGNORECASE,
)
_VALUE = r"['\"]?([\w.\-]*\w)['\"]?"  # a word or value, its quotes and last dot left out
_EDIT_PATTERNS = (
    (re.compile(rf"\bfrom\s+{_VALUE}\s+to\s+{_VALUE}", re.I), False),
    (re.compile(rf"{_VALUE}\s+(?:instead\s+of|rather\s+than)\s+{_VALUE}", re.I), True),
    (
        re.compile(
            r"\b(?:change|replace|turn|switch|swap|rename|update)\s+(?:the\s+(?:word|text|value)\s+)?"
            rf"{_VALUE}\s+(?:to|with|into|by|for)\s+{_VALUE}",
            re.I,
        ),
        False,
    ),
)
_SET_RE = re.compile(rf"\bset\s+(?:the\s+)?{_VALUE}\b.*?\bto\s+{_VALUE}", re.IGNORECASE)
_CAPITALS_RE = re.compile(r"\b(?:capitals?|capital letters|upper ?case|all caps)\b", re.I)
_SHOULD_RE = re.compile(r"\b(?:should|must)\s+(?:say|read|be)\s+(\S.*?)\.?\s*$", re.I)


def request_of(messages: list[dict[str, Any]]) -> str:
    """The text of the person's last message ("" when there is none), without the
    node's library lookup block (`grammar.person_text`)."""
    request = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    return person_text(request)


def spelled_content(request: str) -> str | None:
    """The text `request` spells out for a file: after its last ": ", else the first text in
    quotes that is no file name, else after a last "says"/"containing"; without a
    final full stop. None when it spells none ("Create a.txt with the line: roses
    are red" gives "roses are red")."""
    if ": " in request:
        text = request.rsplit(": ", 1)[1].strip()
    else:
        quoted: list[str] = [q for _, q in _QUOTED_RE.findall(request) if not _is_path(q)]
        if quoted:
            return quoted[0]
        match = _AFTER_VERB_RE.search(request)
        if match is None:
            return None
        text = match.group(1)
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1]
    return text or None


def _is_path(text: str) -> bool:
    return re.fullmatch(r"(?:[\w-]+/)*[\w-]+\.[A-Za-z]\w*", text) is not None


def asks_to_copy(request: str) -> bool:
    """True when `request` asks to copy text: "copy", "the same", "its/their content(s)",
    "its text", "their words"."""
    return _COPY_RE.search(request) is not None


def asks_to_find(request: str) -> bool:
    """True when `request` leads with find/search/grep/locate or asks which (or what)
    file: "Which Python file imports json?"."""
    return _FIND_RE.search(request) is not None


def folders_named(request: str, folders: tuple[str, ...]) -> tuple[str, ...]:
    """The folders of `folders` that `request` names as "the X folder" (or directory, dir)
    or "folder X", in order."""
    found = [a or b for a, b in _FOLDER_RE.findall(request)]
    return tuple(dict.fromkeys(f.strip("/") for f in found if f.strip("/") in folders))


def search_words(request: str) -> tuple[str, ...]:
    """The words of `request`, as written (runs of word characters and `@`, with inner
    `.` or `-`), each once: what `search_text` may look for."""
    return tuple(dict.fromkeys(_WORD_RE.findall(request)))


def edit_named(request: str, text: str) -> tuple[str, str] | None:
    """`(old, new)` of the edit `request` spells out for a file holding `text`, or None.

    Tried in order: "from X to Y", "Y instead of X", "change/replace/turn X
    to/with/into Y" (optionally "the word X"), "set K ... to V" (old: the last
    word of the one line holding K), "should say L" (old: the line that starts
    with L's first word). The old text must occur exactly once in `text` (an
    `old_strings` choice) and differ from the new one.
    """
    pairs: list[tuple[str, str]] = []
    for pattern, swapped in _EDIT_PATTERNS:
        for match in pattern.finditer(request):
            old, new = match.group(2, 1) if swapped else match.group(1, 2)
            pairs.append((old, new))
    for match in _SET_RE.finditer(request):
        lines = [line for line in text.splitlines() if match.group(1) in line]
        words = _WORD_RE.findall(lines[0]) if len(lines) == 1 else []
        if len(words) > 1:
            pairs.append((words[-1], match.group(2)))
    for match in _SHOULD_RE.finditer(request):
        said = match.group(1).strip("'\"")
        head = said.split()[0] if said.split() else ""
        lines = [line for line in text.splitlines() if head and line.startswith(head)]
        if len(lines) == 1:
            pairs.append((lines[0], said))
    allowed = set(old_strings(text))
    return next(((old, new) for old, new in pairs if old in allowed and old != new), None)


def calls_in_turn(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], str]]:
    """`(tool, arguments, result)` of each call since the person's last message, in order
    (arguments `{}` when they are no JSON object; result "" when none came back)."""
    start = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
    results = {
        m.get("tool_call_id"): str(m.get("content") or "")
        for m in messages[start:]
        if m.get("role") == "tool"
    }
    calls = []
    for message in messages[start:]:
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            if not isinstance(arguments, dict):
                arguments = {}
            result = results.get(call.get("id"), "")
            calls.append((str(function.get("name") or ""), arguments, result))
    return calls


def read_in_turn(messages: list[dict[str, Any]]) -> tuple[str, ...]:
    """The paths `read_file` read successfully since the person's last message, in order."""
    paths = [
        arguments.get("path")
        for name, arguments, result in calls_in_turn(messages)
        if name == "read_file" and result and not result.startswith("error")
    ]
    return tuple(dict.fromkeys(p for p in paths if isinstance(p, str)))


_HIT_RE = re.compile(r"^([^\s:][^:\n]*):\d+: ", re.MULTILINE)


def hits_in_turn(messages: list[dict[str, Any]], workspace: Workspace) -> tuple[str, ...]:
    """The lines (`path:line: text`) that `search_text` found since the person's last
    message in files of `workspace` (not in folders it leaves out, such as `.gbr_envs`)."""
    hits = []
    for name, _, result in calls_in_turn(messages):
        if name != "search_text" or result.startswith("error"):
            continue
        for line in result.splitlines():
            match = _HIT_RE.match(line)
            if match and match.group(1) in workspace.files:
                hits.append(line)
    return tuple(dict.fromkeys(hits))


def bound_turn(messages: list[dict[str, Any]], workspace: Workspace) -> Workspace:
    """`workspace` with what the person's last message and the turn so far fix for the next
    call (`Workspace.done`, `named`, `focus`, `content`, `around`, `lead`, `edits`,
    `patterns`, `only`, `found`; the module docstring says how)."""
    request = request_of(messages)
    named, existing = paths_named(messages, workspace)
    pending = change_pending(messages)
    read = read_in_turn(messages)
    texts = [t for t in (workspace.files.get(p) for p in read) if t is not None]
    hits = hits_in_turn(messages, workspace)
    focus = existing if pending else ()
    content: tuple[str, ...] | None = None
    around: tuple[str, ...] = ()
    lead: tuple[str, ...] = ()
    only = ""
    if pending and named:
        if any(p not in read for p in existing):
            content = ()  # a file the request names is read before anything is written
        elif asks_to_copy(request):
            content = ("".join(texts),) if texts else ()
        elif existing:
            capitals = _CAPITALS_RE.search(request) is not None
            around = tuple(t.strip().upper() if capitals else t.strip() for t in texts)
            lead = search_words(spelled_content(request) or "") or capitalised(request)
        else:
            spelled = spelled_content(request)
            content = (spelled,) if spelled else None
        if content or any(around) or not (existing or asks_to_find(request)):
            only = "write_file"  # all it needs is known, or nothing is there to look at
    edits = {}
    for path in existing if pending else ():
        edit = edit_named(request, workspace.files.get(path) or "")
        if edit is not None:
            edits[path] = edit
    found = () if pending else hits
    if not existing and not only and (not pending or content == ()):
        folders = folders_named(request, workspace.folders)
        if folders and not pending:
            only, focus = "list_dir", folders
            found = listings_in_turn(messages, folders)
        elif asks_to_find(request) and not any(
            n == "search_text" for n, _, _ in calls_in_turn(messages)
        ):
            only = "search_text"
        elif asks_to_find(request) and pending and hits and not read:
            only, focus = "read_file", tuple(dict.fromkeys(h.split(":")[0] for h in hits))
    return replace(
        workspace,
        done=answered(messages),
        named=named,
        focus=focus,
        content=content,
        around=tuple(a for a in around if a),
        lead=lead,
        edits=edits,
        patterns=_held_words(request, workspace),
        only=only,
        found=found,
        words=tuple(dict.fromkeys([*search_words(request), *search_words(" ".join(texts))])),
    )


def listings_in_turn(messages: list[dict[str, Any]], folders: tuple[str, ...]) -> tuple[str, ...]:
    """The results of `list_dir` for `folders` since the person's last message."""
    return tuple(
        result
        for name, arguments, result in calls_in_turn(messages)
        if name == "list_dir"
        and arguments.get("path", ".") in folders
        and result
        and not result.startswith("error")
    )


def capitalised(request: str) -> tuple[str, ...]:
    """The words of `request` written with a capital that lead no sentence and name no
    file ("Open a.txt and write Welcome plus ..." gives "Welcome"): words to put in
    a text as they are."""
    words = []
    for match in re.finditer(r"(?<![\w.@/-])([A-Z][\w-]*)(?![\w.@/-])", request):
        before = request[: match.start()].rstrip()
        if before and before[-1] not in ".!?:;":
            words.append(match.group(1))
    return tuple(dict.fromkeys(words))


def _held_words(request: str, workspace: Workspace) -> tuple[str, ...]:
    """The words of `request` (`search_words`) that some text file of `workspace` holds as a
    word, as written; all of them when none does or a file's text is unknown."""
    words = search_words(request)
    texts = list(workspace.files.values())
    if any(text is None for text in texts):
        return words
    held = tuple(
        w for w in words if any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", t or "") for t in texts)
    )
    return held or words


def answer_due(messages: list[dict[str, Any]], workspace: Workspace) -> bool:
    """True when a question (no change asked) has what answers it: every folder it names
    (`folders_named`) was listed in the turn, or it asks which file holds something
    (`asks_to_find`) and a search found lines (`Workspace.found`). Then the model
    answers."""
    request = request_of(messages)
    if asks_for_change(request):
        return False
    folders = folders_named(request, workspace.folders)
    done = answered(messages)
    if folders:
        return all(("list_dir", f) in done for f in folders)
    return asks_to_find(request) and bool(hits_in_turn(messages, workspace))
