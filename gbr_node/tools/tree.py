"""Folder tools: `move_path`, `delete_path`, `list_dir` (issue 2, "Local tools").

Paths go through `Sandbox.resolve` (UBQ-DEV-01, UNW-DEV-01). When the last
component of a path is a symlink, moves and deletes act on the link itself,
never on what it points to (a link leading out of the root is refused by the
sandbox like any other path, so it cannot be moved or deleted here). Moving
onto, away from, or deleting a protected path, or a folder holding one, raises
`ApprovalRequired` before anything changes (EVD-AI-01); the root itself can be
neither moved nor deleted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path, PurePath

from pydantic import Field

from gbr_node.checkpoints.store import CheckpointStore, keeping
from gbr_node.errors import ApprovalRequired, SecurityViolation, ToolError
from gbr_node.sandbox import Resolved, Sandbox
from gbr_node.tools.base import Params, Tool, ToolResult, change_owner
from gbr_node.tools.rootlock import root_lock

MAX_LIST_ENTRIES = 500
PRIVATE_INSIDE = "holds the node's own state or one of the person's secrets"
SKIPPED_FOLDERS = frozenset({".git"})


def _join(folder: str, name: str) -> str:
    return name if folder == "." else f"{folder}/{name}"


class MovePathParams(Params):
    """Arguments of move_path."""

    source: str = Field(description="File or folder to move, relative to the project root.")
    destination: str = Field(
        description="Its new path (not a folder to move it into); must not exist yet."
    )


class DeletePathParams(Params):
    """Arguments of delete_path."""

    path: str = Field(description="File or folder to delete (folders with their contents).")


class ListDirParams(Params):
    """Arguments of list_dir."""

    path: str = Field(".", description="Folder to list, relative to the project root.")
    depth: int = Field(1, ge=1, le=20, description="How many levels of subfolders to show.")


class TreeTools:
    """Handlers of the folder tools, bound to one sandbox."""

    def __init__(self, sandbox: Sandbox, checkpoints: CheckpointStore | None = None):
        self._sandbox = sandbox
        self._changes = root_lock(sandbox.root)
        self._checkpoints = checkpoints

    def _keeping(self, relatives: list[str]) -> contextlib.AbstractContextManager[None]:
        """Checkpoint `relatives` (files, or folders: their files) around a change."""
        return keeping(self._checkpoints, change_owner, relatives)

    def _entry(self, path: str) -> tuple[Resolved, Path, str]:
        """The checked path, the filesystem entry to act on (the link itself when
        the last component is a symlink) and its root-relative name."""
        where = self._sandbox.resolve(path)
        lexical_path = PurePath(path)
        name = lexical_path.name
        if name not in ("", "..") and lexical_path != self._sandbox.root:
            parent = self._sandbox.resolve(str(lexical_path.parent))
            lexical = parent.path / name
            if lexical.is_symlink():
                return where, lexical, _join(parent.relative, name)
        return where, where.path, where.relative

    def _protected_in(self, where: Resolved, target: Path) -> list[str]:
        """Protected paths the change would touch; SecurityViolation when the folder
        holds a private one (GBR-PRIV-01: refused outright, never an approval)."""
        if target.is_dir() and not target.is_symlink():
            hidden = self._sandbox.private_under(target)
            if hidden:
                raise SecurityViolation(PRIVATE_INSIDE, where.relative)
        if where.protected:
            return [where.relative]
        if target.is_dir() and not target.is_symlink():
            return self._sandbox.protected_under(target)
        return []

    def move_path(self, params: MovePathParams) -> ToolResult:
        """Rename a file, folder or symlink inside the root; creates missing parents.

        Raises ApprovalRequired when the source, the destination, or any path
        the move would create or remove is protected (nothing moved);
        ToolError for the root, a missing source, an existing destination, or
        an OS failure; SecurityViolation for paths outside the root.
        """
        src_where, src, src_rel = self._entry(params.source)
        dst_where, dst, dst_rel = self._entry(params.destination)
        if src_rel == ".":
            raise ToolError("refusing to move the project root")
        if not os.path.lexists(src):
            raise ToolError(f"no such file or folder: {src_rel}")
        touched = self._protected_in(src_where, src)
        if dst_where.protected:
            touched.append(dst_rel)
        elif src.is_dir() and not src.is_symlink():
            touched += self._protected_after_move(src, dst_rel)
        if touched:
            detail = {"destination": dst_rel, "protected": sorted(set(touched))}
            raise ApprovalRequired("move_path", src_rel, str(src), detail=detail)
        if os.path.lexists(dst) and not os.path.samestat(os.lstat(src), os.lstat(dst)):
            raise ToolError(f"{dst_rel} already exists; delete it first or pick another name")
        try:
            with self._changes.shared(), self._keeping([src_rel, dst_rel]):
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.rename(src, dst)
        except OSError as exc:
            raise ToolError(f"cannot move {src_rel} to {dst_rel}: {exc.strerror or exc}") from exc
        return ToolResult.text(f"moved {src_rel} to {dst_rel}")

    def _protected_after_move(self, folder: Path, dst_rel: str) -> list[str]:
        """Root-relative paths a folder's entries would get that are protected."""
        found = []
        for dirpath, dirnames, filenames in os.walk(folder):
            below = os.path.relpath(dirpath, folder)
            for name in (*dirnames, *filenames):
                moved = dst_rel + "/" + (name if below == "." else f"{below}/{name}")
                if self._sandbox.resolve(moved).protected:
                    found.append(moved)
        return found

    def delete_path(self, params: DeletePathParams) -> ToolResult:
        """Delete a file, a symlink (not its target) or a folder with its contents.

        Raises ApprovalRequired when the path is protected or a folder holding
        a protected path (nothing deleted); ToolError for the root, a missing
        path or an OS failure; SecurityViolation for paths outside the root.
        """
        where, target, rel = self._entry(params.path)
        if rel == ".":
            raise ToolError("refusing to delete the project root")
        if not os.path.lexists(target):
            raise ToolError(f"no such file or folder: {rel}")
        touched = self._protected_in(where, target)
        if touched:
            raise ApprovalRequired("delete_path", rel, str(target), detail={"protected": touched})
        try:
            with self._changes.shared(), self._keeping([rel]):
                if target.is_dir() and not target.is_symlink():
                    count = sum(len(d) + len(f) for _, d, f in os.walk(target))
                    shutil.rmtree(target)
                    return ToolResult.text(f"deleted folder {rel} and {count} entries in it")
                os.unlink(target)
        except OSError as exc:
            raise ToolError(f"cannot delete {rel}: {exc.strerror or exc}") from exc
        return ToolResult.text(f"deleted {rel}")

    def list_dir(self, params: ListDirParams) -> ToolResult:
        """Root-relative entries below a folder, `depth` levels deep, sorted.

        Folders end in "/", symlinks in "@" (not entered), files show their
        size in bytes; `.git` is skipped. At most MAX_LIST_ENTRIES are shown
        and the answer says how many were cut. Raises ToolError when the path
        is not a folder, SecurityViolation when outside the root.
        """
        where = self._sandbox.resolve(params.path)
        if not where.path.is_dir():
            raise ToolError(f"{where.relative} is not a folder")
        lines: list[str] = []
        cut = self._walk(where.path, where.relative, params.depth, lines)
        header = f"{where.relative}/ (depth {params.depth}){_tally(lines)}"
        body = lines or ["(empty)"]
        if cut:
            body.append(f"[{cut} more entries not shown; list a subfolder or use a smaller depth]")
        return ToolResult.text("\n".join([header, *body]))

    def _walk(self, folder: Path, rel: str, depth: int, lines: list[str]) -> int:
        """Append entries to `lines` up to the cap; return how many were cut."""
        cut = 0
        try:
            with os.scandir(folder) as found:
                entries = sorted(found, key=lambda e: e.name)
        except OSError as exc:
            lines.append(f"{rel}/ (cannot list: {exc.strerror or exc})")
            return 0
        for entry in entries:
            if entry.name in SKIPPED_FOLDERS or self._sandbox.hidden(entry.path):
                continue
            name = _join(rel, entry.name)
            if len(lines) >= MAX_LIST_ENTRIES:
                cut += 1
            elif entry.is_symlink():
                lines.append(name + "@")
            elif entry.is_dir():
                lines.append(name + "/")
            else:
                lines.append(f"{name} ({entry.stat(follow_symlinks=False).st_size} bytes)")
            if depth > 1 and entry.is_dir(follow_symlinks=False):
                cut += self._walk(Path(entry.path), name, depth - 1, lines)
        return cut


def _tally(lines: list[str]) -> str:
    """ ": 3 files, 1 folder" for the entries `lines` shows ("" when none): a tiny model
    asked how many files a folder holds answers from the header, it does not count
    (issue 15)."""
    kinds = {"file": 0, "folder": 0, "link": 0}
    for line in lines:
        kind = "folder" if line.endswith("/") else "link" if line.endswith("@") else "file"
        kinds[kind] += 1
    counts = [f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in kinds.items() if n]
    return ": " + ", ".join(counts) if counts else ""


def tree_tools(sandbox: Sandbox, checkpoints: CheckpointStore | None = None) -> list[Tool]:
    """`move_path`, `delete_path` and `list_dir`, bound to `sandbox`; moves and deletes
    are checkpointed in `checkpoints` first (GBR-UNDO-01)."""
    handlers = TreeTools(sandbox, checkpoints)
    return [
        Tool(
            "move_path",
            "Move or rename a file or folder inside the project. The destination is the new "
            "path and must not exist. Protected files need the operator's approval.",
            MovePathParams,
            handlers.move_path,
        ),
        Tool(
            "delete_path",
            "Delete a whole file, or a folder with everything in it, from the disk (to "
            "remove lines from a file, edit it instead). Protected files, and folders "
            "holding them, need the operator's approval.",
            DeletePathParams,
            handlers.delete_path,
        ),
        Tool(
            "list_dir",
            "List files and folders under a project folder (paths relative to the project "
            "root; folders end in /, symlinks in @). Skips .git.",
            ListDirParams,
            handlers.list_dir,
        ),
    ]
