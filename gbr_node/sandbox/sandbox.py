"""The sandbox: checked paths and safe writes inside one allowed root (UBQ-DEV-01).

`Sandbox.resolve` runs the pure lexical policy first (`paths.PathPolicy`,
UNW-DEV-01), then resolves symlinks with `os.path.realpath` and requires the
result to lie inside the root. The root may be spelled through symlinks (the
spelling it was given, and `aliases`): absolute paths in any of them are
inside. `write_atomic` writes through a temporary file and a rename, walking
from the root with `O_NOFOLLOW` directory handles, so a symlink planted after
the check is refused rather than followed, and a hard link to an outside file
is replaced, never written through. `open_read` refuses a regular file with
more than one hard link unless `allow_hardlinks` (its other name may lie
outside the root, where no path check can see it).

Private paths (GBR-PRIV-01, `private.py`): the node's state, the identity
key, the person's secrets, and for peers and MCP clients the profiles, are
refused by `resolve` whatever the tool, hidden from walks (`hidden`), and
refused again by `open_read` and `write_atomic`. Who asks comes from
`caller.CALLER`.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import logging
import os
import pathlib
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from gbr_node.errors import SecurityViolation, ToolError
from gbr_node.sandbox.caller import caller_is_remote
from gbr_node.sandbox.flavours import Flavour, detect_flavour
from gbr_node.sandbox.paths import OUTSIDE_ROOT, PathPolicy
from gbr_node.sandbox.private import (
    CONFIG_DIR,
    HOME_SECRETS,
    NODE_STATE,
    PROFILE_DIR,
    SYSTEM_SECRETS,
    PrivateMatcher,
)
from gbr_node.sandbox.protected import ProtectedMatcher

logger = logging.getLogger("gbr_node.sandbox")

OUTSIDE_THROUGH_LINK = "resolves outside the allowed root through a symlink"
LINK_APPEARED = "a symlink appeared in the path after it was checked"
HARD_LINKED = (
    "a file with more than one hard link is not read (another of its names may lie "
    "outside the allowed root); `[tools] allow_hardlinks = true` in the profile allows it"
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NODE_FILES: set[str] = set()


def register_node_file(path: str | os.PathLike[str]) -> None:
    """Make `path` (a file of the node's own, such as an identity key given with
    `--identity`) private in every sandbox built from now on in this process
    (GBR-PRIV-01). The default key's folder is private without this."""
    _NODE_FILES.add(os.path.abspath(os.fspath(path)))


def config_folder() -> str:
    """gbr-node's config folder: `($XDG_CONFIG_HOME or ~/.config)/gbr-node`."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, CONFIG_DIR)


# Race-free writes need directory handles (POSIX); elsewhere paths are re-checked.
HAVE_DIR_FD = {os.open, os.mkdir, os.stat, os.rename, os.unlink} <= os.supports_dir_fd and bool(
    _DIRECTORY
)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A checked path inside the root (UBQ-DEV-01).

    `path`: absolute, symlinks resolved. `relative`: its root-relative POSIX
    form ("." for the root). `protected`: the lexical or the resolved form
    matches a protected pattern.
    """

    path: pathlib.Path
    relative: str
    protected: bool


class Sandbox:
    """Checked paths and safe writes inside `root` (UBQ-AI-01, UBQ-DEV-01, UNW-DEV-01).

    `root` must be an existing directory; it is stored resolved, and absolute
    paths may name it in either spelling (macOS `/tmp` is `/private/tmp`), or
    in any of `aliases` (absolute spellings through symlinks, such as a
    symlinked project folder; one that does not resolve to the root is
    ignored). `protected` are the profile's globs (see `protected.py`).
    `allow_hardlinks` lets `open_read` open files with several hard links.
    `aliases` is kept as the tuple of the spellings admitted (absolute strings).
    `flavour` defaults to the detected OS flavour with the case rule of a real
    probe of the root's filesystem; an injected flavour is kept as given (the
    probe is only logged). `private`: absolute globs (`~` expanded already) no
    tool may reach, on top of the built-in ones (`private.py`: the root's
    `.gbr/`, the config folder, home and system secrets); `remote_private`:
    absolute paths peers and MCP clients may not reach, on top of the root's
    `.gbr_envs/` (the profile's source files). `home`: whose secrets are meant
    (default `~`). Raises SecurityViolation if `root` is not an existing
    directory, ValueError for a bad protected or private pattern.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        protected: Iterable[str] = (),
        *,
        aliases: Iterable[str] = (),
        allow_hardlinks: bool = False,
        flavour: Flavour | None = None,
        private: Iterable[str] = (),
        remote_private: Iterable[str] = (),
        home: str | None = None,
    ) -> None:
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise SecurityViolation("allowed root is not an existing directory", os.fspath(root))
        self.root = pathlib.Path(real)
        self._root = real
        self._prefix = real if real.endswith(os.sep) else real + os.sep
        self.flavour = flavour or detect_flavour()
        self.case_sensitive_fs = self.probe_case_sensitivity()
        if flavour is None and self.case_sensitive_fs != self.flavour.case_sensitive:
            self.flavour = self.flavour.with_case_sensitive(self.case_sensitive_fs)
        self._policy = PathPolicy(real, self.flavour)
        spellings = dict.fromkeys(os.path.abspath(a) for a in (os.fspath(root), *aliases))
        self._aliases = [
            PathPolicy(spelling, self.flavour)
            for spelling in spellings
            if spelling != real and os.path.realpath(spelling) == real
        ]
        self.aliases = tuple(policy.root for policy in self._aliases)
        self.allow_hardlinks = allow_hardlinks
        self._matcher = ProtectedMatcher(protected, self.flavour)
        home = os.path.expanduser("~") if home is None else home
        everyone = [
            os.path.join(real, NODE_STATE),
            config_folder(),
            *SYSTEM_SECRETS,
            *(os.path.join(home, name) for name in HOME_SECRETS),
            *sorted(_NODE_FILES),
            *private,
        ]
        remote = [os.path.join(real, PROFILE_DIR), *remote_private]
        self.private = PrivateMatcher(
            _with_real_spellings(everyone), _with_real_spellings(remote), self.flavour
        )

    def resolve(self, path: str) -> Resolved:
        """Check `path` (relative to the root, or absolute inside it) and resolve it.

        Lexical check first (UNW-DEV-01), then realpath: a path whose tail
        does not exist yet resolves through its deepest existing ancestor.
        The result must be inside the root (UBQ-DEV-01). Raises
        SecurityViolation(reason, path).
        """
        try:
            names = self._policy.relative_parts(path)
        except SecurityViolation as exc:
            if exc.reason != OUTSIDE_ROOT:
                raise
            names = self._through_alias(path, exc)
        lexical = "/".join(names) if names else "."
        real = os.path.realpath(self._prefix + os.sep.join(names) if names else self._root)
        if real == self._root:
            relative = "."
        elif real.startswith(self._prefix):
            relative = real[len(self._prefix) :]
            if os.sep != "/":
                relative = relative.replace(os.sep, "/")
        else:
            raise SecurityViolation(OUTSIDE_THROUGH_LINK, path)
        remote = caller_is_remote()
        why = self.private.reason(real, remote=remote) or self.private.reason(
            self._prefix + "/".join(names) if names else self._root, remote=remote
        )
        if why is not None:
            raise SecurityViolation(why, path)
        matches = self._matcher.matches
        protected = matches(lexical) or (relative != lexical and matches(relative))
        return Resolved(pathlib.Path(real), relative, protected)

    def _through_alias(self, path: str, outside: SecurityViolation) -> tuple[str, ...]:
        """The names of absolute `path` below the first alias of the root that admits it."""
        for alias in self._aliases:
            try:
                return alias.relative_parts(path)
            except SecurityViolation as exc:
                if exc.reason != OUTSIDE_ROOT:
                    raise
        raise outside

    def hidden(self, absolute: str | os.PathLike[str]) -> bool:
        """True when `absolute` (a path found by walking the root) is private to the
        caller of the tool being run (GBR-PRIV-01): walks leave it out."""
        return self.private.reason(os.fspath(absolute), remote=caller_is_remote()) is not None

    def private_under(self, folder: pathlib.Path) -> list[str]:
        """Sorted absolute paths of the private entries that exist at or below `folder`
        (a `Resolved.path`), for this caller: a folder holding one is neither moved nor
        deleted (GBR-PRIV-01)."""
        inside = os.fspath(folder).rstrip(os.sep) + os.sep
        remote = caller_is_remote()
        patterns = [*self.private.everyone, *(self.private.remote if remote else ())]
        found: set[str] = set()
        for pattern in patterns:
            if not glob.has_magic(pattern):
                if pattern.startswith(inside) and os.path.lexists(pattern):
                    found.add(pattern)
            elif _magic_prefix(pattern).startswith(inside) or inside.startswith(
                _magic_prefix(pattern) + os.sep
            ):
                found.update(hit for hit in glob.glob(pattern) if hit.startswith(inside))
        return sorted(found)

    def _refuse_private(self, path: pathlib.Path, relative: str) -> None:
        """SecurityViolation when `path` is private to this caller (GBR-PRIV-01)."""
        why = self.private.reason(os.fspath(path), remote=caller_is_remote())
        if why is not None:
            raise SecurityViolation(why, relative)

    def refuse_hard_link(self, info: os.stat_result, subject: str) -> None:
        """SecurityViolation(HARD_LINKED, subject) when `info` (an `os.stat` result)
        is a regular file with more than one hard link and `allow_hardlinks` is off."""
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1 and not self.allow_hardlinks:
            raise SecurityViolation(HARD_LINKED, subject)

    def protected_under(self, folder: pathlib.Path) -> list[str]:
        """Sorted root-relative paths of protected entries at or below `folder`.

        `folder` is an absolute path inside the root (a `Resolved.path`); if it
        is protected itself the answer is just its own path. Symlinked folders
        are listed, not entered. Raises SecurityViolation if `folder` is
        outside the root, ToolError if a folder below cannot be read.
        """
        relative = self._relative_of(os.fspath(folder))
        if self._matcher.matches(relative):
            return [relative]
        if os.path.islink(folder) or not os.path.isdir(folder):
            return []
        found: list[str] = []

        def fail(exc: OSError) -> None:
            raise ToolError(f"cannot list {exc.filename}: {exc.strerror}") from exc

        for dirpath, dirnames, filenames in os.walk(folder, onerror=fail):
            here = self._relative_of(dirpath)
            base = "" if here == "." else here + "/"
            kept: list[str] = []
            for name in dirnames:
                (found if self._matcher.matches(base + name) else kept).append(name)
            dirnames[:] = kept
            found.extend(base + name for name in filenames if self._matcher.matches(base + name))
        return sorted(found)

    def protected_entries(self) -> list[str]:
        """Sorted root-relative paths of the protected entries that exist now, the
        topmost ones only (a protected folder stands for all below it).

        Walks no deeper than a pattern can match (`ProtectedMatcher.depth`:
        the root's own entries for the default profile), lists symlinks
        without following them, and skips folders it cannot read. For
        confined commands (GBR-CONF-01), which must not write these.
        """
        depth = self._matcher.depth()
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self._root):
            here = self._relative_of(dirpath)
            base = "" if here == "." else here + "/"
            kept: list[str] = []
            for name in dirnames:
                (found if self._matcher.matches(base + name) else kept).append(name)
            level = 0 if here == "." else here.count("/") + 1
            dirnames[:] = kept if depth is None or level + 1 < depth else []
            found.extend(base + name for name in filenames if self._matcher.matches(base + name))
        return sorted(found)

    def write_atomic(self, path: pathlib.Path, data: bytes) -> None:
        """Replace the file at `path` (a `Resolved.path`) with `data`, atomically.

        Writes a temporary file in the same folder, then renames it over
        `path`; creates missing parent folders inside the root; keeps an
        existing file's mode (new files get 0o644 minus the umask). The walk
        from the root opens each folder with O_NOFOLLOW, so a symlink planted
        in a parent or at the final name after `resolve` raises
        SecurityViolation instead of being followed; a hard link is replaced,
        never written through. OS failures raise ToolError naming the path;
        the temporary file is then removed and the old file left as it was.
        Blocking (fsync): from async code run it in a worker thread.
        """
        relative = self._relative_of(os.fspath(path))
        if relative == ".":
            raise ToolError("cannot write over the allowed root itself")
        self._refuse_private(path, relative)
        names = relative.split("/")
        try:
            if HAVE_DIR_FD:
                self._write_by_handles(names, data, relative)
            else:
                self._write_by_paths(names, data, relative)
        except OSError as exc:
            raise ToolError(f"cannot write {relative}: {exc.strerror or exc}") from exc

    def open_read(self, path: pathlib.Path) -> int:
        """A read-only file descriptor of `path` (a `Resolved.path`); the caller closes it.

        As in `write_atomic`, the walk from the root opens each folder with
        O_NOFOLLOW, and the last name too, so a symlink planted in the path
        after `resolve` (which has already followed the ones that stay inside)
        raises SecurityViolation instead of being followed. O_NONBLOCK: a FIFO
        or device never makes `open` wait (callers check for a regular file).
        Without directory handles (Windows) the path is opened as is. A
        regular file with more than one hard link is refused unless
        `allow_hardlinks` (checked on the opened file: no swap in between).

        Raises:
            SecurityViolation: a symlink appeared in the path; a hard-linked file.
            OSError: as `os.open` (FileNotFoundError for a missing file).
        """
        relative = self._relative_of(os.fspath(path))
        self._refuse_private(path, relative)
        fd = self._open_nofollow(path, relative)
        try:
            self.refuse_hard_link(os.fstat(fd), relative)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_nofollow(self, path: pathlib.Path, relative: str) -> int:
        flags = os.O_RDONLY | _NOFOLLOW | _BINARY | _NONBLOCK | _CLOEXEC
        if relative == "." or not HAVE_DIR_FD:
            return os.open(path, flags)
        names = relative.split("/")
        folder = os.open(self._root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            for name in names[:-1]:
                child = _open_folder(folder, name, relative, create=False)
                os.close(folder)
                folder = child
            try:
                return os.open(names[-1], flags, dir_fd=folder)
            except OSError as exc:
                _raise_if_link(exc, names[-1], folder, relative)
                raise
        finally:
            os.close(folder)

    def probe_case_sensitivity(self) -> bool:
        """True if the root's filesystem tells names apart by case (a real probe).

        Creates and removes a hidden file `.gbr-case-probe-<hex>` in the root
        and looks for it under its upper-case name. If the root is not
        writable, the flavour's guess is returned. The result is logged.
        """
        name = f".gbr-case-probe-{secrets.token_hex(4)}"
        probe = os.path.join(self._root, name)
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
        except OSError as exc:
            guess = self.flavour.case_sensitive
            logger.info("case probe of %s failed (%s); assuming %s", self._root, exc, guess)
            return guess
        try:
            try:
                other = os.lstat(os.path.join(self._root, name.upper()))
            except FileNotFoundError:
                sensitive = True
            else:
                sensitive = not os.path.samestat(os.fstat(fd), other)
        finally:
            os.close(fd)
            os.unlink(probe)
        logger.info(
            "filesystem of %s is case-%s (flavour %s guessed case-%s)",
            self._root,
            "sensitive" if sensitive else "insensitive",
            self.flavour.name,
            "sensitive" if self.flavour.case_sensitive else "insensitive",
        )
        return sensitive

    def _relative_of(self, absolute: str) -> str:
        """Root-relative POSIX form of an absolute normalised path inside the root."""
        if absolute == self._root:
            return "."
        relative = absolute[len(self._prefix) :]
        names = relative.split(os.sep)
        if not absolute.startswith(self._prefix) or any(n in ("", ".", "..") for n in names):
            raise SecurityViolation("not a resolved path inside the allowed root", absolute)
        return "/".join(names)

    def _write_by_handles(self, names: list[str], data: bytes, relative: str) -> None:
        """POSIX: every step relative to a directory handle opened with O_NOFOLLOW."""
        folder = os.open(self._root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            for name in names[:-1]:
                child = _open_folder(folder, name, relative)
                os.close(folder)
                folder = child
            mode = _existing_mode(names[-1], relative, folder)
            temp = f".gbr-tmp-{secrets.token_hex(6)}"
            _write_temp(temp, data, mode, folder)
            try:
                os.replace(temp, names[-1], src_dir_fd=folder, dst_dir_fd=folder)
            except OSError:
                os.unlink(temp, dir_fd=folder)
                raise
        finally:
            os.close(folder)

    def _write_by_paths(self, names: list[str], data: bytes, relative: str) -> None:
        """Without directory handles: create and re-check each folder by realpath."""
        folder = self._root
        for name in names[:-1]:
            folder = os.path.join(folder, name)
            if not os.path.lexists(folder):
                os.mkdir(folder)
            if os.path.realpath(folder) != folder:
                raise SecurityViolation(LINK_APPEARED, relative)
        target = os.path.join(folder, names[-1])
        mode = _existing_mode(target, relative, None)
        temp = os.path.join(folder, f".gbr-tmp-{secrets.token_hex(6)}")
        _write_temp(temp, data, mode, None)
        try:
            if os.path.realpath(folder) != folder:
                raise SecurityViolation(LINK_APPEARED, relative)
            os.replace(temp, target)
        except BaseException:
            os.unlink(temp)
            raise


def _magic_prefix(pattern: str) -> str:
    """The names of absolute glob `pattern` before its first wildcard, as a path."""
    names = pattern.split(os.sep)
    for index, name in enumerate(names):
        if glob.has_magic(name):
            return os.sep.join(names[:index])
    return pattern


def _with_real_spellings(patterns: Iterable[str]) -> list[str]:
    """`patterns` and, for each, the spelling with the part before its first wildcard
    resolved (symlinks followed), since `resolve` compares resolved paths."""
    out: list[str] = []
    for pattern in patterns:
        fixed = _magic_prefix(pattern)
        out += [pattern, os.path.realpath(fixed) + pattern[len(fixed) :]]
    return list(dict.fromkeys(out))


def _open_folder(parent: int, name: str, relative: str, *, create: bool = True) -> int:
    """Open folder `name` under handle `parent` (creating it if missing and `create`),
    never via a symlink."""
    flags = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
    try:
        try:
            return os.open(name, flags, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=parent)
            return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        _raise_if_link(exc, name, parent, relative)
        raise


def _raise_if_link(exc: OSError, name: str, parent: int, relative: str) -> None:
    """SecurityViolation if `exc` (from an O_NOFOLLOW open of `name`) came from a symlink
    (`resolve` leaves none: one appeared since); ToolError for a symlink loop, which
    `resolve` passes through as is."""
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not stat.S_ISLNK(
        os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    ):
        return
    try:
        os.stat(name, dir_fd=parent)
    except OSError as followed:
        if followed.errno == errno.ELOOP:
            raise ToolError(f"{relative} is a symlink loop") from exc
    raise SecurityViolation(LINK_APPEARED, relative) from exc


def _existing_mode(name: str, relative: str, folder: int | None) -> int | None:
    """Permission bits of the regular file at `name`, None if absent; refuses links, folders."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        try:
            os.stat(name, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ToolError(f"{relative} is a symlink loop") from exc
        raise SecurityViolation(LINK_APPEARED, relative)
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"cannot write {relative}: it is a folder")
    return stat.S_IMODE(info.st_mode)


def _write_temp(temp: str, data: bytes, mode: int | None, folder: int | None) -> None:
    """Create `temp` exclusively (no symlink followed), write, set mode, fsync."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY
    fd = os.open(temp, flags, 0o644 if mode is None else 0o600, dir_fd=folder)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if mode is not None and os.chmod in os.supports_fd:
            os.chmod(fd, mode)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(temp, dir_fd=folder)
        raise
    os.close(fd)
