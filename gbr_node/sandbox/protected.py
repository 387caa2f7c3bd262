"""Protected-file matching (UBQ-AI-02, EVD-AI-01): pure, no filesystem calls.

Patterns are the profile's `protected_files`: globs relative to the allowed
root, written with `/` (WINDOWS also takes `\\`). They are anchored at the
root: `*.lock` protects `poetry.lock`, not `sub/poetry.lock`; write
`**/*.lock` for any depth.

    *      any run of characters inside one name (dot files included)
    ?      one character inside one name
    [abc]  one of the characters (`[!abc]` for none of them)
    **     as a whole name: zero or more names (`a/**/b`, `**/x`, `a/**`)

A pattern protects what it matches and everything below it: `secrets`
protects `secrets/key.pem`. `.gbr_envs` and `.git` and all below them are
protected whatever the profile says (DESIGN.md, security model). Matching
is on the normalised root-relative POSIX path and goes through the
flavour's key, so `PYPROJECT.TOML` is `pyproject.toml` on a case-insensitive
flavour. The root itself (".") is never a protected file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gbr_node.sandbox.flavours import Flavour, WindowsFlavour

# .gbr/ holds the node's own state (approval log, session journals): the agent must
# not forge approvals or rewrite its history, any more than its rules or git hooks.
ALWAYS_PROTECTED = (".gbr_envs", ".gbr_envs/**", ".git", ".git/**", ".gbr", ".gbr/**")


def glob_to_regex(pattern: str) -> str:
    """Regex source (no anchors) for a root-relative glob `pattern`.

    Raises ValueError for an empty pattern or one containing a ".." name.
    """
    names = [n for n in pattern.split("/") if n not in ("", ".")]
    if not names:
        raise ValueError(f"empty protected pattern {pattern!r}")
    if ".." in names:
        raise ValueError(f"protected pattern may not contain '..': {pattern!r}")
    out = []
    for index, name in enumerate(names):
        last = index == len(names) - 1
        if name == "**":
            if not last:
                out.append("(?:[^/]+/)*")
            elif out:
                out[-1] = out[-1][:-1] + "(?:/.*)?"
            else:
                out.append(".*")
        else:
            out.append(_name_to_regex(name) + ("" if last else "/"))
    return "".join(out)


def _name_to_regex(name: str) -> str:
    """Regex for the glob of one name: `*`, `?`, `[...]`, never crossing `/`."""
    out = []
    i = 0
    while i < len(name):
        char = name[i]
        i += 1
        if char == "*":
            while i < len(name) and name[i] == "*":
                i += 1
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and _class_end(name, i) != -1:
            end = _class_end(name, i)
            body = name[i:end]
            negate = body.startswith("!")
            body = re.escape(body[1:] if negate else body).replace("\\-", "-")
            out.append(f"[{'^/' if negate else ''}{body}]")
            i = end + 1
        else:
            out.append(re.escape(char))
    return "".join(out)


def _class_end(name: str, start: int) -> int:
    """Index of the `]` closing a class whose body starts at `start`, or -1."""
    at = start + (name[start : start + 1] == "!")
    at += name[at : at + 1] == "]"
    return name.find("]", at)


class ProtectedMatcher:
    """Tells whether a root-relative path is protected, under one flavour's rules.

    `patterns` are the profile's globs; ALWAYS_PROTECTED is added. Raises
    ValueError (naming the pattern) for a pattern `glob_to_regex` refuses.
    """

    def __init__(self, patterns: Iterable[str], flavour: Flavour) -> None:
        self.flavour = flavour
        self.patterns = tuple(dict.fromkeys([*ALWAYS_PROTECTED, *patterns]))
        windows = isinstance(flavour, WindowsFlavour)
        sources = []
        for pattern in self.patterns:
            text = pattern.replace("\\", "/") if windows else pattern
            sources.append(glob_to_regex(flavour.key(text)))
        self._regex = re.compile(f"(?:{'|'.join(sources)})(?:/.*)?", re.DOTALL)

    def depth(self) -> int | None:
        """How many names deep a protected entry can be, or None when a `**` makes
        it any depth. A trailing `**` adds nothing: a match protects all below."""
        deepest = 1
        for pattern in self.patterns:
            names = [n for n in pattern.replace("\\", "/").split("/") if n not in ("", ".")]
            while names and names[-1] == "**":
                names.pop()
            if "**" in names:
                return None
            deepest = max(deepest, len(names))
        return deepest

    def matches(self, relative: str) -> bool:
        """True if `relative` (POSIX form, no "." or ".." names) is protected."""
        if relative == ".":
            return False
        return self._regex.fullmatch(self.flavour.key(relative)) is not None
