"""`run_command`: run an allow-listed program, without a shell, inside the root.

The rules (issue 2, "Local tools"; DESIGN.md, "Security model"):

- argv[0] must name an allow-list entry of `[tools.run_command]`. It runs as the
  absolute executable fixed when the registry was built: looked up on PATH once,
  skipping relative PATH entries and folders inside the root, so neither a file
  planted in the root nor a later change of PATH can stand in for it.
- A rule's `subcommands` restrict the subcommand (argv[1]; for git, the first
  argument after git's global options: `git -C sub status` runs `status`);
  its `deny_args` refuse arguments exactly, by prefix, and, for long options,
  by abbreviation (`--outp` for `--output`). On top of that, built-in
  refusals of flags that run programs or follow symlinks out of the root
  apply whatever the profile says (`tools.flags`; a program that follows
  symlinks by default, diff, gets the flag that stops it), and git runs with its
  program-running settings switched off (`tools.git`). Checks of flags stop
  at `--` (what follows is operands), except for find. They are a floor, not
  a guarantee: allowing an interpreter, a shell, a build tool or a launcher
  (python, pytest, make, npm, env, xargs, ...) allows arbitrary code inside
  the root, and such a program can also write protected files.
- Arguments that are absolute paths, `..` paths, `file://` URLs or the value of
  `--opt=VALUE`, and arguments naming an existing entry, are checked through the
  sandbox: anything outside the root raises `SecurityViolation` (UBQ-DEV-01,
  UNW-DEV-01), and so does a hard-linked file unless the profile allows them.
  For git they are also checked from the folders its `-C` options name. This
  is best effort: a program may still find paths by itself. No archive is
  extracted (tar, unzip) while a symlink in the root leads out of it.
- cwd is inside the root; the time limit and the output cap come from the
  profile; the environment is scrubbed of secrets and code-injection variables.
- git runs alone: no tool call changes the root between its config check and
  its end (`tools.rootlock`); so does an archive's extraction, which no parallel
  call may give a symlink out between the check and the writes.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from gbr_node.checkpoints.store import CheckpointStore
from gbr_node.config.profile import RunCommandConfig
from gbr_node.confine import for_commands
from gbr_node.errors import SecurityViolation, ToolError
from gbr_node.sandbox import Sandbox
from gbr_node.tools.base import Params, Tool, ToolResult, change_owner
from gbr_node.tools.flags import (
    GitParts,
    abbreviates,
    extracts_archive,
    forced_flags,
    git_parts,
    option_arguments,
    refused_argument,
)
from gbr_node.tools.git import GitGuard
from gbr_node.tools.guards import refuse_links_out, resolve_path_args, scrubbed_environment
from gbr_node.tools.process import run_bounded
from gbr_node.tools.rootlock import root_lock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AllowedProgram:
    """One allow-list entry, resolved: `executable` is absolute and fixed;
    `kinds` are the normalised program names the built-in refusals look up."""

    name: str
    executable: str
    subcommands: tuple[str, ...] | None
    deny_args: tuple[str, ...]
    kinds: frozenset[str]


def program_kind(filename: str) -> str:
    """`python3.12` -> `python`, `nodejs` -> `node`, `bash.exe` -> `bash`."""
    base = re.sub(r"\.exe$", "", filename.lower())
    base = re.sub(r"[\d.]+$", "", base)
    return {"pypy": "python", "nodejs": "node"}.get(base, base)


def _inside(folder: str, root: Path) -> bool:
    return Path(os.path.realpath(folder)).is_relative_to(root)


def trusted_search_path(search_path: str, root: Path) -> str:
    """`search_path` without relative entries and without folders inside `root`."""
    kept = [d for d in search_path.split(os.pathsep) if os.path.isabs(d) and not _inside(d, root)]
    return os.pathsep.join(kept)


def locate_program(name: str, path: str | None, root: Path, search_path: str) -> str | None:
    """The executable for program `name`: `path` when given (`~` expanded; a relative
    one is taken from `root`), else `name` looked up on `search_path`; None when it is
    not found or not executable."""
    if path is not None:
        candidate = Path(path).expanduser()
        candidate = candidate if candidate.is_absolute() else root / candidate
        ok = candidate.is_file() and os.access(candidate, os.X_OK)
        return str(candidate) if ok else None
    return shutil.which(name, path=search_path)


def resolve_allow_list(
    config: RunCommandConfig, root: Path, search_path: str
) -> dict[str, AllowedProgram]:
    """Fix each allow-list entry to an absolute executable, once, at profile load.

    A rule with `path` uses it (relative paths are taken from `root`: the agent
    can rewrite such a file, so pinning one allows arbitrary code). Otherwise
    the name is looked up on `search_path` (already filtered by
    `trusted_search_path`). Entries not found are left out with a warning.
    """
    allowed: dict[str, AllowedProgram] = {}
    for rule in config.allow:
        executable = locate_program(rule.name, rule.path, root, search_path)
        if executable is None:
            where = rule.path or "PATH"
            log.warning(
                "run_command: %r not found on %s; left out of the allow-list", rule.name, where
            )
            continue
        executable = os.path.abspath(executable)
        kinds = {program_kind(rule.name), program_kind(os.path.basename(executable))}
        kinds.add(program_kind(os.path.basename(os.path.realpath(executable))))
        allowed[rule.name] = AllowedProgram(
            rule.name, executable, rule.subcommands, rule.deny_args, frozenset(kinds)
        )
    return allowed


@dataclass(frozen=True)
class Prepared:
    """A checked command: the argv to execute, its working folder, its environment."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]


def denied_by_rule(arg: str, deny: str) -> bool:
    """True when a rule's `deny_args` entry `deny` refuses `arg`: equal, `arg` starts
    with it, or `arg` abbreviates a long option `deny` (`--outp` for `--output`)."""
    if arg == deny or arg.startswith(deny):
        return True
    return deny.startswith("--") and arg.startswith("--") and abbreviates(arg.split("=")[0], deny)


def _git_folders(sandbox: Sandbox, cwd_relative: str, parts: GitParts) -> list[str]:
    """The root-relative folders git's `-C` options move to, each from the one before."""
    folders, here = [], cwd_relative
    values = iter(parts.globals)
    for arg in values:
        if arg == "-C":
            step = next(values, "")
            if step:
                here = sandbox.resolve(os.path.join(here, step)).relative
                folders.append(here)
    return folders


class RunCommandParams(Params):
    """Arguments of run_command."""

    argv: list[str] = Field(
        min_length=1,
        description='Program and arguments, e.g. ["git", "status"]. No shell: no pipes, '
        "globs, redirections or variable expansion.",
    )
    cwd: str = Field(".", description="Working folder, relative to the project root.")
    timeout_s: Annotated[float, Field(gt=0)] | SkipJsonSchema[None] = Field(
        None, description="Time limit in seconds; capped by the profile's limit."
    )


class CommandRunner:
    """Check and run one `run_command` call under a fixed allow-list."""

    def __init__(
        self,
        config: RunCommandConfig,
        sandbox: Sandbox,
        search_path: str,
        checkpoints: CheckpointStore | None = None,
    ):
        self._config = config
        self._sandbox = sandbox
        self._checkpoints = checkpoints
        trusted = trusted_search_path(search_path, sandbox.root)
        self.allowed = resolve_allow_list(config, sandbox.root, trusted)
        executables = tuple(program.executable for program in self.allowed.values())
        self._policy = for_commands(config, sandbox, executables)
        self._env = scrubbed_environment(os.environ)
        self._env["PATH"] = trusted
        self._git: dict[str, GitGuard] = {}

    def check(self, argv: list[str], cwd: str) -> Prepared:
        """The command to execute: argv[0] replaced by the fixed executable (and, for
        git, the settings that close its side doors added), the cwd, the environment.

        Raises:
            SecurityViolation: program not allowed, subcommand not allowed,
                argument refused by the rule or the built-in list, a path
                argument outside the root or hard-linked, cwd outside the root,
                or a git repository that `tools.git` refuses.
            ToolError: cwd is not a folder, or an argument holds a NUL byte.
        """
        if any("\x00" in arg for arg in argv):
            raise ToolError("run_command: arguments must not contain NUL bytes")
        program = self.allowed.get(argv[0])
        if program is None:
            names = ", ".join(self.allowed) or "none"
            raise SecurityViolation(f"program not on the allow-list (allowed: {names})", argv[0])
        args = argv[1:]
        parts = git_parts(args) if "git" in program.kinds else None
        subcommand = parts.subcommand if parts else (args[0] if args else None)
        if program.subcommands is not None and subcommand not in program.subcommands:
            allowed = ", ".join(program.subcommands)
            raise SecurityViolation(
                f"{program.name} may only run the subcommands {allowed}", subcommand or ""
            )
        for arg in option_arguments(program.kinds, args):
            if any(denied_by_rule(arg, deny) for deny in program.deny_args):
                raise SecurityViolation(f"argument refused by the {program.name} rule", arg)
        refused = refused_argument(program.kinds, args)
        if refused is not None:
            reason = f"refused for {program.name}: it {refused.reason}"
            raise SecurityViolation(reason, refused.argument)
        where = self._sandbox.resolve(cwd)
        if not where.path.is_dir():
            raise ToolError(f"run_command: cwd {cwd!r} is not a folder")
        resolve_path_args(self._sandbox, where.relative, args)
        if extracts_archive(program.kinds, args):
            refuse_links_out(self._sandbox, program.name)
        if parts is None:
            argv = [program.executable, *forced_flags(program.kinds), *args]
            return Prepared(argv, where.path, self._env)
        for folder in _git_folders(self._sandbox, where.relative, parts):
            resolve_path_args(self._sandbox, folder, args)
        guard = self._git.setdefault(
            program.executable, GitGuard(program.executable, self._sandbox.root, self._env)
        )
        return Prepared(guard.prepare(parts, where.path), where.path, guard.env)

    def run(self, params: RunCommandParams) -> ToolResult:
        """The `run_command` handler: exit code, stdout, stderr; non-zero is an error.

        git and archive extraction run holding the root's lock exclusively from
        their checks to their end, every other command shared (`tools.rootlock`)."""
        limit = self._config.timeout_s
        timeout = limit if params.timeout_s is None else min(params.timeout_s, limit)
        cap = self._config.max_output_bytes
        program = self.allowed.get(params.argv[0])
        changes = root_lock(self._sandbox.root)
        alone = (
            program
            if program is not None
            and ("git" in program.kinds or extracts_archive(program.kinds, params.argv[1:]))
            else None
        )
        with changes.exclusive(timeout, alone.name) if alone else changes.shared():
            command = self.check(params.argv, params.cwd)
            before = None if self._checkpoints is None else self._checkpoints.snapshot()
            done = run_bounded(
                command.argv,
                cwd=command.cwd,
                env=command.env,
                timeout_s=timeout,
                max_output_bytes=cap,
                policy=self._policy,
            )
            kept = ""
            if self._checkpoints is not None and before is not None:
                kept = self._checkpoints.settle_command(change_owner(), before)
        lines = [f"$ {shlex.join(params.argv)}"]
        if done.timed_out:
            lines.append(f"timed out after {timeout:g} s; the process group was killed")
        elif done.exit_code < 0:
            lines.append(f"killed by signal {-done.exit_code}")
        else:
            lines.append(f"exit code {done.exit_code}")
        for label, data in (("stdout", done.stdout), ("stderr", done.stderr)):
            if data:
                lines.append(f"--- {label} ---\n{data.decode('utf-8', errors='replace')}")
        if not (done.stdout or done.stderr):
            lines.append("(no output)")
        if kept:
            lines.append(kept)
        if done.dropped_bytes:
            lines.append(
                f"[output cut at {cap} bytes (stdout and stderr together); "
                f"{done.dropped_bytes} more bytes dropped]"
            )
        structured = {
            "exit_code": None if done.timed_out else done.exit_code,
            "timed_out": done.timed_out,
            "output_truncated": done.dropped_bytes > 0,
        }
        failed = done.timed_out or done.exit_code != 0
        return ToolResult.text("\n".join(lines), is_error=failed, structured=structured)


def _describe(runner: CommandRunner, config: RunCommandConfig) -> str:
    programs = []
    for program in runner.allowed.values():
        only = f" (subcommands: {', '.join(program.subcommands)})" if program.subcommands else ""
        programs.append(program.name + only)
    return (
        "Run a program from the allow-list inside the project folder, without a shell. "
        f"Allowed programs: {', '.join(programs) or 'none'}. "
        f"Time limit {config.timeout_s:g} s; output is cut at {config.max_output_bytes} bytes. "
        "Paths outside the project folder are refused. A non-zero exit is reported as an error."
        + _confinement_note(config)
    )


def _confinement_note(config: RunCommandConfig) -> str:
    if config.confine == "off":
        return ""
    network = "with network access" if config.network else "without network access"
    return (
        " Where the OS allows, commands are confined: they read only the system folders, "
        "their own programs and the project, write only the project (not its protected "
        f"files) and a private TMPDIR/HOME, and run {network}."
    )


def command_tool(
    config: RunCommandConfig,
    sandbox: Sandbox,
    search_path: str,
    checkpoints: CheckpointStore | None = None,
) -> Tool:
    """The `run_command` tool, its allow-list fixed now from `search_path` (os.pathsep-joined);
    the files a command changes in the root are checkpointed in `checkpoints` (GBR-UNDO-01:
    `CheckpointStore.snapshot` before it, `settle_command` after it)."""
    runner = CommandRunner(config, sandbox, search_path, checkpoints)
    return Tool("run_command", _describe(runner, config), RunCommandParams, runner.run)
