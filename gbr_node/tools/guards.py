"""The argument and environment guards of `run_command` (issue 2, "Local tools").

- `refused_argument`: built-in refusals of well-known code-injection flags,
  applied whatever the profile says (`BUILTIN_DENY`, `GIT_SUBCOMMAND_DENY`).
- `resolve_path_args`: every argument that names a path must stay inside the
  root (UBQ-DEV-01, UNW-DEV-01).
- `scrubbed_environment`: the node's environment without secrets and without
  variables that make programs load code.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

from gbr_node.errors import SecurityViolation
from gbr_node.sandbox import Sandbox

_SHELL = (("-c",), "c")

# program kind -> (prefixes refused anywhere in argv[1:], letters refused inside a
# short-option cluster such as `-Ic` or `-ne`). A prefix refuses the argument
# itself and anything starting with it (`-c` refuses `-cprint(1)`).
BUILTIN_DENY: dict[str, tuple[tuple[str, ...], str]] = {
    "git": (
        (
            "-c",  # -c name=value sets any config, e.g. core.pager, core.hooksPath
            "--config-env",
            "--exec",  # also --exec-path (helper lookup), archive/push --exec
            "--upload-pack",
            "--receive-pack",
            "--template",  # clone/init --template copies hooks in
            "--extcmd",  # difftool --extcmd
        ),
        "",
    ),
    "find": (("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fls"), ""),
    "python": _SHELL,
    "sh": _SHELL,
    "bash": _SHELL,
    "dash": _SHELL,
    "zsh": _SHELL,
    "ksh": _SHELL,
    "node": (("-e", "--eval", "-p", "--print", "-r", "--require", "--import", "--loader"), "epr"),
    "perl": (("-e", "-E"), "eE"),
    "ruby": (("-e",), "e"),
}

# git subcommand -> refusals after it, or None when the subcommand is refused
# outright (`git config` could set core.hooksPath and run any hook).
GIT_SUBCOMMAND_DENY: dict[str, tuple[tuple[str, ...], str] | None] = {
    "config": None,
    "filter-branch": None,
    "rebase": (("-x",), "x"),  # rebase -x CMD runs CMD
    "difftool": (("-x",), "x"),
    "clone": (("-u",), "u"),  # clone -u is --upload-pack
    "ls-remote": (("-u",), "u"),
    "submodule": (("foreach",), ""),
    "bisect": (("run",), ""),
}

_GIT_OPTIONS_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})


def _git_subcommand(args: Sequence[str]) -> str | None:
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _GIT_OPTIONS_WITH_VALUE:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def _first_refused(args: Iterable[str], prefixes: tuple[str, ...], letters: str) -> str | None:
    for arg in args:
        if any(arg == p or arg.startswith(p) for p in prefixes):
            return arg
        cluster = re.match(r"-([A-Za-z]+)", arg) if not arg.startswith("--") else None
        if cluster and letters and any(c in letters for c in cluster.group(1)):
            return arg
    return None


def refused_argument(kinds: Iterable[str], args: Sequence[str]) -> str | None:
    """The first argument of `args` (argv[1:]) that the built-in list refuses
    for a program of any of `kinds` (normalised names such as "git",
    "python"), or None when nothing is refused. Pure."""
    for kind in kinds:
        if kind in BUILTIN_DENY:
            refused = _first_refused(args, *BUILTIN_DENY[kind])
            if refused is not None:
                return refused
        if kind == "git":
            sub = _git_subcommand(args)
            if sub in GIT_SUBCOMMAND_DENY:
                rule = GIT_SUBCOMMAND_DENY[sub]
                if rule is None:
                    return sub
                refused = _first_refused(args[args.index(sub) + 1 :], *rule)
                if refused is not None:
                    return refused
    return None


def _path_candidates(arg: str) -> Iterator[str]:
    """The parts of one argument that may be paths: the argument itself, the
    value of `--opt=VALUE` / `NAME=VALUE`, the value glued to a short option
    (`-I/etc`), and the path of a `file://` URL."""
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
    the sandbox; other relative parts are resolved when they name an existing
    entry (a symlink planted in the root that leads out is refused). Each is
    checked lexically and as the kernel will follow it (symlinks first, then
    `..`: `link/../x` is where the link points, one folder up). Relative
    parts are taken from `cwd_relative`, the root-relative working folder.

    Raises:
        SecurityViolation: a part resolves outside the root (UBQ-DEV-01,
            UNW-DEV-01); `subject` is the whole argument.
    """
    for arg in args:
        for part in _path_candidates(arg):
            if not part:
                continue
            joined = part if os.path.isabs(part) else os.path.join(cwd_relative, part)
            risky = os.path.isabs(part) or ".." in part.split("/")
            if risky or os.path.lexists(os.path.join(sandbox.root, joined)):
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


_SECRET = re.compile(r"(_API_KEY|_KEY|_TOKEN)$|SECRET|PASSWORD|PASSWD|CREDENTIAL|^AWS_")
_INJECTION_PREFIXES = ("LD_", "DYLD_", "PYTHON", "GIT_", "BASH_FUNC_")
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
    makes programs load code (`LD_*`, `DYLD_*`, `PYTHON*`, `GIT_*`,
    `BASH_ENV`, `ENV`, `NODE_OPTIONS`, `PERL5OPT`, `RUBYOPT`, ...). The
    stale `PWD`/`OLDPWD` go too. Case-insensitive."""
    upper = name.upper()
    return (
        bool(_SECRET.search(upper))
        or upper.startswith(_INJECTION_PREFIXES)
        or upper in _INJECTION_NAMES
    )


def scrubbed_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of `environ` without the variables `is_scrubbed` names. Pure."""
    return {name: value for name, value in environ.items() if not is_scrubbed(name)}
