"""Which Python distributions an environment holds, read from disk (issue 18).

An environment is given as a virtual environment folder (one with
`pyvenv.cfg`), a `site-packages` folder, or a Python interpreter; the node's
own interpreter is the fallback. Nothing of the environment is imported or
run, except that an interpreter given by path is asked once, with `-I -S`
(no site hooks, no `.pth` files), where its site-packages folders are.

A distribution is a `*.dist-info` folder: its name and version from
`METADATA`, its source files (`.py`, `.pyi`) from `RECORD`, and a fingerprint
that changes when `RECORD` does (any install, upgrade or uninstall rewrites
it). An editable install (PEP 660) is read from the folders its `.pth` file or
finder module names, and its fingerprint covers those files' sizes and times.

What the index may read (GBR-PRIV-01): a folder inside the allowed root may
have been written by a peer, so an environment must lie inside the root (or
the project folder) or be the node's own interpreter's; every file read must
resolve (symlinks followed) inside its own site-packages folder; editable
installs are followed only for the node's own interpreter outside the root
(a planted `.pth`, finder or `direct_url.json` names any folder it likes).
Anything else is skipped with one logged line, never indexed, never shown.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import subprocess
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gbr_node.errors import LibraryError
from gbr_node.library.words import normalise

SOURCE_SUFFIXES = (".py", ".pyi")
MAX_EDITABLE_FILES = 20_000
SKIPPED_DIRS = frozenset(
    {"__pycache__", "node_modules", "site-packages", "build", "dist", ".git", ".venv"}
)
INTERPRETER_TIMEOUT_S = 10.0
log = logging.getLogger("gbr_node.library")
_SITE_QUERY = (
    "import json, sysconfig; "
    "print(json.dumps([sysconfig.get_path('purelib'), sysconfig.get_path('platlib')]))"
)


@dataclass(frozen=True)
class Installed:
    """A distribution seen in a site folder, before it is read: its
    `*.dist-info` folder and a `fingerprint` that changes with its `RECORD`
    (or, for an editable install, with its source files).
    A package of an extra source folder comes already read, as `source`; an
    editable install knows the folder its sources are in (`base`)."""

    dist_info: Path
    site: Path
    fingerprint: str
    editable: bool
    source: Distribution | None = None
    base: Path | None = None


@dataclass(frozen=True)
class Distribution:
    """One installed distribution, read.

    `files` are its source files as paths relative to `base` (what hits show
    and `read_library` accepts); `key` is the normalised name (PEP 503).
    """

    name: str
    version: str
    base: Path
    files: tuple[str, ...]

    @property
    def key(self) -> str:
        return normalise(self.name)


def own_sites() -> list[Path]:
    """The node's own interpreter's site-packages folders, resolved."""
    paths = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    return [Path(os.path.realpath(p)) for p in _existing(paths)]


def inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """True when `path` resolves (symlinks followed) to `folder`'s resolved self or below."""
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def site_dirs(spec: str | None, project_dir: Path, root: Path | None = None) -> list[Path]:
    """The site-packages folders of one environment spec (None: the default).

    The default is `project_dir/.venv` when it is a virtual environment, else
    the node's own interpreter. Raises LibraryError naming the spec when
    it is none of a venv folder, a site-packages folder or an interpreter,
    or when a folder it gives lies outside `root` and `project_dir` and is
    not the node's own interpreter's (GBR-PRIV-01).
    """
    found = _site_dirs(spec, project_dir)
    own = own_sites()
    for site in found:
        if Path(os.path.realpath(site)) in own or inside(site, project_dir):
            continue
        if root is None or not inside(site, root):
            raise LibraryError(
                f"[library] environments: {spec!r} ({site}) lies outside the allowed root "
                "and is not the node's own interpreter; not read"
            )
    return found


def trusted_site(site: Path, root: Path | None) -> bool:
    """True when `site` is the node's own interpreter's and lies outside `root`: only
    there are editable installs followed (GBR-PRIV-01)."""
    real = Path(os.path.realpath(site))
    return real in own_sites() and (root is None or not inside(real, root))


def _site_dirs(spec: str | None, project_dir: Path) -> list[Path]:
    if spec is None:
        venv = project_dir / ".venv"
        if (venv / "pyvenv.cfg").is_file():
            return _venv_sites(venv)
        paths = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
        return _existing(paths)
    path = (project_dir / os.path.expanduser(spec)).absolute()
    if (path / "pyvenv.cfg").is_file():
        return _venv_sites(path)
    if path.is_dir():
        return [path]
    if path.is_file() and os.access(path, os.X_OK):
        return _interpreter_sites(path)
    raise LibraryError(
        f"[library] environments: {spec!r} is not a virtual environment, a site-packages "
        "folder or a Python interpreter"
    )


def _existing(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path and Path(path).is_dir() and Path(path) not in found:
            found.append(Path(path))
    return found


def _venv_sites(venv: Path) -> list[Path]:
    found = sorted(venv.glob("lib/python*/site-packages")) + sorted(
        venv.glob("lib64/python*/site-packages")
    )
    found.append(venv / "Lib" / "site-packages")  # Windows layout
    return _existing([str(p) for p in found])


def _interpreter_sites(python: Path) -> list[Path]:
    try:
        out = subprocess.run(
            [str(python), "-I", "-S", "-c", _SITE_QUERY],
            capture_output=True,
            text=True,
            timeout=INTERPRETER_TIMEOUT_S,
            check=True,
        ).stdout
        return _existing(json.loads(out))
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise LibraryError(f"[library] environments: cannot ask {python}: {exc}") from exc


def _metadata(dist_info: Path) -> tuple[str, str]:
    name = version = ""
    try:
        with open(dist_info / "METADATA", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                if key.lower() == "name" and not name:
                    name = value.strip()
                elif key.lower() == "version" and not version:
                    version = value.strip()
                if name and version:
                    break
    except OSError:
        pass
    if not name:  # foo_bar-1.0.dist-info
        stem = dist_info.name[: -len(".dist-info")]
        name, _, version = stem.partition("-")
    return name, version


def _record_files(dist_info: Path, site: Path) -> list[str]:
    try:
        text = (dist_info / "RECORD").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    files = []
    outside = 0
    for line in text.splitlines():
        path = line.rsplit(",", 2)[0] if line.count(",") >= 2 else line.split(",")[0]
        path = path.strip('"')
        kept = path.endswith(SOURCE_SUFFIXES) and not path.startswith(("..", "/"))
        if kept and ".dist-info/" not in path and "__editable__" not in path:
            if inside(site / path, site):
                files.append(path)
            else:
                outside += 1
    if outside:
        log.warning(
            "library: %s: %d files resolve outside %s (symlinks); skipped",
            dist_info.name,
            outside,
            site,
        )
    return files


def _editable_roots(dist_info: Path, site: Path) -> list[tuple[Path, str | None]]:
    """(folder, package) pairs an editable install maps: a finder module's MAPPING
    gives `{package: folder}`; a plain `.pth` line gives a folder of packages."""
    roots: list[tuple[Path, str | None]] = []
    try:
        record = (dist_info / "RECORD").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return roots
    for line in record.splitlines():
        rel = line.split(",")[0]
        if rel.endswith(".pth"):
            try:
                pth = (site / rel).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for entry in pth.splitlines():
                entry = entry.strip()
                if entry and not entry.startswith(("#", "import ")) and Path(entry).is_dir():
                    roots.append((Path(entry), None))
        elif rel.endswith("_finder.py") and "__editable__" in rel:
            roots.extend(_finder_mapping(site / rel))
    return roots


def _finder_mapping(finder: Path) -> list[tuple[Path, str | None]]:
    try:
        tree = ast.parse(finder.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return []
    for node in tree.body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and target.id == "MAPPING" and value is not None:
            try:
                mapping = ast.literal_eval(value)
            except ValueError:
                return []
            return [(Path(folder), package) for package, folder in mapping.items()]
    return []


def walk_files(
    root: Path, suffixes: tuple[str, ...], skipped: frozenset[str], limit: int
) -> Iterator[os.DirEntry[str]]:
    """Regular files under `root` whose names end with one of `suffixes`, at most
    `limit`; symlinks are not followed, hidden folders and `skipped` ones not entered."""
    stack = [root]
    count = 0
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if not entry.name.startswith(".") and entry.name not in skipped:
                    stack.append(Path(entry.path))
            elif entry.name.endswith(suffixes) and entry.is_file(follow_symlinks=False):
                count += 1
                if count > limit:
                    return
                yield entry


def _editable_files(dist_info: Path, site: Path) -> tuple[Path, list[str], str] | None:
    """(base folder, source files relative to it, fingerprint) of an editable install."""
    roots = _editable_roots(dist_info, site)
    if not roots:
        return None
    folder, package = roots[0]
    base = folder.parent if package else folder
    digest = hashlib.blake2b(digest_size=16)
    files = []
    for root, package in roots:
        if (root.parent if package else root) != base:
            continue  # one base folder per distribution; the rest are rare
        for entry in walk_files(root, SOURCE_SUFFIXES, SKIPPED_DIRS, MAX_EDITABLE_FILES):
            try:
                st = entry.stat()
            except OSError:
                continue
            rel = Path(entry.path).relative_to(base).as_posix()
            files.append(rel)
            digest.update(f"{rel}:{st.st_size}:{st.st_mtime_ns};".encode())
    return base, files, "e" + digest.hexdigest()


def _is_editable(dist_info: Path) -> bool:
    try:
        info = json.loads((dist_info / "direct_url.json").read_text(encoding="utf-8"))
        return bool(info["dir_info"]["editable"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def scan_site(site: Path, *, trusted: bool = True) -> list[Installed]:
    """The distributions in one site-packages folder, cheaply: one `scandir` and a
    `stat` of each `RECORD` (an editable install also walks its sources). A
    `*.dist-info` folder without a readable `RECORD` (half-written) is skipped;
    so is an editable install unless the site is `trusted` (`trusted_site`)."""
    found = []
    try:
        entries = [e for e in os.scandir(site) if e.name.endswith(".dist-info") and e.is_dir()]
    except OSError:
        return []
    for entry in sorted(entries, key=lambda e: e.name):
        dist_info = Path(entry.path)
        try:
            st = (dist_info / "RECORD").stat()
        except OSError:
            continue
        fingerprint = f"{dist_info.name}:{st.st_size}:{st.st_mtime_ns}"
        editable = (dist_info / "direct_url.json").is_file() and _is_editable(dist_info)
        if editable and not trusted:
            log.warning(
                "library: %s in %s is an editable install, whose sources may lie anywhere; "
                "not indexed (only the node's own interpreter's are)",
                dist_info.name,
                site,
            )
            continue
        if editable:
            read = _editable_files(dist_info, site)
            if read is None:
                continue
            fingerprint += ":" + read[2]
            found.append(Installed(dist_info, site, fingerprint, True, base=read[0]))
            continue
        found.append(Installed(dist_info, site, fingerprint, False))
    return found


def read_distribution(installed: Installed) -> Distribution:
    """Name, version (METADATA) and source files (RECORD, or an editable
    install's folders) of a distribution found by `scan_site`."""
    name, version = _metadata(installed.dist_info)
    if installed.editable:
        read = _editable_files(installed.dist_info, installed.site)
        if read is not None:
            return Distribution(name, version, read[0], tuple(read[1]))
    files = _record_files(installed.dist_info, installed.site)
    return Distribution(name, version, installed.site, tuple(files))
