"""Find, read and resolve environment profiles `.gbr_envs/NAME.toml` (UBQ-AI-02).

The I/O edge of `config/`: it reads the profile file (and the prompt file it
may point to), resolves `allowed_root` against the project folder, and hands
text to the pure `config.validate`. Every failure is a `ProfileError` naming
the file, the line where one can be found, and the key; see
`config.validate` for how several problems are reported at once.
`load_network` reads a profile's `[node]` and `[peers]` only, for `gbr-node
call`; this module does not import `config.profile`'s models itself, so that
call never builds them (issue 35).

Profiles are TOML; JSON (`NAME.json`) is also read when no `NAME.toml`
exists (DESIGN.md, "profiles are TOML (JSON may also be read)").

A profile file, and its `system_prompt_file`, must resolve inside the project
folder: one that is, or goes through, a symlink leading out of it is refused
like a broken file (GBR-FAIL-01), so that a link planted in place of a
profile cannot swap in rules from elsewhere. Each must be a regular file of at
most `MAX_SOURCE_BYTES` (`read_source`: a FIFO planted in its place would
block every read). The files a profile was read from are protected in the
sandbox it puts in force (`build_sandbox`), wherever they are in the root:
a profile that is a symlink to `profiles/dev.toml`, or a prompt file, would
otherwise be the agent's to rewrite. A leading UTF-8 BOM is dropped; line
ends may be CRLF.
"""

from __future__ import annotations

import errno
import os
import pathlib
import stat
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from gbr_node.config.changes import content_digest
from gbr_node.config.keylines import key_line
from gbr_node.config.network import NetworkSections
from gbr_node.config.render import to_toml
from gbr_node.config.validate import validate_network, validate_text
from gbr_node.errors import ProfileError
from gbr_node.sandbox import Sandbox
from gbr_node.sandbox.private import NODE_STATE, PROFILE_DIR

if TYPE_CHECKING:
    from gbr_node.config.profile import Profile

_SUFFIXES = (".toml", ".json")
MAX_SOURCE_BYTES = 1024 * 1024
"""Largest profile or prompt file read, in bytes."""
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class LoadedProfile:
    """A validated profile together with what it resolved to on disk.

    `root` is `allowed_root` made absolute against `project_dir` and resolved
    (symlinks followed); `root_aliases` are the other absolute spellings of
    that folder the profile was reached by (through a symlinked project folder
    or `allowed_root`), which the sandbox admits too; `project_spelling` is
    the project folder as given (absolute, symlinks kept), what a reload
    starts from again. `system_prompt` is the effective prompt (the text of
    `system_prompt_file` when that is set); `source_files` are the profile file
    and every file it points to, which the hot-reload watcher polls
    (ADR-0012a), and `source_digests` the digests (`changes.content_digest`)
    of the bytes that were read from each.
    """

    name: str
    file: pathlib.Path
    project_dir: pathlib.Path
    root: pathlib.Path
    profile: Profile
    system_prompt: str
    source_files: tuple[pathlib.Path, ...]
    source_digests: tuple[bytes, ...]
    root_aliases: tuple[pathlib.Path, ...]
    project_spelling: pathlib.Path


def build_sandbox(loaded: LoadedProfile) -> Sandbox:
    """The sandbox a loaded profile puts in force: its root (admitting the
    spellings in `root_aliases`), its protected files and the files it was read
    from (wherever a symlinked profile or a prompt file lies in the root), and
    its hard-link rule (`[tools] allow_hardlinks`). Private to every tool
    (GBR-PRIV-01): the project's `.gbr/` and `[tools.run_command] secret_paths`
    (they bind the file tools too); to peers and MCP clients: the project's
    `.gbr_envs/` and the files the profile was read from. Raises as `Sandbox`."""
    sources = []
    for source in loaded.source_files:
        real = pathlib.Path(os.path.realpath(source))
        if real.is_relative_to(loaded.root) and real != loaded.root:
            sources.append(_literal_pattern(real.relative_to(loaded.root).as_posix()))
    project = os.path.realpath(loaded.project_dir)
    return Sandbox(
        loaded.root,
        [*loaded.profile.protected_files, *sources],
        aliases=[str(alias) for alias in loaded.root_aliases],
        allow_hardlinks=loaded.profile.tools.allow_hardlinks,
        private=[
            os.path.join(project, NODE_STATE),
            *(os.path.expanduser(p) for p in loaded.profile.tools.run_command.secret_paths),
        ],
        remote_private=[
            os.path.join(project, PROFILE_DIR),
            *(os.path.realpath(source) for source in loaded.source_files),
        ],
    )


def _literal_pattern(relative: str) -> str:
    """A protected-file glob matching exactly `relative` (`*`, `?`, `[` escaped)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in relative)


def state_folder(project_dir: pathlib.Path) -> pathlib.Path:
    """The project's `.gbr/` (the node's own state), made if missing, with a
    `.gitignore` of `*` so that git never offers to commit it (issue 34)."""
    folder = project_dir / NODE_STATE
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# the node's own state (gbr-node): never committed\n*\n", "utf-8")
    return folder


def find_project_dir(start: pathlib.Path) -> pathlib.Path:
    """Nearest folder, `start` itself or an ancestor, that holds a `.gbr_envs/` folder.

    The search climbs the real (resolved) folders. The answer keeps the
    spelling of `start` (absolute, symlinks not resolved) when the same number
    of levels up that spelling names the same folder, so a project reached
    through a symlink keeps that name (paths spelled with it stay inside the
    root); otherwise it is the resolved folder. Returns `start` itself when
    no folder up to the filesystem root holds one. Never raises for a missing
    `.gbr_envs/`.
    """
    spelled = pathlib.Path(os.path.abspath(start))
    real = spelled.resolve()
    for depth, folder in enumerate((real, *real.parents)):
        if (folder / PROFILE_DIR).is_dir():
            return _same_spelling(spelled, depth, folder)
    return spelled


def _same_spelling(spelled: pathlib.Path, depth: int, real: pathlib.Path) -> pathlib.Path:
    """`spelled` climbed `depth` levels, if that names `real`; else `real`."""
    candidate = spelled
    for _ in range(depth):
        candidate = candidate.parent
    return candidate if os.path.realpath(candidate) == str(real) else real


def profile_path(project_dir: pathlib.Path, name: str) -> pathlib.Path:
    """Path of profile `name`: `project_dir/.gbr_envs/NAME.toml`, or `NAME.json`
    when only that exists. The file need not exist.

    Raises ProfileError when `name` is empty, holds a path separator or a NUL,
    or is only dots: a profile name never points outside `.gbr_envs/`.
    """
    if not name or name.strip(".") == "" or any(c in name for c in "/\\\x00"):
        raise ProfileError(
            f"invalid profile name {name!r}: use a plain name such as 'default', "
            "without '/' or '\\' and not made of dots only"
        )
    folder = project_dir / PROFILE_DIR
    toml_file, json_file = folder / f"{name}.toml", folder / f"{name}.json"
    if not toml_file.exists() and json_file.exists():
        return json_file
    return toml_file


def list_profiles(project_dir: pathlib.Path) -> list[str]:
    """Sorted names of the profiles (`*.toml`, `*.json`) in `project_dir/.gbr_envs/`.

    Empty when the folder is missing or unreadable.
    """
    try:
        entries = list((project_dir / PROFILE_DIR).iterdir())
    except OSError:
        return []
    return sorted({e.stem for e in entries if e.suffix in _SUFFIXES and e.is_file()})


def load_profile(project_dir: pathlib.Path, name: str = "default") -> LoadedProfile:
    """Read and validate profile `name` of `project_dir` (see `parse_profile`).

    Raises ProfileError when the name is invalid, the file is missing (the
    message lists the available profiles), unreadable or not UTF-8, or when
    `parse_profile` rejects it.
    """
    spelling = pathlib.Path(os.path.abspath(project_dir))
    path, text, digest = _read_profile(project_dir, name)
    fmt = "json" if path.suffix == ".json" else "toml"
    return parse_profile(
        text, file=str(path), project_dir=spelling, name=name, fmt=fmt, digest=digest
    )


def load_network(project_dir: pathlib.Path, name: str = "default") -> NetworkSections:
    """Read profile `name` of `project_dir` as `load_profile` does, and validate only its
    `[node]` and `[peers]` (`validate.validate_network`): for `gbr-node call`, which
    dials a peer by its alias and applies none of the profile's other rules, so a
    mistake in another section does not stop it (issue 35). Nothing is resolved
    against the project folder (`allowed_root`, `system_prompt_file`).

    Raises ProfileError as `load_profile` does for the file (a missing one, one
    that leads out of the project folder, unreadable, not UTF-8, not TOML/JSON,
    empty), and as `validate_network` does for the two sections.
    """
    path, text, _digest = _read_profile(project_dir, name)
    fmt = "json" if path.suffix == ".json" else "toml"
    return validate_network(text, file=str(path), fmt=fmt)


def _read_profile(project_dir: pathlib.Path, name: str) -> tuple[pathlib.Path, str, bytes]:
    """The file of profile `name` (inside the resolved `project_dir`), its text and the
    digest of its bytes (`_read_text`); ProfileError as `load_profile` says."""
    project_dir = project_dir.resolve()
    path = profile_path(project_dir, name)
    if not path.exists():
        available = list_profiles(project_dir)
        hint = (
            f"available profiles: {', '.join(available)}"
            if available
            else f"no profiles in {project_dir / PROFILE_DIR}; `gbr-node init` creates one"
        )
        raise ProfileError(f"profile {name!r} not found (no such file); {hint}", file=str(path))
    _refuse_outside(path, project_dir, file=str(path), key=None, line=None)
    text, digest = _read_text(path, file=str(path), key=None, line=None)
    return path, text, digest


def parse_profile(
    text: str,
    *,
    file: str,
    project_dir: pathlib.Path,
    name: str,
    fmt: str = "toml",
    digest: bytes | None = None,
) -> LoadedProfile:
    """Validate profile `text` (`fmt` "toml" or "json") and resolve it against `project_dir`.

    `file` names the profile in errors and in `source_files`; `digest` is the
    digest of the file's bytes as read (by default that of `text`). Reads
    `system_prompt_file` (UTF-8, relative to `project_dir`) when set, and
    checks that `allowed_root` (relative to `project_dir`; `~` expanded)
    exists and is a directory. `project_dir` may be spelled through a symlink:
    the spellings of the root it gives are kept as `root_aliases`.

    Raises ProfileError for syntax errors, invalid or unknown keys, both
    system_prompt and system_prompt_file set, an unreadable prompt file or
    one that resolves outside the project folder, or a root that is missing
    or not a directory.
    """
    spelling = pathlib.Path(os.path.abspath(project_dir))
    project_dir = project_dir.resolve()
    profile = validate_text(text, file=file, fmt=fmt)
    root_given = pathlib.Path(os.path.expanduser(profile.allowed_root))
    root = pathlib.Path(os.path.realpath(project_dir / root_given))
    if not root.is_dir():
        problem = "is not a directory" if root.exists() else "does not exist"
        raise ProfileError(
            f'allowed_root "{profile.allowed_root}" resolves to {root}, which {problem}',
            file=file,
            line=key_line(text, ("allowed_root",), fmt),
            key="allowed_root",
        )
    sources = [pathlib.Path(file)]
    digests = [content_digest(text.encode("utf-8")) if digest is None else digest]
    system_prompt = profile.system_prompt
    if profile.system_prompt_file is not None:
        prompt_path = project_dir / os.path.expanduser(profile.system_prompt_file)
        where = {"file": file, "key": "system_prompt_file"}
        line = key_line(text, ("system_prompt_file",), fmt)
        _refuse_outside(prompt_path, project_dir, line=line, **where)
        system_prompt, prompt_digest = _read_text(prompt_path, line=line, **where)
        sources.append(prompt_path)
        digests.append(prompt_digest)
    spellings = {pathlib.Path(os.path.abspath(at / root_given)) for at in (spelling, project_dir)}
    if root.is_relative_to(project_dir):
        spellings.add(spelling / root.relative_to(project_dir))
    return LoadedProfile(
        name=name,
        file=pathlib.Path(file),
        project_dir=project_dir,
        root=root,
        profile=profile,
        system_prompt=system_prompt,
        source_files=tuple(sources),
        source_digests=tuple(digests),
        root_aliases=tuple(sorted(a for a in spellings if a != root and a.resolve() == root)),
        project_spelling=spelling,
    )


def profile_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a profile document, for editors such as
    VS Code's TOML extensions (`gbr-node env schema`)."""
    from gbr_node.config.profile import Profile

    schema = Profile.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
        "title": "gbr-node environment profile (.gbr_envs/NAME.toml)",
    }


def render_effective(loaded: LoadedProfile) -> str:
    """The effective profile as TOML, every default filled in (`gbr-node env check`).

    Comment lines give where it came from and what paths resolved to; when the
    prompt comes from `system_prompt_file` its text is shown as comment lines.
    The uncommented part is a valid profile equal to `loaded.profile`.
    """
    data = loaded.profile.model_dump(mode="json")
    header = [
        f"# profile {loaded.name!r} from {loaded.file}",
        f"# project folder: {loaded.project_dir}",
        f"# allowed_root resolves to: {loaded.root}",
        "# .gbr_envs/**, .git/** and .gbr/** are always protected, whatever protected_files says",
    ]
    if loaded.profile.system_prompt_file is not None:
        del data["system_prompt"]
        header.append(f"# system_prompt, read from {loaded.source_files[-1]}:")
        header.extend(f"# | {line}" for line in loaded.system_prompt.splitlines())
    return "\n".join(header) + "\n\n" + to_toml(data)


def default_template() -> str:
    """Text of the commented default profile that `gbr-node init` writes
    (package data `gbr_node/data/default.toml`, identical to `.gbr_envs/default.toml`)."""
    return resources.files("gbr_node").joinpath("data/default.toml").read_text(encoding="utf-8")


def _refuse_outside(
    path: pathlib.Path, project_dir: pathlib.Path, *, file: str, key: str | None, line: int | None
) -> None:
    """ProfileError unless `path`, symlinks followed, lies inside `project_dir` (resolved)."""
    real = pathlib.Path(os.path.realpath(path))
    if not real.is_relative_to(project_dir):
        raise ProfileError(
            f"{path} resolves to {real}, outside the project folder {project_dir}; profile "
            "files must stay inside it (a symlink leading out is refused)",
            file=file,
            line=line,
            key=key,
        )


def read_source(path: pathlib.Path) -> bytes:
    """The bytes of a profile or prompt file: a regular file (symlinks followed) of at
    most MAX_SOURCE_BYTES. It is opened without blocking, so that a FIFO in its
    place never hangs a load or a watcher's poll.

    Raises:
        OSError: it cannot be opened or read, is no regular file (a FIFO, a
            folder, a device: `strerror` says which), or is larger.
    """
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else None
            raise OSError(errno.EINVAL, f"it is {kind or 'a special file'}, not a regular file")
        chunks, size = [], 0
        while chunk := os.read(fd, MAX_SOURCE_BYTES + 1 - size):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_SOURCE_BYTES:
                raise OSError(errno.EFBIG, f"it is larger than {MAX_SOURCE_BYTES} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_text(
    path: pathlib.Path, *, file: str, key: str | None, line: int | None
) -> tuple[str, bytes]:
    """The text of `path` (UTF-8, a leading BOM dropped, line ends made LF) and the
    digest of its bytes."""
    try:
        data = read_source(path)
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ProfileError(
            f"{path} is not UTF-8 text: {exc.reason}", file=file, line=line, key=key
        ) from exc
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        raise ProfileError(f"cannot read {path}: {reason}", file=file, line=line, key=key) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n"), content_digest(data)
