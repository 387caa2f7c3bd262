"""The path and environment guards of `run_command` (issue 2, "Local tools").

- `resolve_path_args`: every argument that names a path must stay inside the
  root (UBQ-DEV-01, UNW-DEV-01), and must not be a hard-linked file unless
  the profile allows them (issue 12).
- `refuse_links_out`: no archive is extracted while a symlink in the root
  leads out of it (tar and unzip would write through it).
- `scrubbed_environment`: the node's environment without secrets and without
  variables that make programs load code or read settings that run programs.

The built-in refusals of flags are `tools.flags`; git's own doors, `tools.git`.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence

from gbr_node.errors import SecurityViolation
from gbr_node.sandbox import Sandbox


def _path_candidates(arg: str, operand: bool) -> Iterator[str]:
    """The parts of one argument that may be paths: the argument itself, the
    value of `--opt=VALUE` / `NAME=VALUE`, the value glued to a short option
    (`-I/etc`), and the path of a `file://` URL. An `operand` (after `--`) is
    a path as it stands, even when it starts with `-`."""
    if operand:
        yield arg
    if arg.startswith("file://"):
        yield arg[len("file://") :]
        return
    if "=" in arg:
        yield arg.split("=", 1)[1]
    if arg.startswith("-"):
        if not arg.startswith("--") and len(arg) > 2:
            yield arg[2:]
        return
    yield arg


def resolve_path_args(sandbox: Sandbox, cwd_relative: str, args: Sequence[str]) -> None:
    """Check every path-like part of `args` against the sandbox.

    Absolute paths and paths with a `..` component are always resolved through
    the sandbox; other relative parts are resolved when their first name is an
    existing entry (a symlink planted in the root that leads out is refused,
    and so is a new file under one: `cp a sub/link-out/new`). Each is
    checked lexically and as the kernel will follow it (symlinks first, then
    `..`: `link/../x` is where the link points, one folder up). Relative
    parts are taken from `cwd_relative`, the root-relative working folder.
    After `--` every argument is a path as it stands (`-x` too).

    Raises:
        SecurityViolation: a part resolves outside the root (UBQ-DEV-01,
            UNW-DEV-01), or names a regular file with more than one hard link
            and the sandbox does not allow them; `subject` is the whole argument.
    """
    operands = False
    for arg in args:
        if arg == "--" and not operands:
            operands = True
            continue
        for part in _path_candidates(arg, operands):
            if not part:
                continue
            joined = part if os.path.isabs(part) else os.path.join(cwd_relative, part)
            names = [name for name in part.split("/") if name not in ("", ".")]
            risky = os.path.isabs(part) or ".." in names
            first = os.path.join(sandbox.root, cwd_relative, names[0]) if names else None
            if risky or (first is not None and os.path.lexists(first)):
                try:
                    sandbox.resolve(joined)
                    # The program gets the text as is, and the kernel follows a symlink
                    # before the `..` after it ("link/../x" climbs out of where the link
                    # points), which the lexical check above does not: resolve physically.
                    where = sandbox.resolve(os.path.realpath(os.path.join(sandbox.root, joined)))
                    with contextlib.suppress(OSError):
                        sandbox.refuse_hard_link(os.stat(where.path), arg)
                except SecurityViolation as exc:
                    raise SecurityViolation(f"argument refused: {exc.reason}", arg) from exc


def _symlinks(top: str) -> Iterator[str]:
    """Every symlink under folder `top` (none followed), from the directory entries'
    own types: no extra system call per file."""
    folders = [top]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_symlink():
                    yield entry.path
                elif entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)


def refuse_links_out(sandbox: Sandbox, program: str) -> None:
    """Refuse to let `program` extract an archive while the root holds a symlink
    that leads out of it: tar and unzip write a member `link/file` through the
    link, and an archive may have planted one (`link -> /home/me`) the call before.

    Raises:
        SecurityViolation: naming the first such symlink (root-relative).
    """
    for path in _symlinks(str(sandbox.root)):
        relative = os.path.relpath(path, sandbox.root)
        try:
            sandbox.resolve(relative)
        except SecurityViolation as exc:
            raise SecurityViolation(
                f"{relative} is a symlink leading out of the allowed root, and {program} "
                "would write through it while extracting; extracting is refused while "
                "it is there",
                relative,
            ) from exc


_SECRET = re.compile(r"(_API_KEY|_KEY|_TOKEN)$|SECRET|PASSWORD|PASSWD|CREDENTIAL|^AWS_")
_INJECTION_PREFIXES = ("LD_", "DYLD_", "PYTHON", "GIT_", "BASH_FUNC_", "NPM_CONFIG_")
_INJECTION_NAMES = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "IFS",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "PERL5DB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "CLASSPATH",
        "GCONV_PATH",
        "PYTEST_ADDOPTS",  # -p PLUGIN loads code
        "PYTEST_PLUGINS",
        "MAKEFLAGS",
        "MFLAGS",
        "GNUMAKEFLAGS",
        "MAKEFILES",
        "TAR_OPTIONS",  # --to-command, --use-compress-program
        "RIPGREP_CONFIG_PATH",  # a config file of flags: --pre runs a program
        "GREP_OPTIONS",
        "LESSOPEN",
        "LESSCLOSE",
        "SSH_ASKPASS",
        "GOFLAGS",  # -toolexec runs a program
        "RUSTC_WRAPPER",
        "SSH_AUTH_SOCK",
        "GPG_AGENT_INFO",
        "OLDPWD",
        "PWD",
    }
)


def is_scrubbed(name: str) -> bool:
    """True when environment variable `name` must not reach a command: a secret
    (`*_API_KEY`, `*_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*`,
    `*CREDENTIAL*`, `AWS_*`, the SSH/GPG agent sockets) or a variable that
    makes programs load code or read flags that run programs (`LD_*`,
    `DYLD_*`, `PYTHON*`, `GIT_*`, `NPM_CONFIG_*`, `BASH_ENV`, `ENV`,
    `NODE_OPTIONS`, `PERL5OPT`, `RUBYOPT`, `PYTEST_ADDOPTS`, `MAKEFLAGS`,
    `TAR_OPTIONS`, `RIPGREP_CONFIG_PATH`, `LESSOPEN`, `SSH_ASKPASS`, ...).
    The stale `PWD`/`OLDPWD` go too. Case-insensitive."""
    upper = name.upper()
    return (
        bool(_SECRET.search(upper))
        or upper.startswith(_INJECTION_PREFIXES)
        or upper in _INJECTION_NAMES
    )


def scrubbed_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of `environ` without the variables `is_scrubbed` names. Pure."""
    return {name: value for name, value in environ.items() if not is_scrubbed(name)}
