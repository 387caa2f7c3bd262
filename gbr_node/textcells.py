"""Text for a terminal, pure: control characters made visible, word wrap by cells, cuts.

Whatever a model, a peer or a file supplies is drawn through `visible` before
it reaches the terminal, so it can never move the cursor, clear the screen or
retitle the window (GBR-TERM-01): a C0/C1 control character becomes its
Unicode control picture (`␛` for ESC) and only the SGR colour sequences that
our own code writes (`\\x1b[...m`) pass when `keep_sgr` is set. Bidi controls and
zero-width characters, which make text read otherwise than it runs (Trojan
Source, CVE-2021-42574), are shown as `<U+202E>` marks (GBR-PRIV-01). Widths are
terminal cells (`rich.cells.cell_len`: a CJK character or an emoji takes two).
"""

from __future__ import annotations

import re

from rich.cells import cell_len

DIM, RED, YELLOW, GREEN, CYAN, RESET = (
    "\x1b[2m",
    "\x1b[31m",
    "\x1b[33m",
    "\x1b[32m",
    "\x1b[36m",
    "\x1b[0m",
)
"""Our own SGR colour codes (the only escapes `visible(keep_sgr=True)` lets pass);
every service's notices use them, the REPL draws them (`repl.render`)."""
SGR = re.compile(r"\x1b\[[0-9;]*m")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
HIDDEN = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
"""Bidi controls and zero-width characters: shown as `<U+XXXX>` by `visible`."""
_WORDS = re.compile(r"\S+|\s+")
TAB_SIZE = 4


def _mark(match: re.Match[str]) -> str:
    return f"<U+{ord(match.group()):04X}>"


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x7F:
        return "␡"
    if code < 0x20:
        return chr(0x2400 + code)
    return f"\\x{code:02x}"


def visible(text: str, *, keep_sgr: bool = False) -> str:
    """`text` with every control character but newline shown as a visible
    stand-in, bidi and zero-width characters as `<U+XXXX>` marks, and tabs
    expanded to `TAB_SIZE` columns; with `keep_sgr`, SGR colour sequences
    (`ESC [ ... m`) are kept as they are."""
    text = HIDDEN.sub(_mark, text.replace("\r\n", "\n")).expandtabs(TAB_SIZE)
    if not keep_sgr:
        return _CONTROL.sub(_picture, text)
    parts = []
    last = 0
    for match in SGR.finditer(text):
        parts.append(_CONTROL.sub(_picture, text[last : match.start()]))
        parts.append(match.group())
        last = match.end()
    parts.append(_CONTROL.sub(_picture, text[last:]))
    return "".join(parts)


def one_line(text: str, limit: int = 300) -> str:
    """Text from elsewhere (a peer, a model, a file) for one line of a notice: `visible`,
    with newlines shown as `␤` so it can never start a line of its own, cut to `limit`
    characters with `…` (GBR-PRIV-01)."""
    shown = visible(text).replace("\n", "\u2424")
    return shown if len(shown) <= limit else shown[: limit - 1] + "\u2026"


def plain(text: str) -> str:
    """`text` without SGR colour sequences."""
    return SGR.sub("", text)


_STYLED = re.compile(r"((?:\x1b\[[0-9;]*m)*)(.*?)((?:\x1b\[[0-9;]*m)*)", re.DOTALL)


def wrap_styled(line: str, width: int) -> list[str]:
    """`wrap` for a line of our own that may carry SGR colours: a line styled as a whole
    (colours only at its start and end) keeps them on every row; one with colours inside
    is wrapped plain. Widths count the text only (issue 34: no word cut at a wrap)."""
    bare = plain(line)
    if cell_len(bare) <= width:
        return [line]
    head, inner, tail = _STYLED.fullmatch(line).groups()  # type: ignore[union-attr]
    if SGR.search(inner):
        return wrap(bare, width)
    return [f"{head}{row}{tail}" for row in wrap(inner, width)]


def wrap(line: str, width: int) -> list[str]:
    """Greedy word wrap of one line (no newline in it) to rows of at most
    `width` cells; returns at least one row. See `wrap_spans`."""
    return [line[start:end] for start, end in wrap_spans(line, width)]


def wrap_spans(line: str, width: int) -> list[tuple[int, int]]:
    """Where each row of `line` wrapped to `width` cells starts and ends in it.

    Breaks go at runs of spaces, which the break consumes; a word wider than
    a row is cut into row-wide pieces; leading spaces stay on the first row.
    The rows plus the spaces between them are exactly `line`: no character is
    lost or repeated (GBR-TERM-01).
    """
    width = max(1, width)
    if cell_len(line) <= width:
        return [(0, len(line))]
    spans: list[tuple[int, int]] = []
    start, end, used = 0, 0, 0  # the row so far is line[start:end], `used` cells
    for match in _WORDS.finditer(line):
        token, at = match.group(), match.start()
        size = cell_len(token)
        if token.isspace():
            if end > start and used + size > width:
                spans.append((start, end))
                start = end = match.end()
                used = 0
            elif end > start or not spans:
                used += size  # spaces inside a row, or leading spaces of the first row
            else:
                start = end = match.end()  # spaces right after a break are consumed
            continue
        row_has_text = line[start:at].strip() != ""
        if used + size > width:
            if row_has_text:
                spans.append((start, _rstrip(line, start, at)))
            start, used = at, 0  # (indentation that leaves no room for the word goes too)
        while used + cell_len(line[at : match.end()]) > width:
            cut_at = at + len(_split_cells(line[at : match.end()], width - used)[0])
            spans.append((start, cut_at))
            start = at = cut_at
            used = 0
        used += cell_len(line[at : match.end()])
        end = match.end()
    spans.append((start, max(end, start)))
    return spans


def _rstrip(line: str, start: int, end: int) -> int:
    while end > start and line[end - 1] == " ":
        end -= 1
    return end


def _split_cells(text: str, cells: int) -> tuple[str, str]:
    """`text` cut after at most `cells` cells (at least one character)."""
    used = 0
    for n, char in enumerate(text):
        used += cell_len(char)
        if used > cells:
            return text[: max(n, 1)], text[max(n, 1) :]
    return text, ""


def cut(text: str, width: int) -> str:
    """`text` on one line of at most `width` cells: newlines shown as `⏎`, and a
    longer text cut at the last word boundary that fits, ending in `…`."""
    text = visible(text).replace("\n", "⏎")
    if cell_len(text) <= width:
        return text
    head, _ = _split_cells(text, max(1, width - 1))
    space = head.rfind(" ")
    if space >= len(head) // 2:
        head = head[:space]
    return head.rstrip() + "…"
