"""Built-in refusals of flags that run programs or follow links out of the root [pure].

`run_command` applies these whatever the profile says (issue 2, "Local
tools"; issue 12, "Commands"). For each kind of program (a normalised name:
`python3.12` is "python", see `commands.program_kind`) a `FlagRules` lists the
flags that:

- run another program (`find -exec`, `tar --to-command`, `rg --pre`,
  `sort --compress-program`, `python -c`, ...);
- make the program follow symlinks by itself, so that it reads (or changes)
  what a link inside the root points to outside it, which the path checks
  of the arguments never see (`find -L`, `ls -L`, `du -L`, `grep -R`,
  `cp -L`, `tar -h`, `rg -L`, ...);
- take the names to work on from a file, unchecked (`find -files0-from`,
  `tar -T`, `du --files0-from`, ...), or write outside the root (`tar -P`).

A flag is refused in every spelling the program accepts: a short flag inside
a cluster (`-RL`, `-laL`; letters after one that takes a value are that
value, as getopt reads them: `-eR` is the pattern "R"), a long option or any
abbreviation of it (`--deref` for `--dereference`: getopt_long accepts
unambiguous prefixes, git's parse-options too), `--opt=value`, tar's
dash-less first argument (`tar chf`), and find's single-dash words. Checks
stop at `--`, which ends the options (`git log -- -c` names a path), except
for find, whose expression goes on after it.

A program that follows symlinks by default is run with the flag that stops it
(`FORCED`): GNU diff compares what links point to, even without `-r`, so it
always gets `--no-dereference`.

git is parsed as git parses itself: global options first (`git -C sub
status`: the subcommand is `status`), where `-c`, `--config-env` and
`--exec-path` are refused, then the subcommand and its own flags (`-c` and
`--config-env` are refused there too, see `GIT_RULES`). `git_parts` is that
parse; `tools.git` closes the doors git's configuration opens.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

RUNS = "runs another program"
FOLLOWS = "makes {program} follow symlinks by itself, out of the allowed root"
NAMES_FROM_FILE = "makes {program} take the names to work on from a file, unchecked"
WRITES = "makes {program} delete or write files of its own choosing"
ABSOLUTE = "lets tar keep absolute and '..' member names, writing outside the allowed root"
REMOTE = "names a remote archive or file (host:path): tar would run rsh/ssh; write ./NAME"
SUBMODULES = "makes git look into submodules, whose own config could run programs"
OPENS_MANUAL = "opens git's manual in a pager or browser"


@dataclass(frozen=True)
class FlagRules:
    """What the built-in list refuses for one kind of program.

    `short`: letter -> reason, refused inside a short-option cluster.
    `long`: long option -> reason, refused with `=value` and as any
    abbreviation. `words`:
    argument -> reason, refused exactly, and as a prefix when the word starts
    with a dash (find's `-exec`, interpreters' `-c` glued to its code).
    `takes_value`:
    short letters whose value is the rest of the cluster. `dashdash`: `--`
    ends the options. `old_style`: a first argument without a dash is a
    cluster of letters (tar). Reasons may name `{program}`.
    """

    short: Mapping[str, str] = field(default_factory=dict)
    long: Mapping[str, str] = field(default_factory=dict)
    words: Mapping[str, str] = field(default_factory=dict)
    takes_value: str = ""
    dashdash: bool = True
    old_style: bool = False


def _same(reason: str, *flags: str) -> dict[str, str]:
    return dict.fromkeys(flags, reason)


_GETOPT = FlagRules()
_SHELL = FlagRules(short={"c": RUNS}, words={"-c": RUNS})

RULES: dict[str, FlagRules] = {
    "find": FlagRules(
        words={
            **_same(RUNS, "-exec", "-execdir", "-ok", "-okdir"),
            **_same(WRITES, "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"),
            **_same(FOLLOWS, "-L", "-H", "-follow"),
            "-files0-from": NAMES_FROM_FILE,
        },
        dashdash=False,
    ),
    "ls": FlagRules(
        short=_same(FOLLOWS, "L", "H"),
        long=_same(
            FOLLOWS,
            "--dereference",
            "--dereference-command-line",
            "--dereference-command-line-symlink-to-dir",
        ),
        takes_value="ITw",
    ),
    "du": FlagRules(
        short=_same(FOLLOWS, "L", "D", "H"),
        long={
            **_same(FOLLOWS, "--dereference", "--dereference-args"),
            "--files0-from": NAMES_FROM_FILE,
        },
        takes_value="BdtX",
    ),  # fmt: skip
    "grep": FlagRules(
        short={"R": FOLLOWS},
        long={"--dereference-recursive": FOLLOWS},
        takes_value="efmABCdD",
    ),
    "rg": FlagRules(
        short={"L": FOLLOWS},
        long={"--follow": FOLLOWS, "--pre": RUNS},
        takes_value="ABCdeEfgjmMrtT",
    ),
    "cp": FlagRules(
        short=_same(FOLLOWS, "L", "H"), long={"--dereference": FOLLOWS}, takes_value="St"
    ),  # fmt: skip
    "tar": FlagRules(
        short={"h": FOLLOWS, "I": RUNS, "F": RUNS, "T": NAMES_FROM_FILE, "P": ABSOLUTE},
        long={
            "--dereference": FOLLOWS,
            **_same(
                RUNS,
                "--use-compress-program",
                "--to-command",
                "--checkpoint-action",
                "--info-script",
                "--new-volume-script",
                "--rsh-command",
                "--rmt-command",
            ),
            "--files-from": NAMES_FROM_FILE,
            "--absolute-names": ABSOLUTE,
        },
        takes_value="bCfFgHIKLNTVX",
        old_style=True,
    ),
    "sort": FlagRules(
        long={"--compress-program": RUNS, "--files0-from": NAMES_FROM_FILE},
        takes_value="kostT",
    ),
    "wc": FlagRules(long={"--files0-from": NAMES_FROM_FILE}),
    "tree": FlagRules(short={"l": FOLLOWS}, takes_value="HILPTo"),
    "chmod": FlagRules(short=_same(FOLLOWS, "L", "H"), long={"--dereference": FOLLOWS}),
    "python": _SHELL,
    "sh": _SHELL,
    "bash": _SHELL,
    "dash": _SHELL,
    "zsh": _SHELL,
    "ksh": _SHELL,
    "node": FlagRules(
        short=_same(RUNS, "e", "p", "r"),
        long=_same(RUNS, "--eval", "--print", "--require", "--import", "--loader"),
        words=_same(RUNS, "-e", "-p", "-r"),
    ),
    "perl": FlagRules(short=_same(RUNS, "e", "E"), words=_same(RUNS, "-e", "-E")),
    "ruby": FlagRules(short={"e": RUNS}, words={"-e": RUNS}),
}
FORCED: dict[str, tuple[str, ...]] = {"diff": ("--no-dereference",)}
"""Program kind -> flags put before the given arguments, so that it cannot follow
symlinks out of the root: GNU diff compares the targets of links in the folders
it compares (with or without `-r`) unless told `--no-dereference`."""

ALIASES = {"egrep": "grep", "fgrep": "grep", "rgrep": "grep", "chown": "chmod", "chgrp": "chmod"}

GIT_GLOBAL_RULES = FlagRules(
    short={"c": RUNS},
    long={
        **_same(RUNS, "--config-env", "--exec-path"),
        "--help": OPENS_MANUAL,
    },
    words={"-c": RUNS},
)
"""git's global options (before the subcommand): `-c` and `--config-env` set any
setting (`core.pager`, `core.hooksPath`), `--exec-path` picks where helpers run from."""

GIT_RULES = FlagRules(
    words={"-c": RUNS},
    long={
        **_same(
            RUNS,
            "--config-env",
            "--upload-pack",
            "--receive-pack",
            "--exec",  # rebase -x, archive --exec
            "--extcmd",  # difftool
            "--ext-diff",  # diff.external, diff drivers
            "--open-files-in-pager",  # grep -O
            "--template",  # clone/init copy hooks in
        ),
        "--recurse-submodules": SUBMODULES,
        "--help": OPENS_MANUAL,
    },
)
"""Flags of any git subcommand that run programs (`--ext-diff` would run the
external diff drivers that `tools.git` keeps from running). `-c` and
`--config-env` are refused after the subcommand too (`git log -c` included):
should a newer git take a global option with a separate value that
`git_parts` does not know, the subcommand git sees comes later than ours, and
a `-c` we took for the subcommand's would be git's own."""

GIT_SUBCOMMAND_RULES: dict[str, FlagRules | None] = {
    **dict.fromkeys(
        [
            "config",  # could set core.hooksPath, core.fsmonitor, aliases
            "filter-branch",
            "difftool",
            "mergetool",
            "help",
            "instaweb",
            "web--browse",
            "send-email",
            "imap-send",
            "daemon",
            "fsmonitor--daemon",
            "maintenance",  # schedules itself with cron/systemd
        ]
    ),
    "grep": FlagRules(short={"O": RUNS}, takes_value="efmABC"),
    "rebase": FlagRules(short={"x": RUNS}, takes_value="sX"),
    "clone": FlagRules(short={"u": RUNS, "c": RUNS}, long={"--config": RUNS}, takes_value="bjo"),
    "ls-remote": FlagRules(short={"u": RUNS}),
    "submodule": FlagRules(words={"foreach": RUNS}),
    "bisect": FlagRules(words={"run": RUNS}),
}
"""git subcommand -> its own refusals, or None when it is refused outright."""

_GIT_GLOBAL_WITH_VALUE = frozenset(
    {
        "-C",
        "-c",
        "--git-dir",
        "--work-tree",
        "--namespace",
        "--config-env",
        "--super-prefix",
        "--attr-source",
    }
)


@dataclass(frozen=True)
class GitParts:
    """`git` argv[1:] split as git reads it: `globals` (the options before the
    subcommand), `subcommand` (None when there is none, as in `git --version`)
    and `rest` (its arguments)."""

    globals: tuple[str, ...]
    subcommand: str | None
    rest: tuple[str, ...]


def git_parts(args: Sequence[str]) -> GitParts:
    """Split git's arguments: the subcommand is the first argument that is neither
    an option nor the value of a global option that takes one (`-C sub status`)."""
    index = 0
    while index < len(args):
        arg = args[index]
        if not arg.startswith("-"):
            return GitParts(tuple(args[:index]), arg, tuple(args[index + 1 :]))
        index += 2 if arg in _GIT_GLOBAL_WITH_VALUE else 1
    return GitParts(tuple(args), None, ())


@dataclass(frozen=True)
class Refused:
    """An argument the built-in list refuses, and why (a sentence for the model)."""

    argument: str
    reason: str


def abbreviates(name: str, option: str) -> bool:
    """True when `name` (`--x`, no `=value`) may be read as `option`: getopt_long and
    git's parse-options take any unambiguous prefix of a long option."""
    return len(name) > 2 and option.startswith(name)


def _long_refusal(name: str, rules: FlagRules) -> str | None:
    """The reason `--name` (no `=value`) is refused: it is a refused long option or
    an abbreviation of one."""
    for option, reason in rules.long.items():
        if abbreviates(name, option):
            return reason
    return None


def _cluster_refusal(letters: str, rules: FlagRules) -> str | None:
    for letter in letters:
        if letter in rules.short:
            return rules.short[letter]
        if letter in rules.takes_value:
            return None  # the rest of the cluster is this option's value
    return None


def _refusal(arg: str, rules: FlagRules, first: bool) -> str | None:
    for word, reason in rules.words.items():
        if arg == word or (word.startswith("-") and arg.startswith(word)):
            return reason
    if arg.startswith("--"):
        return _long_refusal(arg.split("=", 1)[0], rules)
    if arg.startswith("-") and len(arg) > 1:
        return _cluster_refusal(arg[1:], rules)
    if first and rules.old_style:
        return _cluster_refusal(arg, FlagRules(short=rules.short))
    return None


def options(args: Sequence[str], rules: FlagRules) -> Iterator[tuple[int, str]]:
    """(index, argument) of each of `args` that can be an option: all of them up to
    `--` (excluded) when `rules.dashdash`, else all."""
    for index, arg in enumerate(args):
        if arg == "--" and rules.dashdash:
            return
        yield index, arg


def forced_flags(kinds: Iterable[str]) -> list[str]:
    """The `FORCED` flags of a program of `kinds`, to go before its arguments."""
    return [flag for kind in sorted(kinds) for flag in FORCED.get(ALIASES.get(kind, kind), ())]


def option_arguments(kinds: Iterable[str], args: Sequence[str]) -> list[str]:
    """The arguments of `args` that a program of `kinds` can read as options: those
    before `--`, or all of them for find (its expression goes on after `--`)."""
    dashdash = all(RULES.get(ALIASES.get(k, k), _GETOPT).dashdash for k in kinds)
    return [arg for _, arg in options(args, FlagRules(dashdash=dashdash))]


def first_refused(args: Sequence[str], rules: FlagRules, program: str) -> Refused | None:
    """The first of `args` that `rules` refuses, or None. Pure."""
    for index, arg in options(args, rules):
        reason = _refusal(arg, rules, first=index == 0)
        if reason is not None:
            return Refused(arg, reason.format(program=program))
    return None


def _tar_archive_names(args: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(argument, name) of every name in tar's `args` that may be the archive: the
    value glued to `-f` or given as `--file=`, and every argument that is no option."""
    rules = RULES["tar"]
    for index, arg in options(args, rules):
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            if value and abbreviates(name, "--file"):
                yield arg, value
        elif arg.startswith("-") or (index == 0 and rules.old_style):
            letters = arg.lstrip("-")
            for at, letter in enumerate(letters):
                if letter == "f" and arg.startswith("-"):
                    yield arg, letters[at + 1 :]
                if letter in rules.takes_value:
                    break
        else:
            yield arg, arg


def _tar_remote(args: Sequence[str]) -> Refused | None:
    """tar takes an archive name with a colon before any slash as host:path and runs
    rsh or ssh to reach it (GNU tar, without --force-local)."""
    for arg, name in _tar_archive_names(args):
        if ":" in name.split("/", 1)[0]:
            return Refused(arg, REMOTE)
    return None


def _git_refused(args: Sequence[str]) -> Refused | None:
    parts = git_parts(args)
    refused = first_refused(parts.globals, GIT_GLOBAL_RULES, "git")
    if refused is not None or parts.subcommand is None:
        return refused
    if parts.subcommand in GIT_SUBCOMMAND_RULES:
        rules = GIT_SUBCOMMAND_RULES[parts.subcommand]
        if rules is None:
            return Refused(parts.subcommand, f"git {parts.subcommand} can run other programs")
        refused = first_refused(parts.rest, rules, "git")
        if refused is not None:
            return refused
    for _, arg in options(parts.rest, GIT_RULES):
        name, _, value = arg.partition("=")
        if abbreviates(name, "--ignore-submodules") and value not in ("", "all"):
            return Refused(arg, SUBMODULES)  # the config keeps them out of sight: "all"
    return first_refused(parts.rest, GIT_RULES, "git")


def refused_argument(kinds: Iterable[str], args: Sequence[str]) -> Refused | None:
    """The first argument of `args` (argv[1:]) that the built-in list refuses for a
    program of any of `kinds` (normalised names such as "git", "python"), or None.
    Pure."""
    for kind in sorted(kinds):
        kind = ALIASES.get(kind, kind)
        if kind == "git":
            refused = _git_refused(args)
        elif kind in RULES:
            refused = first_refused(args, RULES[kind], kind)
            if refused is None and kind == "tar":
                refused = _tar_remote(args)
        else:
            refused = None
        if refused is not None:
            return refused
    return None
