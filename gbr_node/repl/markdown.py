"""A finished block of the answer drawn as terminal lines, pure: rich markdown, or plain text.

With colour, a block is rendered by rich (headings, emphasis, lists, tables,
code highlighted by Pygments) at the terminal's width. Without colour
(`NO_COLOR`, `TERM=dumb`) the block's text is shown as the model wrote it,
word-wrapped. Either way the model's text passes through
`textcells.visible` first: it cannot move the cursor or clear the screen.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from gbr_node.repl.blocks import Block, starts_block
from gbr_node.textcells import visible, wrap

if TYPE_CHECKING:  # rich is imported on the first coloured block
    from rich.console import Console

CODE_THEME = "monokai"


def render_block(block: Block, width: int, *, color: bool) -> list[str]:
    """`block` as lines of at most `width` cells (ANSI SGR codes when `color`)."""
    source = visible(block.source)
    if not color:
        return [row for line in source.split("\n") for row in wrap(line, width)]
    from rich.markdown import Markdown

    if block.kind == "paragraph":
        source = _escape_start(source)
    if block.kind in ("paragraph", "list", "quote"):
        source = source.replace("\n", "  \n")  # a newline in chat is a line break
    console = _console(width)
    with console.capture() as captured:  # rendered in memory; the console writes nowhere
        console.print(Markdown(source, code_theme=CODE_THEME), end="")
    lines = [line.rstrip(" ") for line in captured.get().split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


@lru_cache(maxsize=8)
def _console(width: int) -> Console:
    from rich.console import Console

    return Console(width=width, force_terminal=True, color_system="256", legacy_windows=False)


def _escape_start(source: str) -> str:
    """A paragraph piece that starts mid-sentence with `- `, `# `, `1. `, `>` or
    the like is text, not a new block: escape its first mark."""
    if not starts_block(source.split("\n", 1)[0]):
        return source
    lead = len(source) - len(source.lstrip(" "))
    at = lead
    while at < len(source) and source[at].isdigit():
        at += 1
    return source[:at] + "\\" + source[at:]
