"""A matcher for the GBNF subset `llm.grammar` writes, so tests can ask "is this answer allowed?".

llama.cpp's grammar syntax (grammars/README.md): `name ::= ...` rules,
"literals" (JSON escapes), [character classes] (`^`, ranges, `\\xHH`,
`\\uXXXX`), `( )`, `|`, postfix `* + ?`. The node's grammars are not
recursive, so each is turned into one Python regular expression by inlining
the rules. Test support only.
"""

from __future__ import annotations

import json
import re

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\", "/": "/", "]": "]", "-": "-"}


class Gbnf:
    """`Gbnf(text).matches(answer)`: True when `answer` is a sentence of `text`'s `root`."""

    def __init__(self, text: str | None) -> None:
        assert text is not None, "no grammar"
        self.rules: dict[str, str] = {}
        for line in text.splitlines():
            if "::=" in line:
                name, body = line.split("::=", 1)
                self.rules[name.strip()] = body.strip()
        self._regex = re.compile(self._rule("root", ()), re.DOTALL)

    def matches(self, answer: str) -> bool:
        return self._regex.fullmatch(answer) is not None

    def _rule(self, name: str, stack: tuple[str, ...]) -> str:
        if name in stack:
            raise ValueError(f"recursive rule {name}")
        body, pos = self._alternatives(self.rules[name], 0, (*stack, name))
        assert pos == len(self.rules[name]), f"unparsed rest of {name}"
        return body

    def _alternatives(self, text: str, pos: int, stack: tuple[str, ...]) -> tuple[str, int]:
        branches = []
        while True:
            branch, pos = self._sequence(text, pos, stack)
            branches.append(branch)
            pos = _skip(text, pos)
            if pos < len(text) and text[pos] == "|":
                pos += 1
                continue
            return "(?:" + "|".join(branches) + ")", pos

    def _sequence(self, text: str, pos: int, stack: tuple[str, ...]) -> tuple[str, int]:
        items: list[str] = []
        while True:
            pos = _skip(text, pos)
            if pos >= len(text) or text[pos] in "|)":
                return "".join(items), pos
            char = text[pos]
            if char == '"':
                end = pos + 1
                while text[end] != '"':
                    end += 2 if text[end] == "\\" else 1
                item, pos = re.escape(json.loads(text[pos : end + 1])), end + 1
            elif char == "[":
                item, pos = _char_class(text, pos)
            elif char == "(":
                item, pos = self._alternatives(text, pos + 1, stack)
                assert text[pos] == ")"
                pos += 1
            else:
                match = re.compile(r"[A-Za-z0-9-]+").match(text, pos)
                assert match, f"unexpected {text[pos:]!r}"
                item, pos = "(?:" + self._rule(match.group(), stack) + ")", match.end()
            if pos < len(text) and text[pos] in "*+?":
                item, pos = f"(?:{item}){text[pos]}", pos + 1
            items.append(item)


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] == " ":
        pos += 1
    return pos


def _char_class(text: str, pos: int) -> tuple[str, int]:
    pos += 1
    negate = text[pos] == "^"
    pos += negate
    chars: list[str] = []
    while text[pos] != "]":
        char = text[pos]
        if char == "\\":
            kind = text[pos + 1]
            if kind in "xu":
                width = 2 if kind == "x" else 4
                char, pos = chr(int(text[pos + 2 : pos + 2 + width], 16)), pos + 2 + width
            else:
                char, pos = _ESCAPES[kind], pos + 2
        else:
            pos += 1
        if text[pos] == "-" and text[pos + 1] != "]":
            end, pos = _class_char(text, pos + 1)
            chars.append(f"{re.escape(char)}-{re.escape(end)}")
        else:
            chars.append(re.escape(char))
    return ("[^" if negate else "[") + "".join(chars) + "]", pos + 1


def _class_char(text: str, pos: int) -> tuple[str, int]:
    if text[pos] != "\\":
        return text[pos], pos + 1
    kind = text[pos + 1]
    if kind in "xu":
        width = 2 if kind == "x" else 4
        return chr(int(text[pos + 2 : pos + 2 + width], 16)), pos + 2 + width
    return _ESCAPES[kind], pos + 2
