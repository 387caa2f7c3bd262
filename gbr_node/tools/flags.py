"""Built-in refusals of flags that run programs or follow links out of the root [pure].

`run_command` applies these whatever the profile says (issue 2, "Local
tools"; issue 12, "Commands"). For each kind of program (a normalised name:
`python3.12` is "python", see `commands.program_kind`) a `FlagRules` lists the
flags that:

- run another program (`find -exec`, `fd -x`, `tar --to-command`, `rg --pre`,
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
for find, whose expression goes on after it, and except where the `--` is
the value of the option before it (`grep -e -- -R`: the pattern "--", then
`-R`; `git log --decorate-refs -- --output=F`), which `options_end` tells
from the options that take a separate value (`takes_value`, `long_values`;
when a program's long options are not listed, any of them may take one).

A launcher (`env`, `xargs`, `timeout`, `nice`, ...) runs the program named in
its operands, which the allow-list would never see: its operands are refused
(`env NAME=VALUE` alone is fine). An awk without a sandbox mode (mawk, BWK
awk, busybox) runs commands through `system()` and pipes: refused; gawk runs
with `--sandbox`, and so does GNU sed (no `e`, `w` or `r` commands).

A program that follows symlinks by default is run with the flag that stops it
(`FORCED`): GNU diff compares what links point to, even without `-r`, so it
always gets `--no-dereference`; cp writes through a symlink or a hard link
already at the destination (`cp -r src/. dst` with `dst/x -> /elsewhere`), so
it always gets `--remove-destination`.

git is parsed as git parses itself: global options first (`git -C sub
status`: the subcommand is `status`), where `-c`, `--config-env` and
`--exec-path` are refused, then the subcommand and its own flags (`-c` and
`--config-env` are refused there too, see `GIT_RULES`). `git_parts` is that
parse; `git_options_end` says where git's options end; `tools.git` closes the
doors git's configuration opens.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

RUNS = "runs another program"
FOLLOWS = "makes {program} follow symlinks by itself, out of the allowed root"
NAMES_FROM_FILE = "makes {program} take the names to work on from a file, unchecked"
WRITES = "makes {program} delete or write files of its own choosing"
ABSOLUTE = "lets tar keep absolute and '..' member names, writing outside the allowed root"
REMOTE = "names a remote file (host:path): {program} would run rsh or ssh to reach it; write ./NAME"
SUBMODULES = "makes git look into submodules, whose own config could run programs"
OPENS_MANUAL = "opens git's manual in a pager or browser"
LAUNCHES = (
    "makes {program} start the program named in its arguments, which the allow-list "
    "does not check; allow that program itself"
)
NO_SANDBOX = (
    "runs commands (system(), pipes) and writes files from its program text: this awk has "
    "no sandbox mode; allow gawk, which runs with --sandbox"
)


@dataclass(frozen=True)
class FlagRules:
    """What the built-in list refuses for one kind of program.

    `short`: letter -> reason, refused inside a short-option cluster.
    `long`: long option -> reason, refused with `=value` and as any
    abbreviation. `words`:
    argument -> reason, refused exactly, and as a prefix when the word starts
    with a dash (find's `-exec`, interpreters' `-c` glued to its code).
    `takes_value`:
    short letters whose value is the rest of the cluster, or the next
    argument. `long_values`: long options whose value may be the next
    argument (`--regexp PATTERN`); None when they are not listed, so that any
    long option may take it. `dashdash`: `--` ends the options. `old_style`:
    a first argument without a dash is a cluster of letters (tar), whose
    value letters take the next arguments in turn. `operands`: the reason
    every operand is refused (a launcher's command). `exact`: long options of
    the program's own that are a prefix of a refused one (tar's `--file` and
    `--files-from`): getopt_long takes a name it knows exactly as that option,
    not as an abbreviation. Reasons may name `{program}`.
    """

    short: Mapping[str, str] = field(default_factory=dict)
    long: Mapping[str, str] = field(default_factory=dict)
    words: Mapping[str, str] = field(default_factory=dict)
    takes_value: str = ""
    long_values: frozenset[str] | None = None
    dashdash: bool = True
    old_style: bool = False
    operands: str | None = None
    exact: frozenset[str] = frozenset()


def _same(reason: str, *flags: str) -> dict[str, str]:
    return dict.fromkeys(flags, reason)


def _names(text: str) -> frozenset[str]:
    """The words of `text`, as a set (long tables of option names)."""
    return frozenset(text.split())


_ANY_LETTER = string.ascii_letters + string.digits
_GETOPT = FlagRules(takes_value=_ANY_LETTER)
"""A program without rules: nothing refused, and any option may take the next argument."""
_SHELL = FlagRules(short={"c": RUNS}, words={"-c": RUNS}, takes_value="oO")
_LAUNCHER = FlagRules(takes_value=_ANY_LETTER, operands=LAUNCHES)

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
        long_values=_names(
            "--block-size --format --hide --ignore --indicator-style --quoting-style "
            "--sort --tabsize --time --time-style --width"
        ),
    ),
    "du": FlagRules(
        short=_same(FOLLOWS, "L", "D", "H"),
        long={
            **_same(FOLLOWS, "--dereference", "--dereference-args"),
            "--files0-from": NAMES_FROM_FILE,
        },
        takes_value="BdtX",
        long_values=_names(
            "--block-size --exclude --exclude-from --files0-from --max-depth --threshold "
            "--time-style"
        ),
    ),  # fmt: skip
    "grep": FlagRules(
        short={"R": FOLLOWS},
        long={"--dereference-recursive": FOLLOWS},
        takes_value="efmABCdD",
        long_values=_names(
            "--regexp --file --max-count --label --after-context --before-context --context "
            "--group-separator --binary-files --devices --directories --exclude "
            "--exclude-from --exclude-dir --include"
        ),
    ),
    "rg": FlagRules(
        short={"L": FOLLOWS},
        long={"--follow": FOLLOWS, "--pre": RUNS, "--hostname-bin": RUNS},
        takes_value="ABCdeEfgjmMrtT",
    ),
    "fd": FlagRules(
        short={"x": RUNS, "X": RUNS, "L": FOLLOWS},
        long={**_same(RUNS, "--exec", "--exec-batch"), "--follow": FOLLOWS},
        takes_value="cdeEjoStxX",
    ),
    # cp -l follows symlinks when it copies recursively: `cp -rl sub copy` hard-links
    # every file of a folder outside that `sub/link` points to into the root
    "cp": FlagRules(
        short=_same(FOLLOWS, "L", "H", "l"),
        long=_same(FOLLOWS, "--dereference", "--link"),
        takes_value="St",
        long_values=frozenset(["--suffix", "--target-directory", "--sparse", "--no-preserve"]),
    ),
    "tar": FlagRules(
        short={"h": FOLLOWS, "I": RUNS, "F": RUNS, "T": NAMES_FROM_FILE, "P": ABSOLUTE},
        long={
            **_same(FOLLOWS, "--dereference", "--keep-directory-symlink"),
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
        exact=frozenset(["--file", "--checkpoint"]),
    ),
    "sort": FlagRules(
        long={"--compress-program": RUNS, "--files0-from": NAMES_FROM_FILE},
        takes_value="koStT",
        long_values=_names(
            "--key --output --field-separator --temporary-directory --buffer-size --parallel "
            "--batch-size --compress-program --files0-from --sort --random-source"
        ),
    ),
    "wc": FlagRules(
        long={"--files0-from": NAMES_FROM_FILE},
        long_values=frozenset(["--files0-from", "--total"]),
    ),
    "rsync": FlagRules(
        short={"e": RUNS, **_same(FOLLOWS, "L", "k", "K")},
        long={
            **_same(RUNS, "--rsh", "--rsync-path", "--daemon", "--config"),
            **_same(
                FOLLOWS,
                "--copy-links",
                "--copy-unsafe-links",
                "--copy-dirlinks",
                "--keep-dirlinks",
            ),
            "--files-from": NAMES_FROM_FILE,
        },
        takes_value="eBTfM",
    ),
    "tree": FlagRules(short={"l": FOLLOWS}, takes_value="HILPTo"),
    # -T tests the archive with unzip, -TT CMD with any command (also inside a
    # cluster, -qTT); zip's option values are many and take lists, so its checks
    # never stop at a -- (a file named -T is refused too)
    "zip": FlagRules(
        short={"T": RUNS}, long=_same(RUNS, "--test", "--unzip-command"), dashdash=False
    ),
    "chmod": FlagRules(
        short=_same(FOLLOWS, "L", "H"),
        long={"--dereference": FOLLOWS},
        long_values=frozenset(["--reference"]),
    ),
    "python": FlagRules(
        short={"c": RUNS},
        words={"-c": RUNS},
        takes_value="WXm",
        long_values=frozenset(["--check-hash-based-pycs"]),
    ),
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
    "make": FlagRules(
        short={"E": RUNS}, long={"--eval": RUNS}, words={"-E": RUNS}, takes_value="CfIoWE"
    ),  # fmt: skip
    "env": FlagRules(
        short={"S": LAUNCHES},
        long={"--split-string": LAUNCHES},
        takes_value="uCS",
        long_values=frozenset(["--unset", "--chdir", "--split-string"]),
        operands=LAUNCHES,
    ),
    "awk": FlagRules(takes_value="fvFW", operands=NO_SANDBOX),
    **dict.fromkeys(
        [
            "xargs",
            "nice",
            "nohup",
            "timeout",
            "stdbuf",
            "setsid",
            "ionice",
            "chrt",
            "taskset",
            "flock",
            "unshare",
            "nsenter",
            "chroot",
            "sudo",
            "doas",
            "su",
            "runuser",
            "setpriv",
            "strace",
            "ltrace",
            "watch",
            "time",
            "setarch",
            "prlimit",
            "systemd-run",
            "busybox",
            "script",
            "parallel",
            "sg",
            "firejail",
            "bwrap",
            "fakeroot",
            "proot",
            "valgrind",
            "eatmydata",
            "faketime",
            "torsocks",
            "proxychains",
            "catchsegv",
        ],
        _LAUNCHER,
    ),  # fmt: skip
}
FORCED: dict[str, tuple[str, ...]] = {
    "diff": ("--no-dereference",),
    "cp": ("--remove-destination",),
    "zip": ("--symlinks",),
    "sed": ("--sandbox",),
    "gawk": ("--sandbox",),
}
"""Program kind -> flags put before the given arguments, so that it cannot follow
symlinks out of the root or run programs: GNU diff compares the targets of links
in the folders it compares (with or without `-r`) unless told
`--no-dereference`; cp opens a file already at the destination and writes
through it (a symlink or a hard link to a file elsewhere) unless told
`--remove-destination`; zip stores what links point to unless told
`--symlinks`; GNU sed's `--sandbox` and gawk's refuse the commands
that run programs or open files named in the script (`e`, `w`, `r`; `system()`,
redirections)."""

ALIASES = {
    "egrep": "grep",
    "fgrep": "grep",
    "rgrep": "grep",
    "chown": "chmod",
    "chgrp": "chmod",
    "mawk": "awk",
    "nawk": "awk",
    "original-awk": "awk",
    "gsed": "sed",
    "fdfind": "fd",  # Debian's name for fd
}

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

GIT_WRITES = FlagRules(long={"--output": WRITES})
"""`--output` makes git's read-only commands (diff, log, show) write the text the
agent chose (`--format`) into any file, protected ones included; refused except
for `archive`, whose archive it is."""

GIT_LONG_VALUES = _names(
    """
    --add-header --after-context --anchored --anonymize-map --author --base --before-context
    --blob --branch --build-fake-ancestor --bundle-uri --candidates --cc --chmod --cleanup
    --color-moved-ws --command --compression --config --conflict --contents --context --count
    --cover-from-description --create --creation-factor --cruft-expiration --date
    --decorate-refs --decorate-refs-exclude --deepen --default --depth --diff-algorithm
    --diff-filter --directory --dst-prefix --empty --encoding --exclude --exclude-from
    --exclude-per-directory --exec --expire --expire-to --export-marks --extcmd --file
    --filename-max-length --filter --find-object --fixup --force-create --format --geometric
    --group --if-exists --if-missing --ignore-matching-lines --ignore-rev --ignore-revs-file
    --import-marks --import-marks-if-exists --in-reply-to --include --indent --index-output
    --index-version --initial-branch --inter-hunk-context --interdiff --into-name --jobs
    --keep-pack --line-prefix --local-user --mainline --marker-size --match --max-count
    --max-depth --max-pack-size --message --missing --mode --negotiation-tip --nl --object-dir
    --object-format --onto --origin --orphan --output --output-directory
    --output-indicator-context --output-indicator-new --output-indicator-old --padding
    --patch-format --path --pathspec-from-file --points-at --prefix --progress --push-option
    --quoted-cr --range-diff --raw-mode --receive-pack --recurse-submodules --reedit-message
    --reencode --ref --reference --reference-if-able --refmap --refs --refspec --remote --repo
    --reroll-count --resolvemsg --reuse-message --rotate-to --separate-git-dir
    --server-option --set-upstream-to --shallow-exclude --shallow-since --signature
    --signature-file --signed-tags --skip-to --socket --sort --source --squash --src-prefix
    --stage --start-number --stat-count --stat-graph-width --stat-name-width --stat-width
    --strategy --strategy-option --subject-prefix --suffix --tag-of-filtered-object
    --template --threads --timeout --to --tool --trailer --type --unpack-unreachable
    --upload-pack --uri-protocol --where --whitespace --width --window --window-memory
    --with-tree --word-diff-regex --ws-error-highlight
    """
)
"""Long options of any git subcommand whose value may be the next argument (what
`git SUBCOMMAND --git-completion-helper` lists with `=`, for every builtin), so that
`git log --decorate-refs -- --output=F` is known to give `--decorate-refs` the `--`."""

_GIT_LETTERS = "ABCFGILOSUXbcefgjlmopstuvx"
"""Short options of any git subcommand that take a value (`git SUBCOMMAND -h`), and
the diff options' (`-S`, `-G`, `-O`, `-I`, `-l`, `-U`)."""
_GIT_LETTERS_OF = {"status": "", "log": "L", "show": "L", "whatchanged": "L", "diff": "GIOSUl"}
"""The same for the subcommands a read-only rule allows: `log` and `show` read their
own options (`-L`, `--decorate-refs`) before the revision options, which end at the
first `--` whatever comes before it; `diff` takes the diff options as well when it
compares files outside a repository (`--no-index`)."""

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
    an abbreviation of one (and no option of its own, `rules.exact`)."""
    if name in rules.exact:
        return None
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


def _takes_next(arg: str, rules: FlagRules) -> bool:
    """Whether option `arg` may take the argument after it as its value."""
    if arg.startswith("--") and len(arg) > 2:
        if "=" in arg:
            return False
        return rules.long_values is None or any(abbreviates(arg, o) for o in rules.long_values)
    if arg.startswith("-") and len(arg) > 1:
        letters = arg[1:]
        for at, letter in enumerate(letters):
            if letter in rules.takes_value:
                return at == len(letters) - 1  # nothing glued: the value comes next
    return False


def options_end(args: Sequence[str], rules: FlagRules) -> int:
    """Index in `args` of the `--` that ends the options, len(args) when none does. Pure.

    A `--` that the option before it takes as its value (`grep -e -- -R`, `tar cf --`,
    whose value letters take the next arguments in turn) ends nothing; find's
    expression never ends (`rules.dashdash` off)."""
    if not rules.dashdash:
        return len(args)
    values = 0  # arguments still owed to the letters of tar's dash-less first argument
    if rules.old_style and args and not args[0].startswith("-"):
        values = sum(letter in rules.takes_value for letter in args[0]) + 1
    for index, arg in enumerate(args):
        owed = index < values
        if arg == "--" and not owed and not (index and _takes_next(args[index - 1], rules)):
            return index
    return len(args)


def options(
    args: Sequence[str], rules: FlagRules, end: int | None = None
) -> Iterator[tuple[int, str]]:
    """(index, argument) of each of `args` that can be an option: those before `end`,
    by default the `--` that ends the options (`options_end`)."""
    yield from enumerate(args[: options_end(args, rules) if end is None else end])


def _rules_of(kind: str) -> FlagRules:
    return RULES.get(ALIASES.get(kind, kind), _GETOPT)


def forced_flags(kinds: Iterable[str]) -> list[str]:
    """The `FORCED` flags of a program of `kinds`, to go before its arguments."""
    return [flag for kind in sorted(kinds) for flag in FORCED.get(ALIASES.get(kind, kind), ())]


def option_arguments(kinds: Iterable[str], args: Sequence[str]) -> list[str]:
    """The arguments of `args` that a program of `kinds` can read as options: those
    before the `--` that ends its options (the latest, when kinds differ), or all of
    them for find (its expression goes on after `--`)."""
    kinds = set(kinds)
    if "git" in kinds:
        end = git_options_end(args)
    else:
        end = max(options_end(args, _rules_of(kind)) for kind in kinds) if kinds else len(args)
    return list(args[:end])


def first_refused(
    args: Sequence[str], rules: FlagRules, program: str, end: int | None = None
) -> Refused | None:
    """The first of `args` (those before `end`, by default where the options end)
    that `rules` refuses, or None. Pure."""
    for index, arg in options(args, rules, end):
        reason = _refusal(arg, rules, first=index == 0)
        if reason is not None:
            return Refused(arg, reason.format(program=program))
    if rules.operands is not None:
        stop = options_end(args, rules) if end is None else end
        for index, arg in enumerate(args):
            if index != stop and _is_operand(arg, index > stop, program):
                return Refused(arg, rules.operands.format(program=program))
    return None


def _is_operand(arg: str, after_end: bool, program: str) -> bool:
    """An operand of a launcher: a word that is no option (every word after `--`), but
    not env's NAME=VALUE."""
    if not after_end and (arg.startswith("-") and len(arg) > 1 or arg == "--"):
        return False
    name, equals, _ = arg.partition("=")
    return not (program == "env" and equals and name.isidentifier())


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


def _remote(program: str, args: Sequence[str]) -> Refused | None:
    """A name with a colon before any slash is host:path to tar (the archive; GNU
    tar, without --force-local) and to rsync (any operand, `rsync://` too): they run
    rsh or ssh, or connect to a server, to reach it."""
    if program == "tar":
        names = _tar_archive_names(args)
    else:
        end = options_end(args, RULES[program])
        names = ((a, a) for i, a in enumerate(args) if i >= end or not a.startswith("-"))
    for arg, name in names:
        if ":" in name.split("/", 1)[0]:
            return Refused(arg, REMOTE.format(program=program))
    return None


_EXTRACTING = "extracts"
_TAR_EXTRACTS = FlagRules(
    short={"x": _EXTRACTING},
    long=_same(_EXTRACTING, "--extract", "--get"),
    takes_value=RULES["tar"].takes_value,
    old_style=True,
)
_UNZIP_READS = frozenset("lvtzpcZ")


def _unzip_only_reads(args: Sequence[str]) -> bool:
    """True when unzip run with `args` lists, tests or prints (`-l -v -t -z -p -c -Z`)
    and writes no file. Its options are those before the archive's name (after it,
    `-l` is a member to extract, `unzip a.zip -x -l` extracts all but `-l`), `-d`
    takes the next argument, and a `-` inside a cluster negates the letter before it
    (`--l`, `-l-`): such a cluster counts as no listing."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--" or not arg.startswith("-") or len(arg) == 1:
            return False
        letters = arg[1:]
        if "-" in letters:
            return False
        if _UNZIP_READS & set(letters.partition("d")[0]):
            return True
        index += 2 if letters.endswith("d") else 1
    return False


def extracts_archive(kinds: Iterable[str], args: Sequence[str]) -> bool:
    """True when a program of `kinds` run with `args` would extract an archive, writing
    files the archive names: tar with `-x`, `--extract` or `--get` in any spelling,
    unzip unless its options list, tests or prints (`_unzip_only_reads`). Both write
    through a symlink to a folder already on the way (`run_command` then refuses
    when the root holds one leading out). Pure."""
    kinds = {ALIASES.get(kind, kind) for kind in kinds}
    if "tar" in kinds and first_refused(args, _TAR_EXTRACTS, "tar") is not None:
        return True
    return "unzip" in kinds and not _unzip_only_reads(args)


def _git_values(subcommand: str | None) -> FlagRules:
    """What git's options that take a value are, for `subcommand` (see GIT_LONG_VALUES)."""
    letters = _GIT_LETTERS_OF.get(subcommand or "", _GIT_LETTERS)
    return FlagRules(takes_value=letters, long_values=GIT_LONG_VALUES)


def git_options_end(args: Sequence[str]) -> int:
    """Index in `args` (git's argv[1:]) of the `--` that ends the subcommand's
    options, len(args) when none does (see `options_end`)."""
    parts = git_parts(args)
    if parts.subcommand is None:
        return len(args)
    return len(parts.globals) + 1 + options_end(parts.rest, _git_values(parts.subcommand))


def _git_refused(args: Sequence[str]) -> Refused | None:
    parts = git_parts(args)
    refused = first_refused(parts.globals, GIT_GLOBAL_RULES, "git")
    if refused is not None or parts.subcommand is None:
        return refused
    rest = parts.rest[: options_end(parts.rest, _git_values(parts.subcommand))]
    if parts.subcommand in GIT_SUBCOMMAND_RULES:
        rules = GIT_SUBCOMMAND_RULES[parts.subcommand]
        if rules is None:
            return Refused(parts.subcommand, f"git {parts.subcommand} can run other programs")
        refused = first_refused(rest, rules, "git", end=len(rest))
        if refused is not None:
            return refused
    for arg in rest:
        name, _, value = arg.partition("=")
        if abbreviates(name, "--ignore-submodules") and value not in ("", "all"):
            return Refused(arg, SUBMODULES)  # the config keeps them out of sight: "all"
    refused = first_refused(rest, GIT_RULES, "git", end=len(rest))
    if refused is None and parts.subcommand != "archive":
        refused = first_refused(rest, GIT_WRITES, "git", end=len(rest))
    return refused


def refused_argument(kinds: Iterable[str], args: Sequence[str]) -> Refused | None:
    """The first argument of `args` (argv[1:]) that the built-in list refuses for a
    program of any of `kinds` (normalised names such as "git", "python"), or None.
    Pure."""
    kinds = set(kinds)
    for kind in sorted(kinds):
        kind = ALIASES.get(kind, kind)
        if kind == "awk" and "gawk" in kinds:
            continue  # gawk runs with --sandbox (FORCED)
        if kind == "git":
            refused = _git_refused(args)
        elif kind in RULES:
            refused = first_refused(args, RULES[kind], kind)
            if refused is None and kind in ("tar", "rsync"):
                refused = _remote(kind, args)
        else:
            refused = None
        if refused is not None:
            return refused
    return None
