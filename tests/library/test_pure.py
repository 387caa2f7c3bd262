"""The pure parts of the library lookup: words, extraction, re-exports, ranking
plans and presentation (issue 18)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gbr_node.library.exports import public_paths
from gbr_node.library.extract import first_paragraph, parse_module
from gbr_node.library.hit import Hit
from gbr_node.library.present import context_block, hit_line, status_line
from gbr_node.library.rank import plan_query
from gbr_node.library.words import split_compound, split_identifier, tokenize


@pytest.mark.parametrize(
    ("identifier", "words"),
    [
        ("open_nursery", ["open", "nursery"]),
        ("OpenNursery", ["open", "nursery"]),
        ("HTTPStatusError", ["http", "status", "error"]),
        ("trio.to_thread.run_sync", ["trio", "to", "thread", "run", "sync"]),
        ("model_dump_json", ["model", "dump", "json"]),
        ("utf8Decoder2", ["utf", "8", "decoder", "2"]),
    ],
)
def test_identifiers_split_into_their_words(identifier, words):
    assert split_identifier(identifier) == words


def test_compound_names_split_on_known_words_only():
    vocabulary = {"json", "schema", "sorted", "containers"}
    assert split_compound("jsonschema", vocabulary) == ["json", "schema"]
    assert split_compound("sortedcontainers", vocabulary) == ["sorted", "containers"]
    assert split_compound("pydantic", vocabulary) == []


def test_code_words_keep_their_stopwords_and_prose_loses_them():
    tokens = tokenize("What does trio.move_on_after take in `Field`?")
    assert [(t.text, t.code) for t in tokens] == [
        ("What", False),
        ("does", False),
        ("trio.move_on_after", True),
        ("take", False),
        ("in", False),
        ("Field", True),
    ]
    assert [w for t in tokens for w in t.words()] == ["trio", "move", "on", "after", "field"]


def test_a_plan_names_the_package_and_keeps_the_identifier():
    names = {"trio": "trio", "httpx": "httpx", "prompt_toolkit": "prompt-toolkit"}
    plan = plan_query("what does trio.move_on_after take", names)
    assert plan.packages == ("trio",)
    assert plan.identifiers == ("trio.move_on_after",)
    assert plan.expression == '("move" OR "move"*) OR ("on") OR ("after" OR "after"*)'.replace(
        '("on")', '"on"'
    )
    prose = plan_query("which httpx class configures timeouts", names)
    assert (prose.packages, prose.wants, prose.expression) == (
        ("httpx",),
        "class",
        '"configures" OR "timeouts"',
    )
    assert plan_query("which exception does prompt_toolkit raise", names).wants == "exception"
    assert plan_query("nurs", {}).expression == '("nurs" OR "nurs"*)'  # a partial name
    assert plan_query("the configuration", {}).expression == '"configuration" OR "config"'


SOURCE = '''
"""A module.

More about it."""
import os
from typing import TYPE_CHECKING
from ._impl import helper as helper, other
from . import sub
__all__ = ["Widget", "make"]
__all__ += ["helper"]
if TYPE_CHECKING:
    from ._types import Alias
try:
    from ._speedups import fast
except ImportError:
    def fast(x): ...
if __name__ == "__main__":
    demo = 1

MAX_SIZE: int = 10
"""Largest size, in bytes."""

class Widget(Base, metaclass=Meta):
    """!!! note "Docs"
        [link](x.md)

    A widget.

    Long text."""
    colour: str = "red"
    NAMES = ("a",)
    internal = 3

    def __init__(self, name: str, *, size: int = 1) -> None: ...
    @property
    def area(self) -> float: ...
    @area.setter
    def area(self, value): ...
    @staticmethod
    def build(spec): ...
    async def run(self, n=2): ...
    def __repr__(self): ...

def make(*args, **kw) -> "Widget":
    """Make one."""
'''


def test_a_module_gives_its_definitions_imports_and_all():
    info = parse_module(SOURCE, "pkg.mod")
    got = {d.local: (d.kind, d.signature, d.doc) for d in info.definitions}
    assert got[""] == ("module", "", "A module.")
    assert got["MAX_SIZE"] == ("constant", ": int", "Largest size, in bytes.")
    assert got["Widget"] == ("class", "(name: str, *, size: int=1) -> None", "A widget.")
    assert got["Widget.colour"] == ("attribute", ": str", "")
    assert got["Widget.NAMES"][0] == "attribute"
    assert got["Widget.area"] == ("property", ": float", "")
    assert got["Widget.build"] == ("method", "(spec)", "")
    assert got["Widget.run"] == ("method", "(n=2)", "")
    assert got["make"] == ("function", "(*args, **kw) -> 'Widget'", "Make one.")
    assert got["fast"][0] == "function"  # the fallback of an optional speed-up
    assert "Widget.internal" not in got and "Widget.__repr__" not in got and "demo" not in got
    assert next(d for d in info.definitions if d.local == "Widget").bases == "Base"
    assert info.all_names == ["Widget", "make", "helper"]
    assert info.imports["helper"] == ("pkg._impl", "helper") and "helper" in info.explicit
    assert info.imports["Alias"] == ("pkg._types", "Alias")
    assert info.imports["sub"] == ("pkg", "sub")


def test_a_computed_all_counts_as_unknown():
    info = parse_module("from .a import *\n__all__ = a.__all__ + ['x']\n", "p", is_package=True)
    assert info.all_names is None and info.stars == ["p.a"]


@given(st.text(max_size=300))
def test_any_text_parses_or_raises_syntax_error_or_value_error(text):
    with contextlib.suppress(SyntaxError, ValueError):
        parse_module(text, "m")


def test_first_paragraph_skips_markup_and_joins_lines():
    assert first_paragraph('!!! abstract "Usage"\n    [x](y)\n\nFirst\nline.\n\nSecond.') == (
        "First line."
    )
    assert first_paragraph(".. versionadded:: 2\n\nReal text.") == "Real text."
    assert first_paragraph(None) == ""


def _modules(files: dict[str, str]):
    out = {}
    for name, text in files.items():
        is_package = name.endswith(".__init__")
        module = name.removesuffix(".__init__")
        out[module] = parse_module(text, module, is_package=is_package)
    return out


def test_public_paths_follow_stars_aliases_and_all_and_prefer_the_shortest():
    paths = public_paths(
        _modules(
            {
                "pkg.__init__": "from ._core import *\nfrom .sub import Thing as Thing\n",
                "pkg._core": "__all__ = ['open_thing']\ndef open_thing(): ...\ndef hidden(): ...\n",
                "pkg.sub.__init__": "from pkg.sub._impl import Thing\n",
                "pkg.sub._impl": "class Thing: ...\n",
                "pkg.plain": "from pkg._core import hidden\n",  # a plain import is no re-export
            }
        )
    )
    assert paths[("pkg._core", "open_thing")] == ["pkg.open_thing", "pkg._core.open_thing"]
    assert paths[("pkg.sub._impl", "Thing")][:2] == ["pkg.Thing", "pkg.sub.Thing"]
    assert paths[("pkg._core", "hidden")] == ["pkg._core.hidden"]


def test_public_paths_end_on_import_cycles():
    paths = public_paths(
        _modules(
            {
                "c.__init__": "from c.a import *\nfrom c.a import x as y\n",
                "c.a": "from c import *\nfrom c.b import *\nfrom c import y as x\n",
                "c.b": "from c.a import *\ndef real(): ...\n",
            }
        )
    )
    assert paths[("c.b", "real")][0] == "c.real"


def _hit(name: str, dist: str = "httpx", doc: str = "Does a thing.") -> Hit:
    return Hit(
        1, name, "class", "(a, b=1)", "Base", doc, "httpx/_m.py", "/s", 12, 20, dist, "0.28.1"
    )


def test_a_hit_reads_as_one_line_and_the_context_stays_within_its_budget():
    assert hit_line(_hit("httpx.Thing")) == (
        "class httpx.Thing(a, b=1) [bases: Base]  httpx/_m.py:12  httpx==0.28.1"
    )
    hits = [_hit(f"httpx.Thing{n}", doc="x" * 300) for n in range(40)]
    block, kept = context_block(hits, 500)
    assert len(block) <= 500 * 4 and 0 < len(kept) < 40
    assert block.startswith("[Library lookup") and block.endswith("[End of library lookup.]")
    assert status_line(kept) == f"library: {len(kept)} hits in httpx==0.28.1"
    assert status_line(kept[:1] + [_hit("trio.x", "trio")]) == (
        "library: 2 hits in httpx==0.28.1, trio==0.28.1"
    )
    assert context_block(hits, 10) == ("", [])
