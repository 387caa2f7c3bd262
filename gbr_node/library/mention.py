"""What a person's message may name of the installed libraries, pure (issue 33,
"Precise prelookup").

The node's own lookup before the first answer runs only when a message names
an installed distribution or a public name *as code*. `candidates` reads the
message and gives what could be such a name, each with how it was written:

    import    `import httpx`, `from pydantic import BaseModel` (both names)
    backtick  a name in backticks: `open_nursery`, `httpx`
    call      a name followed by `(`: `open_nursery(`, `Table()`
    dotted    a dotted name that is no file name: `httpx.Client.stream`
    code      an identifier with `_` or an inner capital: `model_validate`, `BaseModel`
    word      a plain word next to a library word (library, package, module, API,
              ...): the `rich` of "the rich library"

Plain words elsewhere are never candidates, so a common English word ("rich",
"regex", "given") or a module that shares its name with a file extension
(dnspython's `txt`) never triggers a lookup; neither does a file name of the
project (`todo.md`, `notes.txt`, `src/app.py`), whose last part is a known file
extension. `index.LibraryIndex.mentions` then keeps the candidates an installed
distribution defines, less the project's own names (`project_names`: its
modules and what its files define): `fetch()` asked of a project whose
`client.py` defines `fetch` names the project's code, not GitPython's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

LIBRARY_WORDS = frozenset(
    """library libraries lib libs package packages module modules api apis sdk
    framework dependency dependencies distribution import imports pip installed""".split()  # noqa: SIM905 (a word list reads better so)
)
"""Words next to which a distribution's plain name counts as naming it."""

NEAR = 2
"""How many words away from a LIBRARY_WORDS word a plain name may stand."""

FILE_EXTENSIONS = frozenset(
    """md markdown txt text rst adoc org py pyi pyc ipynb toml json jsonl yaml yml cfg ini
    conf env csv tsv log lock html htm css scss js mjs cjs ts tsx jsx vue svelte sh bash zsh
    fish bat ps1 c h cc cpp hpp rs go java kt swift rb php pl lua sql db sqlite xml svg png
    jpg jpeg gif webp pdf doc docx xls xlsx ppt zip gz tar tgz bz2 xz whl egg out err bak
    tmp old orig patch diff""".split()  # noqa: SIM905 (a word list reads better so)
)
"""The last parts that make a dotted word a file name (`notes.txt`), not code."""

_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_IMPORT = re.compile(
    rf"\bfrom\s+({_NAME})\s+import\s+((?:{_NAME}(?:\s*,\s*)?)+)|\bimport\s+({_NAME})"
)
_BACKTICK = re.compile(r"`([^`\s]{1,200})`")
_WORD = re.compile(rf"(?<![\w/\\.-]){_NAME}(?![\w/\\-]|\.[A-Za-z_])")
_PATHLIKE = re.compile(r"[\w.-]*[/\\][\w./\\-]*")
_INNER_CAPITAL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_DEFINED = re.compile(
    r"^[ \t]*(?:(?:export[ \t]+)?(?:async[ \t]+)?(?:def|class|function|fn|func)[ \t]+"
    r"([A-Za-z_][A-Za-z0-9_]*)|([A-Za-z_][A-Za-z0-9_]*)[ \t]*(?::[^=\n]*)?=(?!=))",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Candidate:
    """A name the message may mean as code: `text` as written (no backticks),
    `how` one of import, backtick, call, dotted, code, word."""

    text: str
    how: str

    @property
    def explicit(self) -> bool:
        """True when written so that it can only mean a package or its API (an
        import, backticks, a dotted path or next to a library word)."""
        return self.how in ("import", "backtick", "dotted", "word")


def is_file_name(word: str) -> bool:
    """True for `todo.md`, `notes.txt`, `setup.cfg`: a dotted word whose last
    part is a file extension (FILE_EXTENSIONS)."""
    head, dot, last = word.rpartition(".")
    return bool(dot and head) and last.lower() in FILE_EXTENSIONS


def is_code_name(word: str) -> bool:
    """True for an identifier that reads as code on its own: it has `_` inside
    (`open_nursery`, not a lone `_`) or an inner capital (`BaseModel`, `HTTPError`)."""
    bare = word.strip("_")
    return "_" in bare or bool(_INNER_CAPITAL.search(bare))


def candidates(text: str) -> list[Candidate]:
    """The names `text` may mean as code, in order of appearance, each once
    (the first, most explicit way it was written wins)."""
    found: list[Candidate] = []
    for match in _IMPORT.finditer(text):
        if match.group(3):
            found.append(Candidate(match.group(3), "import"))
        else:
            found.append(Candidate(match.group(1), "import"))
            for name in re.split(r"\s*,\s*", match.group(2).strip()):
                if name:
                    found.append(Candidate(f"{match.group(1)}.{name}", "import"))
    for match in _BACKTICK.finditer(text):
        inner = match.group(1).strip().removesuffix("()")
        inner = re.sub(r"\(.*$", "", inner)
        if re.fullmatch(_NAME, inner) and not is_file_name(inner):
            found.append(Candidate(inner, "backtick"))
    bare = _BACKTICK.sub(" ", text)
    bare = _PATHLIKE.sub(" ", bare)  # paths: never code (`src/app.py`, `docs/api.md`)
    words = [(m.group(), m.start(), m.end()) for m in _WORD.finditer(bare)]
    lowered = [w.lower() for w, _, _ in words]
    for n, (word, _start, end) in enumerate(words):
        if is_file_name(word):
            continue
        if bare[end : end + 1] == "(":
            found.append(Candidate(word, "call"))
        elif "." in word:
            found.append(Candidate(word, "dotted"))
        elif is_code_name(word):
            found.append(Candidate(word, "code"))
        elif lowered[n] not in LIBRARY_WORDS and any(
            w in LIBRARY_WORDS for w in lowered[max(0, n - NEAR) : n + NEAR + 1]
        ):
            found.append(Candidate(word, "word"))
    seen: set[str] = set()
    out = []
    for candidate in found:
        if candidate.text not in seen:
            seen.add(candidate.text)
            out.append(candidate)
    return out


def project_names(files: Mapping[str, str | None]) -> frozenset[str]:
    """The names a project's own code gives (`files`: root-relative path to text, None
    when unknown, as `tools.workspace.workspace_view` returns them): each file's module
    name (`client` of `src/client.py`) and what a line of its text defines (`def`,
    `class`, `function`, `fn`, `func`, or an assignment at the line's start). Files of
    an installed environment inside the project (under a `site-packages` folder, or a
    folder holding a `*.dist-info`: a `venv/` or a `[library]` site) are the
    libraries', not the project's."""
    sites = {
        path.rpartition(".dist-info/")[0].rpartition("/")[0]
        for path in files
        if ".dist-info/" in path
    }
    names: set[str] = set()
    for path, text in files.items():
        parts = path.split("/")
        if "site-packages" in parts or any(
            path.startswith(f"{site}/") or not site for site in sites
        ):
            continue
        stem = path.rpartition("/")[2].partition(".")[0]
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", stem):
            names.add(stem)
        for match in _DEFINED.finditer(text or ""):
            names.add(match.group(1) or match.group(2))
    return frozenset(names)
