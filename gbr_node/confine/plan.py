"""Turn a `CommandPolicy` into the launcher's plan for one command (GBR-CONF-01).

The plan is plain data (marshal-able) that `launcher.py` carries out step by
step: mounts (namespaces mode only), Landlock rules, a seccomp program, the
command. Deciding here and doing there keeps the launcher small and lets the
tests read a plan. What the plan grants:

- read and execute: `SYSTEM_FOLDERS`, the executables and their install
  prefixes, the profile's `read_paths`, the repository the root's `.git`
  pointer file names (never a secret below them);
- read and write: the allowed root, and a private TMPDIR and HOME (tmpfs in
  the namespaces mode, a private folder in the Landlock-only mode);
- read only: the protected paths inside the root;
- nothing: secrets (`policy.SYSTEM_SECRETS`, `HOME_SECRETS`, the profile's
  `secret_paths`) and the root's `.gbr/`.

Two ways to hold protected paths read-only inside a writable root, since a
Landlock rule can only add rights below a folder:

- namespaces (preferred): the command gets a new root holding only what it may
  see: the system folders and program prefixes read-only, the root
  read-write, fresh tmpfs mounts for /tmp, HOME and /dev/shm; protected paths
  are read-only bind mounts (a mount point cannot be renamed or unlinked
  either, and a hard link cannot cross it), their parent folders are pinned
  by bind mounts of their own, and secrets (in /etc, in the root) are
  covered by empty read-only mounts. Landlock then grants read on all of it
  and write on the root, /tmp, HOME and /dev/shm.
- Landlock only (no user namespaces): the root is granted entry by entry
  (`rights.grant_tree`): folders on the way to a protected path get only
  read rights, so a command cannot create new files directly in them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gbr_node.confine import rights, seccomp
from gbr_node.confine.policy import SYSTEM_FOLDERS, CommandPolicy

DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
DEV_LINKS = (
    ("/proc/self/fd", "/dev/fd"),
    ("/proc/self/fd/0", "/dev/stdin"),
    ("/proc/self/fd/1", "/dev/stdout"),
    ("/proc/self/fd/2", "/dev/stderr"),
)
DEVICE_RIGHTS = rights.READ_FILE | rights.WRITE_FILE | rights.TRUNCATE | rights.IOCTL_DEV
PROC_RIGHTS = rights.READ


EMPTY = "/.gbr-empty"
"""An empty read-only file in the new root, mounted over secret files (namespaces mode)."""


@dataclass(frozen=True)
class Private:
    """The private folder of a Landlock-only command (created and removed by
    `confine.spawn`): its `tmp` and `home`, both read-write. The namespaces mode
    needs none: its /tmp and HOME are fresh tmpfs mounts that vanish with it."""

    base: str

    @property
    def tmp(self) -> str:
        return os.path.join(self.base, "tmp")

    @property
    def home(self) -> str:
        return os.path.join(self.base, "home")

    def create(self) -> None:
        """Make both folders (mode 0700)."""
        for folder in (self.tmp, self.home):
            os.mkdir(folder, 0o700)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _private_home(home: str, root: str) -> bool:
    """True when the namespaces plan mounts a private folder over `home`: always,
    but for a home that is `/` or lies inside the root (the root is mounted instead)."""
    return home != "/" and not _under(home, root)


def _entries(folder: str) -> list[tuple[str, bool]]:
    try:
        with os.scandir(folder) as listing:
            return [(entry.path, entry.is_symlink()) for entry in listing]
    except OSError:
        return []


def _stamp(folder: str) -> tuple[int, int] | None:
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return info.st_ino, info.st_mtime_ns


_system_rules: dict[
    tuple[Any, ...], tuple[list[rights.Rule], dict[str, tuple[int, int] | None]]
] = {}


def _tree_rules(tree: str, access: int, exceptions: dict[str, int]) -> list[rights.Rule]:
    """`rights.grant_tree` of a read-only tree (the system folders, program
    prefixes), kept while none of the folders it listed changed (same inode and
    mtime: no entry added, removed or renamed), since /etc takes a rule per entry."""
    key = (tree, access, tuple(sorted(exceptions.items())))
    kept = _system_rules.get(key)
    if kept is not None and all(_stamp(f) == stamp for f, stamp in kept[1].items()):
        return kept[0]
    listed: dict[str, tuple[int, int] | None] = {}

    def entries(folder: str) -> list[tuple[str, bool]]:
        listed[folder] = _stamp(folder)
        return _entries(folder)

    rules = rights.grant_tree(tree, access, exceptions, entries)
    _system_rules[key] = (rules, listed)
    return rules


def install_prefix(executable: str) -> str:
    """The folder a program is installed under: `/opt/x` for `/opt/x/bin/tool` when
    `/opt/x` looks like a prefix (has `lib/`, `lib64/` or `pyvenv.cfg`), else the
    program's own folder."""
    folder = os.path.dirname(executable)
    if os.path.basename(folder) in ("bin", "sbin"):
        prefix = os.path.dirname(folder)
        markers = ("lib", "lib64", "pyvenv.cfg")
        if prefix != "/" and any(os.path.exists(os.path.join(prefix, m)) for m in markers):
            return prefix
    return folder


def _program_paths(executable: str, root: str) -> list[str]:
    """Each hop of `executable`'s symlink chain, and the interpreter of a script
    (`#!`), resolved; at most a few levels, and none inside `root`."""
    found: list[str] = []
    todo = [executable]
    while todo and len(found) < 16:
        path = todo.pop()
        for _ in range(8):
            hop = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
            if _under(hop, root):
                break
            found.append(hop)
            if not os.path.islink(path):
                break
            path = os.path.join(os.path.dirname(path), os.readlink(path))
        if _under(os.path.realpath(path), root):
            continue
        try:
            with open(path, "rb") as program:
                first = program.readline(256)
        except OSError:
            continue
        if first.startswith(b"#!"):
            words = first[2:].split()
            if words and os.path.isabs(words[0]):
                todo.append(os.fsdecode(words[0]))
    return found


def _looks_like_git_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "HEAD")) and (
        os.path.isdir(os.path.join(path, "objects"))
        or os.path.isfile(os.path.join(path, "commondir"))
    )


def git_dirs(root: str) -> list[str]:
    """The repository folders git needs when the root's own `.git` is a pointer file
    (`gitdir: ...`: the root is a worktree or a submodule): the gitdir and the common
    dir it names, when they look like git folders. Read-only to the command, like a
    `.git` folder. Only the root's `.git` counts: it is always protected, so the
    agent cannot point it elsewhere; a `.git` file deeper down it could."""
    pointer = os.path.join(root, ".git")
    if os.path.islink(pointer) or not os.path.isfile(pointer):
        return []
    try:
        with open(pointer, encoding="utf-8") as text:
            first = text.readline(4096).strip()
    except (OSError, UnicodeDecodeError):
        return []
    if not first.startswith("gitdir:"):
        return []
    gitdir = os.path.realpath(os.path.join(root, first[len("gitdir:") :].strip()))
    if not _looks_like_git_dir(gitdir):
        return []
    found = [gitdir]
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as common:
            found.append(os.path.realpath(os.path.join(gitdir, common.readline(4096).strip())))
    except (OSError, UnicodeDecodeError):
        pass
    return [path for path in found if _looks_like_git_dir(path)]


def _holds_secrets(tree: str, home: str, secrets: list[str]) -> bool:
    """True when granting `tree` would grant the home folder or a secret (or a part
    of one)."""
    return _under(home, tree) or any(_under(s, tree) or _under(tree, s) for s in secrets)


def readable_trees(
    policy: CommandPolicy, secrets: list[str], extra: Iterable[str] = ()
) -> list[str]:
    """The trees granted read and execute, outermost only: system folders that
    exist (symlinks resolved), each program's prefix and file, `read_paths`,
    and `extra` (resolved folders, such as `git_dirs`).

    A prefix holding the home folder or a secret is narrowed to the program
    file; a program file that is (in) a secret is left out. Programs inside
    the root are not followed at all (their links and `#!` lines are the
    agent's to write: they could name any file), the root being granted anyway.
    """
    home, root = os.path.realpath(policy.home), str(policy.root)
    trees = [os.path.realpath(f) for f in SYSTEM_FOLDERS if os.path.exists(f)]
    for executable in policy.executables:
        for program in _program_paths(executable, root):
            real = os.path.realpath(program)
            if _holds_secrets(real, home, secrets) or _under(real, root):
                continue
            prefix = os.path.realpath(install_prefix(program))
            trees += [real] if _holds_secrets(prefix, home, secrets) else [prefix, real]
    trees += [os.path.realpath(p) for p in policy.read_paths if os.path.exists(p)]
    trees += [path for path in extra if not _holds_secrets(path, home, secrets)]
    kept: list[str] = []
    for tree in sorted(set(trees), key=len):
        if not any(_under(tree, k) for k in kept):
            kept.append(tree)
    return kept


def _protected(policy: CommandPolicy, secrets: list[str]) -> tuple[list[str], list[str]]:
    """Absolute protected paths (read-only) and the folders to pin: a protected
    symlink stands for its folder (the link could be replaced) and its target."""
    root = str(policy.root)
    protected: set[str] = set()
    for relative in policy.sandbox.protected_entries():
        path = os.path.join(root, relative)
        if os.path.islink(path):
            protected.add(os.path.dirname(path))
            target = os.path.realpath(path)
            if _under(target, root) and os.path.exists(target):
                protected.add(target)
        else:
            protected.add(path)
    hidden = {s for s in secrets if _under(s, root)}
    protected = {p for p in protected if not any(_under(p, h) for h in hidden)}
    pins = set()
    for path in protected | hidden:
        parent = os.path.dirname(path)
        while _under(parent, root) and parent != root:
            pins.add(parent)
            parent = os.path.dirname(parent)
    return sorted(protected), sorted(pins - protected)


def _mounts(
    policy: CommandPolicy,
    trees: list[str],
    protected: list[str],
    pins: list[str],
    hidden: list[str],
) -> list[tuple[Any, ...]]:
    """The namespaces plan's mounts, parents before children."""
    root, home = str(policy.root), os.path.realpath(policy.home)
    ops: list[tuple[int, int, tuple[Any, ...]]] = []  # (depth, order, op)

    def add(order: int, op: tuple[Any, ...]) -> None:
        target = op[-1]
        ops.append((0 if target == "/" else target.count("/"), order, op))

    add(0, ("tmpfs", "mode=0755", None, "/"))
    add(1, ("file", EMPTY))
    for folder in SYSTEM_FOLDERS:
        if os.path.islink(folder):
            add(1, ("symlink", os.readlink(folder), folder))
    add(1, ("tmpfs", "mode=0755", "ro", "/dev"))
    for device in DEVICES:
        if os.path.exists(device):
            add(2, ("bind", device, "dev", device))
    for target, link in DEV_LINKS:
        add(2, ("symlink", target, link))
    add(2, ("tmpfs", "mode=1777", None, "/dev/shm"))
    add(1, ("proc", "/proc"))
    add(1, ("tmpfs", "mode=1777", None, "/tmp"))
    if _private_home(home, root):
        add(3, ("tmpfs", "mode=0700", None, home))
    for tree in trees:
        if not _under(tree, root):
            add(4, ("bind", tree, "ro", tree))
    add(5, ("bind", root, "rw", root))
    for pin in pins:
        add(6, ("bind", pin, "rw", pin))
    for path in protected:
        add(7, ("bind", path, "ro", path))
    for path in hidden:
        add(8, ("hide", path))
    for alias in _alias_links(policy.sandbox.aliases, [*trees, root]):
        add(9, alias)
    ops.sort(key=lambda item: (item[0], item[1]))
    return [op for _, _, op in ops]


def _alias_links(aliases: Iterable[str], bound: list[str]) -> list[tuple[Any, ...]]:
    """The symlinks that spell the root another way (a symlinked project folder,
    or a symlink above it), rebuilt in the new root: each symlink met walking an
    alias from `/`, at its real place, unless a bound tree already shows it."""
    links: dict[str, tuple[Any, ...]] = {}
    for alias in aliases:
        place = "/"
        for name in alias.strip("/").split("/"):
            place = os.path.join(place, name)
            if any(_under(place, tree) for tree in bound):
                break
            if os.path.islink(place):
                links[place] = ("symlink", os.readlink(place), place)
                place = os.path.realpath(place)
    return list(links.values())


def _landlock_rules(
    policy: CommandPolicy,
    namespaces: bool,
    private: Private | None,
    trees: list[str],
    protected: list[str],
    hidden: list[str],
    secrets: list[str],
    abi: int,
) -> list[tuple[str, int, int]]:
    everything = rights.handled_fs(abi)
    root = str(policy.root)
    devices = [d for d in DEVICES if os.path.exists(d)]
    rules: list[rights.Rule] = [(d, DEVICE_RIGHTS & everything) for d in devices]
    if namespaces:
        # The new root holds only what the command may read (secrets are covered by
        # empty mounts): read everything there, write only these.
        rules += [("/", rights.READ), ("/tmp", everything), ("/dev/shm", everything)]
        rules.append((root, everything))
        home = os.path.realpath(policy.home)
        if _private_home(home, root):
            rules.append((home, everything))
    else:
        assert private is not None
        for tree in trees:
            below = {s: 0 for s in secrets if _under(s, tree)}
            rules += _tree_rules(tree, rights.READ & everything, below)
        rules.append(("/proc", PROC_RIGHTS))
        rules += [(private.tmp, everything), (private.home, everything)]
        exceptions: dict[str, int] = {p: rights.READ for p in protected}
        exceptions.update({h: 0 for h in hidden})
        rules += rights.grant_tree(root, everything, exceptions, _entries)
    return [(path, access, rights.FILE_RIGHTS) for path, access in rules]


def build_plan(
    policy: CommandPolicy,
    *,
    abi: int,
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str],
    new_root: str,
    private: Private | None,
    probe: Iterable[tuple[str, object]] | None = None,
) -> dict[str, Any]:
    """The launcher plan for `argv` (argv[0] absolute) run in `cwd` with `env`.

    `abi`: the kernel's Landlock ABI (>= 1). `private`: None for the
    namespaces mode, whose new root is mounted on the empty folder
    `new_root`; for the Landlock-only mode, the command's private folder,
    already created. `probe`: expectations checked instead of running a
    command (`support.self_test`). Reads the filesystem (protected entries,
    secrets, prefixes) at this moment: call it right before spawning.
    """
    namespaces = private is None
    secrets = policy.secrets()
    root = str(policy.root)
    trees = readable_trees(policy, secrets, git_dirs(root))
    protected, pins = _protected(policy, secrets)
    if namespaces:
        # HOME keeps its path: an empty tmpfs is mounted there (or it is in the root).
        hidden = [s for s in secrets if any(_under(s, t) for t in (*trees, root))]
        tmp, home = "/tmp", os.path.realpath(policy.home)
        home = "/tmp" if home == "/" else home
        mounts = _mounts(policy, trees, protected, pins, hidden)
    else:
        assert private is not None
        hidden = [s for s in secrets if _under(s, root)]
        tmp, home = private.tmp, private.home
        mounts = []
    environment = dict(env)
    environment.update(TMPDIR=tmp, TMP=tmp, TEMP=tmp, HOME=home)
    # Without namespaces, other programs' sockets are reachable by path, and only
    # seccomp keeps UDP and raw sockets off (a network namespace does it otherwise).
    program = seccomp.filter_program(
        os.uname().machine, allow_inet=namespaces or policy.network, allow_unix=namespaces
    )
    rules = _landlock_rules(policy, namespaces, private, trees, protected, hidden, secrets, abi)
    return {
        "argv": list(argv),
        "cwd": str(cwd),
        "env": environment,
        "network": policy.network,
        "namespaces": namespaces,
        "new_root": new_root,
        "empty": EMPTY,
        "mounts": mounts,
        "landlock": {
            "fs": rights.handled_fs(abi),
            "net": rights.handled_net(abi, policy.network),
            "scoped": rights.handled_scopes(abi),
            "attr_size": rights.ruleset_attr_size(abi),
            "paths": rules,
        },
        "seccomp": program,
        "probe": list(probe) if probe is not None else None,
    }
