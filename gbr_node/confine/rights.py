"""Landlock access rights and the rules that grant them [pure].

Constants are the kernel's UAPI (`include/uapi/linux/landlock.h`); which of
them a ruleset can handle depends on the kernel's ABI version (Documentation/
userspace-api/landlock.rst, "Compatibility"). Landlock rules only ever add
rights under a folder, for everything beneath it; `grant_tree` is how a tree is
granted with exceptions: the folders on the way to an exception get only the
rights every exception below them may have, and their other entries get the
full rights one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
MAKE_SYM, REFER, TRUNCATE, IOCTL_DEV = 1 << 12, 1 << 13, 1 << 14, 1 << 15

READ = EXECUTE | READ_FILE | READ_DIR
"""Read, list and execute: what the system folders and program prefixes get."""
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The rights a rule on a file (not a folder) may carry."""
ALL_V1 = (1 << 13) - 1

NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


def handled_fs(abi: int) -> int:
    """Every filesystem right a ruleset can handle on Landlock ABI `abi` (0 if none)."""
    if abi < 1:
        return 0
    rights = ALL_V1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def handled_net(abi: int, network: bool) -> int:
    """TCP bind/connect handled (so refused) when the network is off and ABI >= 4."""
    return NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 and not network else 0


def handled_scopes(abi: int) -> int:
    """Abstract unix sockets and signals scoped to the sandbox (ABI >= 6)."""
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0


def ruleset_attr_size(abi: int) -> int:
    """Bytes of `struct landlock_ruleset_attr` that ABI `abi` knows (8, 16 or 24)."""
    return 8 if abi < 4 else 16 if abi < 6 else 24


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


Rule = tuple[str, int]
"""One Landlock path rule: an absolute path (no symlinks in it) and its rights."""


def grant_tree(
    top: str,
    rights: int,
    exceptions: Mapping[str, int],
    entries: Callable[[str], Iterable[tuple[str, bool]]],
) -> list[Rule]:
    """The rules that grant `rights` on the tree at `top` except at `exceptions`.

    `exceptions` maps absolute paths to the rights they may have instead
    (0: none at all; `READ`: read-only); `entries(folder)` lists a folder's
    entries as (absolute path, is_symlink). A folder with no exception at or
    below it gets one rule. A folder above an exception gets only the rights
    common to every exception below it (plus READ_DIR: names are not
    contents), and each of its entries is granted on its own; so new entries
    created in such a folder get those reduced rights (Landlock has no
    "everything but"). Symlinks get no rule: a rule follows a link to its
    target, which may be anywhere.
    """
    rules: list[Rule] = []

    def grant(path: str) -> None:
        if path in exceptions:
            if exceptions[path] & rights:
                rules.append((path, exceptions[path] & rights))
            return
        below = [mask for where, mask in exceptions.items() if _under(where, path)]
        if not below:
            rules.append((path, rights))
            return
        common = rights
        for mask in below:
            common &= mask
        rules.append((path, common | (rights & READ_DIR)))
        for child, is_link in entries(path):
            if not is_link:
                grant(child)

    grant(top)
    return rules
