"""The pure text parts of the terminal: visible control characters, word wrap,
cuts, and streamed markdown cut into blocks (GBR-TERM-01)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from gbr_node.repl.blocks import Block, BlockSplitter
from gbr_node.repl.markdown import render_block
from gbr_node.textcells import cut, plain, visible, wrap, wrap_spans

TEXT = st.text(st.sampled_from(list("ab cd  efghij中文字\n*`_[]()#->|1.")), max_size=300)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J\x1b]0;title\x07", "␛[2J␛]0;title␇"),  # clear screen, retitle: drawn, not done
        ("a\rb", "a␍b"),
        ("tab\there", "tab here"),
        ("c1 \x9b31m", "c1 \\x9b31m"),
        ("del\x7f", "del␡"),
        ("line\nnext", "line\nnext"),
    ],
)
def test_control_characters_are_drawn_as_visible_stand_ins(raw, shown):
    assert visible(raw) == shown


def test_our_own_colour_codes_pass_when_asked_and_nothing_else():
    assert visible("\x1b[33mwarn\x1b[0m \x1b[2J", keep_sgr=True) == "\x1b[33mwarn\x1b[0m ␛[2J"
    assert plain("\x1b[33mwarn\x1b[0m") == "warn"


@given(TEXT.map(lambda t: t.replace("\n", " ")), st.integers(1, 30))
@settings(max_examples=400)
def test_wrap_loses_and_repeats_nothing_and_fits_the_width(line, width):
    spans = wrap_spans(line, width)
    rows = [line[a:b] for a, b in spans]
    assert all(cell_len(row) <= width or len(row) == 1 for row in rows)
    position = 0
    for start, end in spans:  # only spaces between rows
        assert line[position:start].strip(" ") == ""
        position = end
    assert line[position:].strip(" ") == ""
    assert "".join(rows).replace(" ", "") == line.replace(" ", "")


@given(TEXT.map(lambda t: t.replace("\n", " ")), st.integers(2, 30), st.data())
def test_rows_above_the_last_never_change_as_text_is_added(line, width, data):
    cut_at = data.draw(st.integers(0, len(line)))
    before = wrap(line[:cut_at], width)
    assert wrap(line, width)[: len(before) - 1] == before[:-1]


def test_wrap_breaks_at_spaces_and_cuts_only_words_wider_than_a_row():
    assert wrap("word1 word2 word3", 11) == ["word1 word2", "word3"]
    assert wrap("abcdefghij kl", 4) == ["abcd", "efgh", "ij", "kl"]
    assert wrap("中文字 ab", 4) == ["中文", "字", "ab"]


def test_cut_ends_at_a_word_with_an_ellipsis_on_one_line():
    assert cut("read a long path name\nof something", 20) == "read a long path…"
    assert cut("short", 20) == "short"
    assert cut("\x1b[2J", 10) == "␛[2J"


def blocks_of(text: str, width: int, pieces: list[int]) -> list[Block]:
    splitter, out, at = BlockSplitter(), [], 0
    for size in pieces:
        out += splitter.feed(text[at : at + size], width)
        at += size
    out += splitter.feed(text[at:], width)
    return out + splitter.finish()


@given(TEXT, st.integers(4, 60), st.lists(st.integers(1, 9), max_size=80))
@settings(max_examples=400)
def test_every_character_of_a_streamed_answer_comes_out_once_in_order(text, width, pieces):
    """Whatever the chunking: the blocks' text, whitespace aside, is the answer's."""
    blocks = blocks_of(text, width, pieces)
    assert "".join("".join(b.source for b in blocks).split()) == "".join(text.split())


MARKDOWN = """# Title
Some intro text that is long enough to wrap around forty columns easily, yes.

- item one
- item two **bold
  continues** here
  - nested
- item three

```python
def f():
    return 1
```

| a | b |
|---|---|
| 1 | 2 |

> quoted
"""


def test_blocks_are_handed_out_as_they_complete():
    kinds = [(b.kind, b.gap) for b in blocks_of(MARKDOWN, 40, [3] * 200)]
    assert kinds == [
        ("heading", False),
        ("paragraph", False),
        ("paragraph", False),
        ("list", True),
        ("list", False),
        ("list", False),
        ("code", True),
        ("table", True),
        ("quote", True),
    ]


def test_a_long_paragraph_reaches_the_scrollback_row_by_row_while_it_streams():
    splitter = BlockSplitter()
    words = " ".join(f"word{n}" for n in range(40))
    out = splitter.feed(words, 30)
    assert [b.source for b in out] == [wrap(words, 30)[0] + " " + " ".join(wrap(words, 30)[1:-1])]
    assert splitter.pending() == wrap(words, 30)[-1]


def test_a_paragraph_is_not_cut_inside_open_markup():
    splitter = BlockSplitter()
    assert splitter.feed("plain start **bold that runs on for a while and more", 20) == []
    done = splitter.feed(" words** then the rest of it goes on", 20)
    assert done and all(b.source.count("**") % 2 == 0 for b in done)


def test_a_fenced_block_waits_for_its_closing_fence():
    splitter = BlockSplitter()
    assert splitter.feed("```py\nx = 1\ny = 2\n", 40) == []
    assert splitter.pending() == "```py\nx = 1\ny = 2"
    (block,) = splitter.feed("```\n", 40)
    assert block == Block("code", "```py\nx = 1\ny = 2\n```")


def test_a_rendered_block_keeps_its_words_and_a_plain_one_its_text():
    block = Block("paragraph", "Here is **bold** and `code` text")
    coloured = plain("\n".join(render_block(block, 40, color=True)))
    assert coloured.split() == ["Here", "is", "bold", "and", "code", "text"]
    assert render_block(block, 40, color=False) == ["Here is **bold** and `code` text"]
    cut_piece = Block("paragraph", "- 5 is not a list here")  # a row that starts mid-sentence
    assert plain(render_block(cut_piece, 40, color=True)[0]).strip() == "- 5 is not a list here"


def test_rendered_markdown_cannot_carry_terminal_escapes():
    block = Block("paragraph", "evil \x1b[2J\x1b]0;x\x07 text")
    for color in (True, False):
        text = "\n".join(render_block(block, 40, color=color))
        assert not re.search(r"\x1b(?!\[[0-9;]*m)", text)
        assert "␛[2J" in text
