"""git's side doors, closed for every git `run_command` (issue 12, "Commands").

git takes settings from the repository it runs in, and many settings name a
program to run: the agent can write the config of a repository nested under
the root (`sub/.git/config`), a `.git` file pointing anywhere, a file that
`include.path` reads, `.gitattributes` that pick filter and diff drivers. So
every git run gets, whatever its repository says:

- an environment of our own (`GIT_ENV`): no system config and an empty global
  one (`GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null`), no pager, a
  no-op editor, no password prompt or askpass program, plain `ssh`, no
  `core.gitProxy` command, and only the file, git, http(s) and ssh transports
  (`ext::` runs any command);
- `--no-pager` and command-line settings (`FIXED_SETTINGS`, given as `-c`,
  which outrank every config file and reach the git processes it starts,
  such as a submodule's): no fsmonitor, no hooks (`core.hooksPath=/dev/null`),
  no credential helpers, submodules kept out of sight (their own config could
  name drivers), the standard gpg programs;
- settings that disarm what the repository's effective config defines
  (`config_settings`), learnt by a first `git config --list` run with the
  same global options in the same folder: filter drivers emptied, textconv
  drivers replaced by `cat`, external diff and merge drivers emptied,
  URL-scoped credential helpers, trailer and archive commands, and every
  submodule it names ignored; a repository alias named like the subcommand
  (in any case: git looks aliases up ignoring case), and a remote's
  upload/receive-pack command (git keeps the first value it reads, so no
  `-c` can replace it) are refused;
- in a repository other than the root's own (one the agent may have written),
  a config read from a file outside the root, or a setting that names a file
  or a local repository outside it (`mailmap.file`, `blame.ignoreRevsFile`,
  `include.path`, a remote's local URL, from which a partial clone fetches by
  itself, a `url.<base>.insteadOf` rewriting to one, the old `remotes/` and
  `branches/` files of its git dir), is refused: git would
  read outside the root; so is a rebase there whose todo list holds `exec`
  lines (`git rebase --continue` runs them), and `git submodule` wherever
  `.gitmodules` (which the agent can write in any repository) names a local
  URL outside the root;
- `--no-ext-diff` after `diff` (the only subcommand that runs `diff.external`
  without being asked; `--ext-diff` itself is refused by `tools.flags`);
- a check of where git will work (`git rev-parse`): a repository whose git
  dir, common dir (a linked worktree's `commondir`), object alternates or
  work tree lie outside the root is refused, unless it is the repository of
  the root itself (the one git finds from the root: a linked worktree or a
  submodule keeps its git dir elsewhere, and a root inside a bigger
  repository has its work tree above).

Needs git 2.31 or later (`rev-parse --path-format`); an older git is refused
with its own error.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gbr_node.errors import SecurityViolation
from gbr_node.tools.flags import GitParts
from gbr_node.tools.process import Completed, run_bounded

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_PAGER": "cat",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "GIT_ASKPASS": "",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_SSH_COMMAND": "ssh",
    "GIT_PROXY_COMMAND": "",
    "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
}
"""Added to the scrubbed environment of every git run (all other GIT_* are removed)."""

FIXED_SETTINGS = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("core.pager", "cat"),
    ("core.askPass", ""),
    ("credential.helper", ""),  # an empty value resets the list of helpers
    ("diff.ignoreSubmodules", "all"),
    ("submodule.recurse", "false"),
    ("status.submoduleSummary", "false"),
    ("log.showSignature", "false"),
    ("gpg.program", "gpg"),
    ("gpg.openpgp.program", "gpg"),
    ("gpg.x509.program", "gpgsm"),
    ("gpg.ssh.program", "ssh-keygen"),
    ("http.saveCookies", "false"),
    ("help.autoCorrect", "0"),  # a mistyped subcommand must not run the alias it resembles
    ("fetch.recurseSubmodules", "false"),
    ("push.recurseSubmodules", "no"),
)
"""Settings given on the command line of every git run, before the user's arguments."""

# (section, variable) of `section.NAME.variable` settings whose value is a program
# to run, NAME being any name (a driver, a remote, a URL) -> the value that disarms it.
_DISARM_NAMED = {
    ("filter", "clean"): "",  # an empty filter command means no filter
    ("filter", "smudge"): "",
    ("filter", "process"): "",
    ("diff", "textconv"): "cat",  # the text as it is
    ("diff", "command"): "",
    ("merge", "driver"): "",
    ("credential", "helper"): "",
    ("trailer", "command"): "",
    ("trailer", "cmd"): "",
    ("tar", "command"): "",
    ("hook", "command"): "",
}
# Settings with a fixed name whose value is a program -> the value that disarms it
# (the others are in FIXED_SETTINGS or GIT_ENV).
_DISARM_KEYS = {"gpg.ssh.defaultkeycommand": "", "core.alternaterefscommand": ""}
# `section.NAME.variable` settings naming a program where git keeps the first value
# it reads, so that no later `-c` can disarm them: a repository that sets one is refused.
_FIRST_WINS = {("remote", "uploadpack"), ("remote", "receivepack")}
_NO_REPOSITORY = "not a git repository"
_PREFLIGHT_TIMEOUT_S = 10.0
_PREFLIGHT_OUTPUT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ConfigEntry:
    """One line of `git config --list --show-origin -z`: where it came from, the key
    (section and variable lower case, as git prints them) and the value."""

    origin: str
    key: str
    value: str


def parse_config_list(output: bytes) -> list[ConfigEntry]:
    """Entries of `git config --list --show-origin -z` output (NUL-separated
    `origin`, then `key\\nvalue`; a key without `=` has no value line). Pure."""
    fields = output.decode("utf-8", errors="surrogateescape").split("\0")
    entries = []
    for origin, item in zip(fields[0::2], fields[1::2], strict=False):
        key, _, value = item.partition("\n")
        entries.append(ConfigEntry(origin, key, value))
    return entries


def _split_key(key: str) -> tuple[str, str | None, str]:
    """`section.sub.section.name` -> (section, subsection or None, name)."""
    section, _, rest = key.partition(".")
    subsection, _, name = rest.rpartition(".")
    return section, subsection or None, name


def config_settings(entries: Sequence[ConfigEntry], subcommand: str | None) -> list[str]:
    """The `-c key=value` settings that disarm what `entries` (a repository's
    effective config, and its `.gitmodules`) would run, in order. Pure.

    Raises:
        SecurityViolation: the config defines an alias named `subcommand` (an
            alias can run any shell command, `!cmd`), or a setting to disarm
            has a name with `=` in it (`-c NAME=VALUE` could not say it).
    """
    settings: dict[str, str] = {}
    for entry in entries:
        section, subsection, name = _split_key(entry.key)
        if section == "alias" and subsection is None and name == (subcommand or "").lower():
            raise SecurityViolation(
                f"git alias {name!r} is defined by {entry.origin}; repository aliases are "
                "refused (one can run any command)",
                name,
            )
        if subsection is not None and (section, name) in _FIRST_WINS:
            raise SecurityViolation(
                f"{entry.origin} sets {entry.key}, a program git would run, and git keeps "
                "the first value it reads so it cannot be switched off; refused",
                entry.key,
            )
        disarm = _DISARM_KEYS.get(entry.key)
        if subsection is not None:
            disarm = _DISARM_NAMED.get((section, name), disarm)
        if disarm is not None and entry.value:
            settings[entry.key] = disarm
        if section == "submodule" and subsection is not None:
            settings[f"submodule.{subsection}.ignore"] = "all"
            if name == "update" and entry.value.startswith("!"):
                settings[entry.key] = "none"
    for key in settings:
        if "=" in key:
            raise SecurityViolation(
                f"git setting {key!r} (from the repository's config) has '=' in its name "
                "and cannot be switched off; refused",
                key,
            )
    return [f"{key}={value}" for key, value in settings.items()]


# Settings whose value git never uses as we run it (replaced on the command line or by
# the environment, or only read by refused subcommands); the others may name files.
_OVERRIDDEN = frozenset(key.lower() for key, _ in FIXED_SETTINGS) | {
    "core.editor",
    "sequence.editor",
    "core.sshcommand",
    "core.gitproxy",
    "diff.external",
    "core.worktree",  # checked as the work tree
}


def _names_a_path(value: str) -> bool:
    """True when a setting's value reads as a file or a local repository: absolute,
    from the home folder, a `file://` URL, or climbing with `..`."""
    return value.startswith(("/", "~", "file://")) or ".." in value.split("/")


def _disarmed(key: str) -> bool:
    section, subsection, name = _split_key(key)
    return key in _DISARM_KEYS or (subsection is not None and (section, name) in _DISARM_NAMED)


def refuse_paths_outside(entries: Sequence[ConfigEntry], root: Path, bases: Sequence[Path]) -> None:
    """Refuse a config that git would read from outside `root`, or whose settings name
    a file or a local repository outside it (`mailmap.file=/elsewhere`, a remote's
    URL `../../elsewhere`). Relative origins and values are taken from each of `bases`
    (git's working folders); absolute ones and `~` as they stand.

    Raises:
        SecurityViolation: naming the setting (or the file it came from).
    """
    for entry in entries:
        named = []
        if entry.origin.startswith("file:"):
            named.append((entry.origin[len("file:") :], f"{entry.key} comes from"))
        if entry.key not in _OVERRIDDEN and not _disarmed(entry.key) and _names_a_path(entry.value):
            named.append((entry.value.removeprefix("file://"), f"{entry.key} names"))
        section, base_url, _ = _split_key(entry.key)
        if section == "url" and base_url is not None and _names_a_path(base_url):
            named.append((base_url.removeprefix("file://"), f"{entry.key} rewrites URLs to"))
        for path, says in named:
            for base in bases:
                where = Path(os.path.realpath(base / os.path.expanduser(path)))
                if not where.is_relative_to(root):
                    raise SecurityViolation(
                        f"the repository's config {says} {path!r}, outside the allowed root: "
                        "git would read it; refused in a repository nested in the root",
                        entry.key,
                    )


def legacy_remotes(common_dir: Path) -> list[ConfigEntry]:
    """The remote URLs a repository names outside its config: the files of
    `remotes/` (`URL: ...` lines) and `branches/` (`URL#branch`) that git still
    reads (gitrepository-layout(5)), as entries `refuse_paths_outside` checks."""
    found = []
    for folder, prefix in (("remotes", "URL:"), ("branches", "")):
        try:
            files = sorted((common_dir / folder).iterdir())
        except OSError:
            continue
        for path in files:
            try:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            for line in lines if prefix else lines[:1]:
                if line.startswith(prefix):
                    url = line[len(prefix) :].strip().split("#", 1)[0]
                    found.append(ConfigEntry(f"file:{path}", f"{folder}/{path.name}", url))
    return found


def refuse_commands_to_come(git_dir: Path) -> None:
    """Refuse a rebase whose todo list (`rebase-merge/git-rebase-todo` in `git_dir`,
    a file the agent can write in a nested repository) holds `exec` lines, which
    `git rebase --continue` would run.

    Raises:
        SecurityViolation: naming the first such line.
    """
    todo = git_dir / "rebase-merge" / "git-rebase-todo"
    try:
        lines = todo.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return
    for line in lines:
        words = line.split(maxsplit=1)
        if words and words[0] in ("exec", "x"):
            raise SecurityViolation(
                f"the unfinished rebase of this repository would run {line.strip()!r} "
                f"(from {todo}); refused in a repository nested in the root",
                line.strip(),
            )


def command_line(executable: str, parts: GitParts, settings: Sequence[str]) -> list[str]:
    """The argv that runs `parts` with `--no-pager`, FIXED_SETTINGS and `settings`
    before the user's arguments, and `--no-ext-diff` right after `diff`."""
    given = [f"{key}={value}" for key, value in FIXED_SETTINGS] + list(settings)
    argv = [executable, "--no-pager", *(a for s in given for a in ("-c", s)), *parts.globals]
    if parts.subcommand is not None:
        argv.append(parts.subcommand)
        if parts.subcommand == "diff":
            argv.append("--no-ext-diff")
        argv.extend(parts.rest)
    return argv


@dataclass(frozen=True)
class Repository:
    """Where git works: its absolute git dir and common dir (they differ in a linked
    worktree), and its work tree (None when bare)."""

    git_dir: Path
    common_dir: Path
    work_tree: Path | None


def _inside(path: Path, root: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(root)


def alternates(objects: Path, depth: int = 5) -> list[Path]:
    """The object folders `objects/info/alternates` lends from, and theirs in turn
    (git follows 5 levels), as absolute paths; relative lines are taken from
    `objects`."""
    try:
        text = (objects / "info" / "alternates").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            lent = Path(os.path.normpath(objects / line))
            found.append(lent)
            if depth > 1:
                found += alternates(lent, depth - 1)
    return found


class GitGuard:
    """Prepares git run_commands under one root (see the module doc). I/O: runs git.

    `executable` is the allow-listed git, `root` the resolved root, `env` the
    scrubbed environment (GIT_ENV is added to it).
    """

    def __init__(self, executable: str, root: Path, env: dict[str, str]) -> None:
        self._git = executable
        self._root = root
        self.env = {**env, **GIT_ENV}
        self._own: Repository | None = None
        self._own_known = False

    def prepare(self, parts: GitParts, cwd: Path) -> list[str]:
        """The argv to run `parts` (git's arguments, split) in `cwd` with every side
        door closed. Runs git first to learn the repository and its config.

        Raises:
            SecurityViolation: the repository is outside the root (and not the
                root's own), an alias is named like the subcommand, a nested
                repository's config names files outside the root, or git could
                not tell which repository it would use.
        """
        if parts.subcommand is None:
            return command_line(self._git, parts, ())
        repository = self._locate(parts.globals, cwd)
        if repository is None:
            return command_line(self._git, parts, ())
        if not self._allowed(repository):
            where = repository.work_tree or repository.git_dir
            raise SecurityViolation(
                f"git would work on a repository that lies, or reads objects, outside the "
                f"allowed root (git dir {repository.git_dir}, common dir "
                f"{repository.common_dir}, work tree {repository.work_tree or 'none'})",
                str(where),
            )
        entries = self._config(parts.globals, cwd, [])
        if repository != self._own_repository():
            bases = [p for p in (cwd, repository.work_tree, repository.git_dir) if p is not None]
            named = [*entries, *legacy_remotes(repository.common_dir)]
            refuse_paths_outside(named, self._root, bases)
            if parts.subcommand == "rebase":
                refuse_commands_to_come(repository.git_dir)
        if repository.work_tree is not None:
            gitmodules = repository.work_tree / ".gitmodules"
            if gitmodules.is_file():  # names the submodules to keep out of sight
                listed = self._config(parts.globals, cwd, ["--file", str(gitmodules)], True)
                if parts.subcommand == "submodule":  # clones and fetches from their URLs
                    refuse_paths_outside(listed, self._root, [repository.work_tree])
                entries += listed
        return command_line(self._git, parts, config_settings(entries, parts.subcommand))

    def _allowed(self, repository: Repository) -> bool:
        places = [repository.git_dir, repository.common_dir]
        places += alternates(repository.common_dir / "objects")
        if repository.work_tree is not None:
            places.append(repository.work_tree)
        if all(_inside(place, self._root) for place in places):
            return True
        return repository == self._own_repository()

    def _own_repository(self) -> Repository | None:
        """The repository git finds from the root (asked once), None when there is none."""
        if not self._own_known:
            self._own, self._own_known = self._locate((), self._root), True
        return self._own

    def _run(self, globals_: Sequence[str], cwd: Path, args: Sequence[str]) -> Completed:
        argv = command_line(self._git, GitParts(tuple(globals_), args[0], tuple(args[1:])), ())
        return run_bounded(
            argv,
            cwd=cwd,
            env=self.env,
            timeout_s=_PREFLIGHT_TIMEOUT_S,
            max_output_bytes=_PREFLIGHT_OUTPUT_BYTES,
        )

    def _locate(self, globals_: Sequence[str], cwd: Path) -> Repository | None:
        """The repository git finds in `cwd` with `globals_`, None when there is none.
        One `git rev-parse`; in a bare repository its last question (the work tree)
        fails after the others were answered."""
        ask = ["rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"]
        done = self._run(globals_, cwd, [*ask, "--is-bare-repository", "--show-toplevel"])
        lines = done.stdout.decode("utf-8", errors="surrogateescape").splitlines()
        if len(lines) >= 3 and lines[2] == "true":
            return Repository(Path(lines[0]), Path(lines[1]), None)
        if done.exit_code == 0 and len(lines) == 4:
            return Repository(Path(lines[0]), Path(lines[1]), Path(lines[3]))
        error = done.stderr.decode("utf-8", errors="replace").strip()
        if _NO_REPOSITORY in error:
            return None
        raise SecurityViolation(
            f"git could not tell which repository it would use ({error or 'no answer'})",
            str(cwd),
        )

    def _config(
        self, globals_: Sequence[str], cwd: Path, where: list[str], optional: bool = False
    ) -> list[ConfigEntry]:
        """The entries `git config --list` shows; a config git cannot read is refused
        (the command would read it too), unless `optional` (.gitmodules: git only
        warns about a broken one)."""
        done = self._run(globals_, cwd, ["config", *where, "--list", "--show-origin", "-z"])
        if done.exit_code == 0 and not done.dropped_bytes:
            return parse_config_list(done.stdout)
        if optional and not done.timed_out:
            return []
        error = done.stderr.decode("utf-8", errors="replace").strip() or "no answer"
        raise SecurityViolation(f"git's config could not be read whole ({error})", str(cwd))
