"""The lexical path policy (UBQ-AI-01, UBQ-DEV-01, UNW-DEV-01): pure, no filesystem calls.

`PathPolicy(root, flavour).relative_parts(path)` turns a path string from the
model or a peer into the names of a path below `root`, or raises
`SecurityViolation(reason, subject)`. It runs before any filesystem call, so
a refused path never reaches the OS (UNW-DEV-01). The I/O layer joins the
names onto the real root and resolves symlinks afterwards (`sandbox.py`).

Rules, in order:

1. Refused outright: non-strings, the empty string, NUL bytes, lone
   surrogates (not valid Unicode), a path longer than the flavour's limit.
2. The flavour splits the string into an anchor and names and refuses its
   own bad spellings (Windows prefixes, devices, streams, ...).
3. An absolute path must start with the root's names, compared one by one
   through the flavour's key (case folding, Unicode form), never as a string
   prefix: root `/srv/app` does not admit `/srv/app-evil`. Only "" and "."
   are skipped inside that prefix; a ".." there counts as leaving the root.
4. Below the root, "" and "." are dropped and ".." removes the previous name;
   a ".." with nothing left to remove climbs above the root and is refused,
   even if later names would come back in (`../app/x`). ".." is thus taken
   lexically, as Windows does, never through a symlink as a POSIX kernel does.
5. Each remaining name passes the flavour's name check, and root plus names
   must fit the flavour's path limit.
"""

from __future__ import annotations

from gbr_node.errors import SecurityViolation
from gbr_node.sandbox.flavours import Flavour

CLIMBS_ABOVE_ROOT = "'..' climbs above the allowed root"
OUTSIDE_ROOT = "absolute path outside the allowed root"


class PathPolicy:
    """Lexical containment of path strings in one root, for one flavour. Pure.

    `root` is an absolute path in the flavour's spelling (for WINDOWS, a
    drive-less `/srv/app` root is taken as rooted on the current drive).
    Raises ValueError if `root` is not absolute in that flavour.
    """

    def __init__(self, root: str, flavour: Flavour) -> None:
        anchor, names = flavour.split(root)
        if anchor is None:
            raise ValueError(f"root must be an absolute path, got {root!r}")
        self.root = root
        self.flavour = flavour
        self._root_keys = (flavour.key(anchor),) + tuple(
            flavour.key(n) for n in names if n not in ("", ".")
        )
        self._root_length = flavour.length(root)

    def relative_parts(self, path: str) -> tuple[str, ...]:
        """Names of `path` below the root, as spelt in `path`; () for the root itself.

        `path` is relative to the root or absolute inside it. Raises
        SecurityViolation(reason, path) for every rule in the module doc.
        """
        flavour = self.flavour
        if not isinstance(path, str):
            raise SecurityViolation("path must be a string", repr(path))
        if not path:
            raise SecurityViolation("empty path", path)
        if "\x00" in path:
            raise SecurityViolation("NUL byte in path", path)
        try:
            length = flavour.length(path)
        except UnicodeEncodeError:
            raise SecurityViolation("path is not valid Unicode", path) from None
        if length > flavour.max_path:
            raise SecurityViolation(
                f"path longer than {flavour.max_path} {flavour.length_unit}", path
            )
        anchor, names = flavour.split(path)
        if anchor is not None:
            names = self._strip_root(anchor, names, path)
        kept: list[str] = []
        for name in names:
            if name == "" or name == ".":
                continue
            if name == "..":
                if not kept:
                    raise SecurityViolation(CLIMBS_ABOVE_ROOT, path)
                kept.pop()
                continue
            flavour.check_name(name, path)
            kept.append(name)
        if self._root_length + length + 1 > flavour.max_path:
            total = self._root_length + sum(flavour.length(n) + 1 for n in kept)
            if total > flavour.max_path:
                raise SecurityViolation(
                    f"path longer than {flavour.max_path} {flavour.length_unit}", path
                )
        return tuple(kept)

    def _strip_root(self, anchor: str, names: list[str], path: str) -> list[str]:
        """Names after the root's own, compared through the flavour key."""
        key = self.flavour.key
        root_keys = self._root_keys
        if key(anchor) != root_keys[0]:
            raise SecurityViolation(OUTSIDE_ROOT, path)
        matched = 1
        for index, name in enumerate(names):
            if matched == len(root_keys):
                return names[index:]
            if name == "" or name == ".":
                continue
            if key(name) != root_keys[matched]:
                raise SecurityViolation(OUTSIDE_ROOT, path)
            matched += 1
        if matched == len(root_keys):
            return []
        raise SecurityViolation(OUTSIDE_ROOT, path)
