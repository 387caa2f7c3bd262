"""Words for the library index, pure: identifiers split for matching, questions
turned into search terms (issue 18, "Ranking"), distribution names normalised.

`open_nursery`, `OpenNursery` and `open nursery` all give the words `open`,
`nursery`; `HTTPStatusError` gives `http`, `status`, `error`. The index stores
split names, and a question is split the same way, so a person never has to
spell an identifier exactly. Words of plain prose that carry no meaning for a
lookup ("how", "do", "the", "take") are dropped from questions, but never from
code-like words (`move_on_after` keeps its `on`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gbr_node.library.mention import candidates

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_TOKEN = re.compile(r"`[^`]+`|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|[0-9]+")

STOPWORDS = frozenset(
    """a an and any are as at be by can could do does doing done for from get gets give
    gives how i if in into is it its me my of on or our should so some that the their them
    then there these this to up us use used uses using want we what when where which while
    who why will with would you your take takes taking accept accepts accepted argument
    arguments param params parameter parameters signature signatures call calls called
    python library package module function functions method methods class classes object
    objects type types thing things way ways work works one two all also has have need
    needs without""".split()  # noqa: SIM905 (a list literal of 120 words reads worse)
)
"""Prose words dropped from questions (kept when part of an identifier)."""

ABBREVIATIONS = {
    "application": "app",
    "argument": "arg",
    "arguments": "args",
    "asynchronous": "async",
    "attribute": "attr",
    "attributes": "attrs",
    "authentication": "auth",
    "authorization": "auth",
    "configuration": "config",
    "configure": "config",
    "connection": "conn",
    "context": "ctx",
    "database": "db",
    "directory": "dir",
    "document": "doc",
    "environment": "env",
    "execute": "exec",
    "generate": "gen",
    "information": "info",
    "initialize": "init",
    "iterate": "iter",
    "maximum": "max",
    "message": "msg",
    "minimum": "min",
    "number": "num",
    "parameter": "param",
    "password": "passwd",
    "previous": "prev",
    "reference": "ref",
    "request": "req",
    "response": "resp",
    "specification": "spec",
    "string": "str",
    "synchronous": "sync",
    "temporary": "temp",
    "utility": "util",
    "value": "val",
}
"""Words of prose and the abbreviation identifiers use for them: a question
says "configuration", the code says `ConfigDict`."""

CODE_CHARS = re.compile(r"[_.]|[a-z][A-Z]")


def split_identifier(text: str) -> list[str]:
    """The lower-case words of an identifier or dotted path, in order.

    `"trio.open_nursery"` -> `["trio", "open", "nursery"]`;
    `"HTTPStatusError"` -> `["http", "status", "error"]`.
    """
    return [part.lower() for part in _CAMEL.findall(text)]


def name_words(name: str) -> str:
    """The text indexed for a name: the name as it is plus its split words."""
    words = split_identifier(name)
    whole = name.lower()
    return " ".join([whole, *words]) if [whole] != words else whole


def is_code_like(word: str, first: bool = False) -> bool:
    """True for a word that reads as an identifier, not prose: it has `_`, `.`,
    an inner capital (`OpenNursery`), was written in backticks, or is
    capitalised (`Field`) though not the first word (`first`) nor all capitals."""
    if word.startswith("`") or CODE_CHARS.search(word):
        return True
    return not first and len(word) > 2 and word[0].isupper() and not word.isupper()


@dataclass(frozen=True)
class Token:
    """One word or identifier of a question; `code` when it reads as code
    (see `is_code_like`). `text` is without backticks."""

    text: str
    code: bool

    def words(self) -> list[str]:
        """Its search words: split, lower-case, prose stopwords and single
        letters dropped (not from code)."""
        return [
            w
            for w in split_identifier(self.text)
            if self.code or (w not in STOPWORDS and (len(w) > 1 or w.isdigit()))
        ]


def tokenize(text: str) -> list[Token]:
    """The words and identifiers of a question, in order (dotted names kept whole)."""
    tokens = []
    for match in _TOKEN.finditer(text):
        raw = match.group()
        first = not text[: match.start()].strip() or text[: match.start()].rstrip()[-1] in ".?!:"
        tokens.append(Token(raw.strip("`").strip(), is_code_like(raw, first)))
    return tokens


_KNOWN_WORDS = frozenset(
    """github gitlab javascript typescript pypi macos ios ipad iphone openai postgresql
    mysql sqlite numpy pytorch youtube oauth graphql nodejs fastapi devops""".split()  # noqa: SIM905 (a word list reads better so)
)
"""Brand names written in mixed case that read as words, not identifiers."""


def named_identifiers(text: str) -> list[str]:
    """The identifiers `text` names as code, as written: backticked names, dotted
    names that are no file names, names with an inner `_` or an inner capital
    (`fetch_json`, `FancyTable`), not plain or capitalised words (`Schema`,
    `GitHub`). What an honest miss is reported for (issue 33)."""
    return [
        c.text
        for c in candidates(text)
        if c.how in ("backtick", "dotted", "code", "call", "import")
        and c.text.lower() not in _KNOWN_WORDS
        and (c.how != "call" or "." in c.text or "_" in c.text or c.text[:1].isupper())
    ]


def terms(tokens: list[Token]) -> list[str]:
    """The distinct search words of `tokens`, in order; a prose word is followed by
    the abbreviation identifiers use for it (ABBREVIATIONS)."""
    words = []
    for token in tokens:
        for word in token.words():
            words.append(word)
            if not token.code and word in ABBREVIATIONS:
                words.append(ABBREVIATIONS[word])
    return list(dict.fromkeys(words))


def split_compound(word: str, vocabulary: set[str]) -> list[str]:
    """A lower-case compound split into two words of `vocabulary`
    (`jsonschema` -> `["json", "schema"]`), or [] when there is no such split.
    Package and module names glue words together; people write them apart."""
    if len(word) < 6 or not word.isalpha():
        return []
    for cut in sorted(range(3, len(word) - 2), key=lambda i: abs(len(word) / 2 - i)):
        if word[:cut] in vocabulary and word[cut:] in vocabulary:
            return [word[:cut], word[cut:]]
    return []


def normalise(name: str) -> str:
    """A distribution name normalised as PEP 503 does (`Foo_Bar.baz` -> `foo-bar-baz`)."""
    out = []
    for ch in name.lower():
        out.append("-" if ch in "-_." else ch)
    text = "".join(out)
    while "--" in text:
        text = text.replace("--", "-")
    return text
