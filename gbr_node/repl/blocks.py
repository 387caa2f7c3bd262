"""Streamed markdown cut into finished blocks, pure: text in, blocks out.

The model's answer arrives in pieces of any size. `BlockSplitter` keeps the
block still being written (`pending()`, drawn live under the answer) and
hands out each block once it is complete, to be rendered once and written
to the scrollback for good (GBR-TERM-01):

- a paragraph (and a lone line) is handed out row by row: every row of it
  that can no longer change at the current width, in pieces cut at a word
  boundary where no inline markup (`**`, `*`, backticks, links) is left open,
  so a long paragraph reaches the scrollback while it streams;
- a fenced code block when its closing fence arrives; a heading or a rule at
  the end of its line; a list one top-level item at a time (when the next
  item or the end of the list shows it is complete); a table or a quote when
  it ends (blank line or another kind of block).

Lines keep their breaks: a single newline in the answer is a line break on
screen, as people mean it in chat. `finish()` hands out whatever is left when
the answer ends. Every character fed comes out exactly once, in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gbr_node.textcells import wrap_spans

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
RULE = re.compile(r"^ {0,3}([-*_])( *\1){2,} *$")
ITEM = re.compile(r"^( *)([-*+]|\d{1,9}[.)])( |$)")
TABLE = re.compile(r"^ {0,3}\|")
QUOTE = re.compile(r"^ {0,3}>")
_STARS = re.compile(r"\*(?=\S)|(?<=\S)\*")
_UNDERSCORES = re.compile(r"(?<![A-Za-z0-9])_(?=\S)|(?<=\S)_(?![A-Za-z0-9])")
_OPEN_LINK = re.compile(r"\[[^\]]*$|\]\([^)]*$")
MAX_OPEN_ROWS = 8
"""Rows a paragraph may keep open waiting for its inline markup to close."""


@dataclass(frozen=True)
class Block:
    """A finished piece of the answer.

    `kind`: paragraph, code, heading, rule, list (one top-level item), table
    or quote. `source`: its markdown text, lines joined by newlines. `gap`:
    a blank line stood before it in the answer.
    """

    kind: str
    source: str
    gap: bool = False


class BlockSplitter:
    """Feed the answer's text as it streams; collect finished `Block`s.

    `width` (terminal cells) only decides which rows of a paragraph are
    final; blocks do not depend on it otherwise.
    """

    def __init__(self) -> None:
        self._kind: str | None = None  # kind of the open block
        self._lines: list[str] = []  # its complete lines
        self._partial = ""  # the line being written (no newline yet)
        self._gap = False  # a blank line came before the open block
        self._fence = ""  # the opening fence of an open code block
        self._item_indent = 0  # indentation of the open list's items

    def feed(self, text: str, width: int) -> list[Block]:
        """Take more of the answer; return the blocks it completed, in order."""
        out: list[Block] = []
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            out += self._line(line)
        if self._kind is None and self._partial and self._starts_paragraph(self._partial):
            self._kind = "paragraph"
        if self._kind == "paragraph":
            out += self._paragraph_rows(width)
        return out

    def pending(self) -> str:
        """The source of the block still being written ("" when none)."""
        return "\n".join([*self._lines, self._partial] if self._partial else self._lines)

    def pending_kind(self) -> str | None:
        """Kind of the block still being written, when known."""
        return self._kind

    def finish(self) -> list[Block]:
        """The answer ended: hand out everything still pending."""
        if self._partial:
            out = self._line(self._partial)
            self._partial = ""
        else:
            out = []
        return out + self._close()

    # -- lines -------------------------------------------------------------

    def _line(self, line: str) -> list[Block]:
        kind = self._kind
        if kind == "code":
            self._lines.append(line)
            if _closes(line, self._fence):
                return self._close()
            return []
        if not line.strip():
            out = self._close()
            self._gap = True
            return out
        if kind == "list" and self._continues_list(line):
            indent = _item_indent(line)
            if indent is not None and indent <= self._item_indent:
                out = self._close()  # the previous item is complete
                self._open("list", line)
                return out
            self._lines.append(line)
            return []
        if kind in ("table", "quote") and (TABLE if kind == "table" else QUOTE).match(line):
            self._lines.append(line)
            return []
        if kind == "paragraph" and not starts_block(line):
            self._lines.append(line)
            return []
        out = self._close()
        return out + self._start(line)

    def _start(self, line: str) -> list[Block]:
        fence = FENCE.match(line)
        if fence:
            self._fence = fence.group(1)
            self._open("code", line)
        elif HEADING.match(line) or RULE.match(line):
            self._open("heading" if HEADING.match(line) else "rule", line)
            return self._close()
        elif _item_indent(line) is not None:
            self._item_indent = _item_indent(line) or 0
            self._open("list", line)
        elif TABLE.match(line):
            self._open("table", line)
        elif QUOTE.match(line):
            self._open("quote", line)
        else:
            self._open("paragraph", line)
        return []

    def _open(self, kind: str, line: str) -> None:
        self._kind, self._lines = kind, [line]

    def _close(self) -> list[Block]:
        if self._kind is None or not self._lines:
            self._kind = None
            return []
        block = Block(self._kind, "\n".join(self._lines), self._gap)
        self._kind, self._lines, self._gap = None, [], False
        return [block] if block.source else []

    def _continues_list(self, line: str) -> bool:
        # an item, an indented line (nested list, continuation) or a lazy continuation
        return _item_indent(line) is not None or line.startswith(" ") or not starts_block(line)

    def _starts_paragraph(self, partial: str) -> bool:
        # Text whose first word is written (a list marker, a heading's hashes
        # are followed by a space) and that starts no other kind of block.
        return " " in partial.strip() and not starts_block(partial)

    # -- paragraphs, row by row ----------------------------------------------

    def _paragraph_rows(self, width: int) -> list[Block]:
        """Hand out the rows of the open paragraph that no later text can change."""
        lines = [*self._lines, self._partial]
        source = "\n".join(lines)
        cuts: list[int] = []  # offsets in `source` where a final row ends
        offset = 0
        for number, line in enumerate(lines):
            spans = wrap_spans(line, width)
            last = number == len(lines) - 1
            for _start, end in spans[:-1] if last else spans:
                cuts.append(offset + end)
            offset += len(line) + 1
        forced = len(cuts) > MAX_OPEN_ROWS  # markup left open that long: cut anyway
        for cut in reversed(cuts):
            head = source[:cut]
            if forced or _balanced(head):
                rest = source[cut:]
                rest = rest[1:] if rest.startswith("\n") else rest.lstrip(" ")
                block = Block("paragraph", head, self._gap)
                *self._lines, self._partial = rest.split("\n")
                self._gap = False
                if not self._lines and not self._partial:
                    self._kind = None
                return [block]
        return []


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3
        and stripped.startswith(fence[0] * len(fence))
        and set(stripped) == {fence[0]}
    )


def _item_indent(line: str) -> int | None:
    match = ITEM.match(line)
    return len(match.group(1)) if match else None


def starts_block(line: str) -> bool:
    """True when `line` opens a block other than a paragraph (fence, heading, rule,
    list item, table row, quote)."""
    return bool(
        FENCE.match(line)
        or HEADING.match(line)
        or RULE.match(line)
        or ITEM.match(line)
        or TABLE.match(line)
        or QUOTE.match(line)
    )


def _balanced(text: str) -> bool:
    """No inline markup left open in `text`: code spans, emphasis, links.

    An emphasis mark counts only where it touches a word (`2 * 3` is no
    emphasis, `snake_case` no underscore pair), as CommonMark's flanking rules
    say, roughly.
    """
    if text.count("`") % 2:
        return False
    bare = re.sub(r"`[^`]*`", "", text)
    return not (
        len(_STARS.findall(bare.replace("**", ""))) % 2
        or bare.count("**") % 2
        or len(_UNDERSCORES.findall(bare)) % 2
        or _OPEN_LINK.search(bare)
    )
