"""The built-in flag refusals of run_command, whatever the profile says [pure] (issues 2, 12).

One table per class: flags that run programs, flags that make a program follow
symlinks by itself (every spelling: clusters, abbreviations, `=value`, tar's
dash-less first argument), `--` ending the options, and git's global options
before the subcommand. Each row: (program kind, argv[1:], the refused
argument or None).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from gbr_node.tools.flags import (
    _GIT_LETTERS,
    FOLLOWS,
    GIT_LONG_VALUES,
    LAUNCHES,
    NO_SANDBOX,
    RUNS,
    WRITES,
    extracts_archive,
    forced_flags,
    git_parts,
    option_arguments,
    refused_argument,
)


def _ids(rows):
    return [f"{row[0]} {' '.join(row[1])}" for row in rows]


RUNS_PROGRAMS = [
    ("git", ["-c", "core.pager=sh", "log"], "-c"),
    ("git", ["-ccore.hooksPath=x", "commit"], "-ccore.hooksPath=x"),
    ("git", ["--config-env=core.pager=X", "log"], "--config-env=core.pager=X"),
    ("git", ["--exec-path=/tmp", "status"], "--exec-path=/tmp"),
    ("git", ["-C", "sub", "-c", "core.fsmonitor=x", "status"], "-c"),
    # -c anywhere before --: a newer git global option with a separate value that we
    # do not know would put git's subcommand later than ours
    ("git", ["--attr-source", "HEAD", "-c", "core.fsmonitor=x", "log"], "-c"),
    ("git", ["--future-option", "v", "-c", "core.fsmonitor=x", "log"], "-c"),
    ("git", ["log", "-c"], "-c"),
    ("git", ["grep", "-ci", "x"], "-ci"),
    ("git", ["log", "--config-env=core.pager=E"], "--config-env=core.pager=E"),
    ("git", ["fetch", "--upload-pack=touch x", "origin"], "--upload-pack=touch x"),
    ("git", ["fetch", "--upload-p=touch x", "origin"], "--upload-p=touch x"),
    ("git", ["push", "--receive-pack", "x"], "--receive-pack"),
    ("git", ["clone", "--template=tpl", "src", "dst"], "--template=tpl"),
    ("git", ["clone", "-u", "sh evil", "src"], "-u"),
    ("git", ["clone", "-c", "core.fsmonitor=x", "src"], "-c"),
    ("git", ["clone", "--config", "filter.a.smudge=x", "src"], "--config"),
    ("git", ["rebase", "-x", "make", "main"], "-x"),
    ("git", ["rebase", "-ix", "make", "main"], "-ix"),
    ("git", ["rebase", "--exec=make", "main"], "--exec=make"),
    ("git", ["archive", "--exec=evil", "--remote=x", "HEAD"], "--exec=evil"),
    ("git", ["-C", "sub", "config", "core.hooksPath", "h"], "config"),
    ("tar", ["-c", "--checkpoint-act=exec=evil", "-f", "a.tar", "x"], "--checkpoint-act=exec=evil"),
    (
        "tar",
        ["-c", "--checkpoint=1", "--checkpoint-action=exec=evil", "-fa.tar", "x"],
        "--checkpoint-action=exec=evil",
    ),
    ("fd", ["-e", "py", "-x", "sh", "-c", "evil"], "-x"),
    ("fd", ["-HIX", "rm"], "-HIX"),
    ("fd", ["x", "--exec-batch", "rm"], "--exec-batch"),
    ("fd", ["x", "--exec=rm"], "--exec=rm"),
    ("fdfind", ["-HX", "rm"], "-HX"),
    ("zip", ["a.zip", "x", "-T"], "-T"),
    ("zip", ["-qTT", "sh evil", "a.zip", "x"], "-qTT"),
    ("zip", ["a.zip", "x", "-TTsh"], "-TTsh"),
    ("zip", ["--unzip-command=sh", "a.zip", "x"], "--unzip-command=sh"),
    ("zip", ["--unzip-c", "sh", "a.zip", "x"], "--unzip-c"),
    ("zip", ["--test", "a.zip", "x"], "--test"),
    ("zip", ["a.zip", "-P", "--", "-TT", "evil", "x"], "-TT"),  # -- is the password
    ("git", ["submodule", "foreach", "rm -rf ."], "foreach"),
    ("git", ["submodule", "--quiet", "foreach", "x"], "foreach"),
    ("git", ["bisect", "run", "./evil"], "run"),
    ("git", ["difftool", "--extcmd=evil"], "difftool"),
    ("git", ["mergetool"], "mergetool"),
    ("git", ["maintenance", "start"], "maintenance"),
    ("git", ["diff", "--ext-diff"], "--ext-diff"),
    ("git", ["log", "-p", "--ext-d"], "--ext-d"),
    ("git", ["grep", "-O", "pattern"], "-O"),
    ("git", ["grep", "-Oevil", "pattern"], "-Oevil"),
    ("git", ["grep", "-nO", "pattern"], "-nO"),
    ("git", ["grep", "--open-files-in-pager=evil", "x"], "--open-files-in-pager=evil"),
    ("git", ["grep", "--open-files=evil", "x"], "--open-files=evil"),
    ("git", ["-C", "sub", "grep", "--open", "x"], "--open"),
    ("git", ["help", "log"], "help"),
    ("git", ["log", "--help"], "--help"),
    ("git", ["--help", "log"], "--help"),
    ("git", ["status", "--recurse-submodules"], "--recurse-submodules"),
    ("git", ["grep", "--recurse-sub", "x"], "--recurse-sub"),
    ("git", ["status", "--ignore-submodules=none"], "--ignore-submodules=none"),
    ("git", ["status", "--ignore-sub=dirty"], "--ignore-sub=dirty"),
    ("find", [".", "-name", "*.py", "-exec", "rm", "{}", ";"], "-exec"),
    ("find", [".", "-execdir", "sh", ";"], "-execdir"),
    ("find", [".", "-okdir", "x", ";"], "-okdir"),
    ("find", [".", "-delete"], "-delete"),
    ("find", [".", "-fprintf", "out", "%p"], "-fprintf"),
    ("find", ["--", ".", "-exec", "x", ";"], "-exec"),  # find's expression goes on after --
    ("tar", ["-cf", "a.tar", "--to-command=sh", "x"], "--to-command=sh"),
    ("tar", ["-x", "--use-compress=sh", "-f", "a.tar"], "--use-compress=sh"),
    ("tar", ["-cIevil", "-f", "a.tar", "x"], "-cIevil"),
    ("tar", ["-c", "--checkpoint-action=exec=sh", "x"], "--checkpoint-action=exec=sh"),
    ("tar", ["-cf", "host:a.tar", "x"], "host:a.tar"),
    ("tar", ["-cfhost:a.tar", "x"], "-cfhost:a.tar"),
    ("tar", ["cf", "user@host:a.tar", "x"], "user@host:a.tar"),
    ("tar", ["-c", "--file=host:a.tar", "x"], "--file=host:a.tar"),
    ("tar", ["-cf", "a.tar", "--rsh-command=evil", "x"], "--rsh-command=evil"),
    ("rg", ["--pre", "evil", "x"], "--pre"),
    ("rg", ["--pre=evil", "x"], "--pre=evil"),
    ("sort", ["--compress-program=evil", "x"], "--compress-program=evil"),
    ("python", ["-c", "print(1)"], "-c"),
    ("python", ["-Ic", "print(1)"], "-Ic"),
    ("python", ["-Icprint(1)"], "-Icprint(1)"),
    ("sh", ["-c", "id"], "-c"),
    ("bash", ["-xc", "id"], "-xc"),
    ("node", ["--eval=1"], "--eval=1"),
    ("node", ["-pe", "1"], "-pe"),
    ("perl", ["-ne", "print"], "-ne"),
    ("ruby", ["-e", "1"], "-e"),
    ("python", ["-W", "--", "-c", "code"], "-c"),  # -W takes the "--"
    ("make", ["--eval=x:;touch y", "x"], "--eval=x:;touch y"),
    ("make", ["-E", "x:;touch y"], "-E"),
    ("rg", ["--hostname-bin=evil", "x"], "--hostname-bin=evil"),
    ("rsync", ["-e", "sh -c evil", "a", "b"], "-e"),
    ("rsync", ["-ae", "evil", "a", "b"], "-ae"),
    ("rsync", ["--rsh=evil", "a", "b"], "--rsh=evil"),
    ("rsync", ["--rsync-path=evil", "a", "b"], "--rsync-path=evil"),
    ("rsync", ["-a", "a", "host:b"], "host:b"),
    ("rsync", ["-a", "rsync://host/m", "b"], "rsync://host/m"),
    ("rsync", ["-a", "--", "a", "user@host:b"], "user@host:b"),
    ("rsync", ["--daemon", "--config=rsyncd.conf"], "--daemon"),
    ("sort", ["-S", "--", "--compress-program=evil", "x"], "--compress-program=evil"),
    ("tar", ["cf", "--", "--to-command=sh", "x"], "--to-command=sh"),  # "--": the archive
    ("tar", ["-cf", "--", "-Ievil", "x"], "-Ievil"),
]

# A `--` right after an option that takes a value is that value, not the end of the
# options: what follows is still read as options (`grep -e -- -R`: the pattern "--").
DASHDASH_AS_A_VALUE = [
    ("git", ["log", "--decorate-refs", "--", "--ext-diff", "-p"], "--ext-diff"),
    ("git", ["log", "--decorate-r", "--", "--ext-diff"], "--ext-diff"),
    ("git", ["show", "--decorate-refs-exclude", "--", "--ext-diff"], "--ext-diff"),
    ("git", ["log", "-L", "--", "--output=f"], "--output=f"),
    ("git", ["-C", "sub", "grep", "-e", "--", "-Oevil", "x"], "-Oevil"),
    ("git", ["grep", "--max-depth", "--", "--open-files-in-pager=evil"],
     "--open-files-in-pager=evil"),
    ("git", ["diff", "--no-index", "-S", "--", "--ext-diff", "a", "b"], "--ext-diff"),
    ("git", ["commit", "-m", "--", "-c", "x=y"], "-c"),
    ("git", ["fetch", "--depth", "--", "--upload-pack=evil"], "--upload-pack=evil"),
    ("grep", ["-e", "--", "-R", "x", "."], "-R"),
    ("grep", ["-ie", "--", "-R", "x"], "-R"),
    ("grep", ["--regexp", "--", "-R", "x"], "-R"),
    ("grep", ["--include", "--", "-R", "x"], "-R"),
    ("ls", ["-I", "--", "-RL"], "-RL"),
    ("ls", ["--ignore", "--", "-L"], "-L"),
    ("ls", ["--ign", "--", "-L"], "-L"),
    ("du", ["--exclude", "--", "-L", "."], "-L"),
    ("du", ["-X", "--", "-L"], "-L"),
    ("cp", ["-r", "-S", "--", "-L", "a", "b"], "-L"),
    ("cp", ["--suffix", "--", "--dereference", "a", "b"], "--dereference"),
    ("tar", ["-cf", "--", "-h", "x"], "-h"),
    ("tar", ["cf", "--", "--dereference", "x"], "--dereference"),
    ("tar", ["-c", "--directory", "--", "-h", "x"], "-h"),  # tar's are not listed: any
    ("sort", ["-k", "--", "--files0-from=list"], "--files0-from=list"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "args", "refused"), DASHDASH_AS_A_VALUE, ids=_ids(DASHDASH_AS_A_VALUE)
)
def test_a_dashdash_taken_as_an_options_value_ends_no_checks(kind, args, refused):
    found = refused_argument({kind}, args)
    assert found is not None and found.argument == refused


def test_deny_args_look_past_a_dashdash_taken_as_a_value():
    args = ["log", "--decorate-refs", "--", "--output=.git/config", "--format=x"]
    assert "--output=.git/config" in option_arguments({"git"}, args)
    assert option_arguments({"git"}, ["log", "--oneline", "--", "--output=x"]) == [
        "log",
        "--oneline",
    ]
    assert "-x" in option_arguments({"mytool"}, ["-o", "--", "-x"])  # no rules: may be -o's


# A launcher runs the program its operands name, which the allow-list never sees; an
# awk without a sandbox mode runs commands from its program text.
LAUNCHERS = [
    ("env", ["sh", "-c", "id"], "sh", LAUNCHES),
    ("env", ["FOO=1", "sh"], "sh", LAUNCHES),
    ("env", ["-i", "--", "sh"], "sh", LAUNCHES),
    ("env", ["-S", "sh -c id"], "-S", LAUNCHES),
    ("env", ["-Ssh -c id"], "-Ssh -c id", LAUNCHES),
    ("env", ["--split-string=sh -c id"], "--split-string=sh -c id", LAUNCHES),
    ("env", ["--split=sh"], "--split=sh", LAUNCHES),
    ("xargs", ["sh", "-c", "id"], "sh", LAUNCHES),
    ("xargs", ["-a", "list", "rm"], "list", LAUNCHES),
    ("xargs", ["-0", "--", "rm"], "rm", LAUNCHES),
    ("timeout", ["5", "sh", "-c", "id"], "5", LAUNCHES),
    ("nice", ["-n", "5", "make"], "5", LAUNCHES),
    ("nohup", ["sh"], "sh", LAUNCHES),
    ("stdbuf", ["-oL", "sh"], "sh", LAUNCHES),
    ("setsid", ["sh"], "sh", LAUNCHES),
    ("flock", ["lock", "sh"], "lock", LAUNCHES),
    ("busybox", ["sh", "-c", "id"], "sh", LAUNCHES),
    ("strace", ["-f", "sh"], "sh", LAUNCHES),
    ("awk", ['BEGIN { system("id") }'], 'BEGIN { system("id") }', NO_SANDBOX),
    ("mawk", ["-f", "prog.awk", "x"], "prog.awk", NO_SANDBOX),
    ("awk", ["-F:", "--", "{print}"], "{print}", NO_SANDBOX),
]


@pytest.mark.parametrize(("kind", "args", "refused", "reason"), LAUNCHERS, ids=_ids(LAUNCHERS))
def test_a_launcher_may_not_start_a_program(kind, args, refused, reason):
    found = refused_argument({kind}, args)
    assert found is not None and found.argument == refused
    assert found.reason == reason.format(program=kind)


def test_the_launchers_without_a_program_and_a_sandboxed_awk_are_left_alone():
    assert refused_argument({"env"}, []) is None
    assert refused_argument({"env"}, ["-i", "FOO=1"]) is None
    assert refused_argument({"xargs"}, ["--version"]) is None
    assert refused_argument({"awk", "gawk"}, ['BEGIN { system("id") }']) is None  # --sandbox
    assert forced_flags({"awk", "gawk"}) == ["--sandbox"]


def test_git_writes_only_the_archive_where_the_agent_says():
    found = refused_argument({"git"}, ["log", "--output=.git/config", "--format=x"])
    assert found is not None and found.reason == WRITES.format(program="git")
    assert refused_argument({"git"}, ["diff", "--outp=x"]) is not None
    assert refused_argument({"git"}, ["archive", "--output=a.tar", "HEAD"]) is None
    assert refused_argument({"git"}, ["archive", "--output=a.tar", "--exec=x"]) is not None


FOLLOWS_LINKS = [
    ("fd", ["-HL", "x"], "-HL"),
    ("cp", ["-rl", "a", "b"], "-rl"),
    ("cp", ["-a", "--link", "a", "b"], "--link"),
    ("fd", ["--follow", "x", "."], "--follow"),
    ("fdfind", ["--foll", "x"], "--foll"),
    ("find", ["-L", ".", "-name", "x"], "-L"),
    ("find", ["-H", "."], "-H"),
    ("find", [".", "-follow", "-name", "x"], "-follow"),
    ("find", ["-P", ".", "-files0-from", "list"], "-files0-from"),
    ("ls", ["-L", "."], "-L"),
    ("ls", ["-RL"], "-RL"),
    ("ls", ["-laRL", "sub"], "-laRL"),
    ("ls", ["-H", "link"], "-H"),
    ("ls", ["-lH"], "-lH"),
    ("ls", ["--dereference", "-R"], "--dereference"),
    ("ls", ["--deref", "-R"], "--deref"),
    ("ls", ["--dereference-command-line-symlink-to-dir"],
     "--dereference-command-line-symlink-to-dir"),
    ("ls", [".", "-RL"], "-RL"),  # getopt reads options after operands too
    ("du", ["-L", "."], "-L"),
    ("du", ["-aL"], "-aL"),
    ("du", ["-shD", "x"], "-shD"),
    ("du", ["-H", "x"], "-H"),
    ("du", ["--dereference-args", "x"], "--dereference-args"),
    ("du", ["--files0-from=list"], "--files0-from=list"),
    ("grep", ["-R", "secret", "."], "-R"),
    ("grep", ["-rR", "secret"], "-rR"),
    ("grep", ["-inR", "secret"], "-inR"),
    ("grep", ["--dereference-recursive", "x"], "--dereference-recursive"),
    ("grep", ["--dereference", "x"], "--dereference"),
    ("egrep", ["-R", "x"], "-R"),
    ("rgrep", ["-R", "x"], "-R"),
    ("cp", ["-L", "link", "copy"], "-L"),
    ("cp", ["-rL", "sub", "copy"], "-rL"),
    ("cp", ["-aH", "sub", "copy"], "-aH"),
    ("cp", ["-r", "--dereference", "sub", "copy"], "--dereference"),
    ("tar", ["-chf", "a.tar", "sub"], "-chf"),
    ("tar", ["chf", "a.tar", "sub"], "chf"),
    ("tar", ["-c", "-h", "-f", "a.tar", "sub"], "-h"),
    ("tar", ["-c", "--dereference", "-f", "a.tar", "sub"], "--dereference"),
    ("tar", ["-c", "--deref", "-f", "a.tar", "sub"], "--deref"),
    ("tar", ["-cf", "a.tar", "-T", "list"], "-T"),
    ("tar", ["-c", "--files-from=list", "-f", "a.tar"], "--files-from=list"),
    ("tar", ["-xPf", "a.tar"], "-xPf"),
    ("tar", ["-x", "--absolute-names", "-f", "a.tar"], "--absolute-names"),
    ("rg", ["-L", "x"], "-L"),
    ("rg", ["--follow", "x"], "--follow"),
    ("tar", ["-xf", "a.tar", "--keep-directory-symlink"], "--keep-directory-symlink"),
    ("tar", ["-x", "--keep-dir", "-f", "a.tar"], "--keep-dir"),
    ("rsync", ["-aL", "sub", "copy"], "-aL"),
    ("rsync", ["-a", "--copy-links", "sub", "copy"], "--copy-links"),
    ("rsync", ["-a", "--copy-unsafe", "sub", "copy"], "--copy-unsafe"),
    ("rsync", ["-aK", "sub", "copy"], "-aK"),
    ("rsync", ["-a", "--keep-dirlinks", "sub", "copy"], "--keep-dirlinks"),
    ("rsync", ["-a", "--files-from=list", ".", "copy"], "--files-from=list"),
    ("tree", ["-l"], "-l"),
    ("chown", ["-RL", "u", "."], "-RL"),
    ("tar", ["-c", "--files=list", "-f", "a.tar"], "--files=list"),  # --files-from
    ("tar", ["-x", "--file=a.tar", "--files-from=list"], "--files-from=list"),
]  # fmt: skip

NOT_REFUSED = [
    ("git", ["status", "--short"]),
    ("git", ["add", "-u"]),
    ("git", ["log", "--oneline", "-x"]),
    ("git", ["log", "-Sfunc"]),  # pickaxe: the string is glued
    ("git", ["grep", "--count", "x"]),
    ("git", ["grep", "-eO", "x"]),  # the pattern "O"
    ("git", ["-C", "sub", "status"]),
    ("git", ["--version"]),
    ("git", ["status", "--ignore-submodules"]),
    ("git", ["status", "--ignore-submodules=all"]),
    ("git", ["status", "--no-recurse-submodules"]),
    ("git", ["diff", "--no-ext-diff"]),
    ("git", ["bisect", "start", "runaway"]),
    ("find", [".", "-name", "*.py", "-type", "f"]),
    ("find", [".", "-links", "2"]),
    ("ls", ["-c", "-la"]),
    ("ls", ["-lR", "sub"]),
    ("ls", ["-IL"]),  # -I takes a value: the pattern "L"
    ("ls", ["-P"]),
    ("du", ["-sh", "."]),
    ("du", ["-P", "."]),
    ("grep", ["-r", "secret", "."]),
    ("grep", ["-eR", "x"]),  # the pattern "R"
    ("grep", ["-A3", "-rn", "x"]),
    ("cp", ["-r", "sub", "copy"]),
    ("cp", ["-a", "sub", "copy"]),
    ("tar", ["-czf", "a.tar.gz", "sub"]),
    ("tar", ["czf", "a.tar.gz", "sub"]),
    ("tar", ["-xf", "./host:a.tar"]),
    ("tar", ["-c", "--mtime=2020-01-01 00:00", "-f", "a.tar", "x"]),
    ("tar", ["-C", "sub", "-cf", "a.tar", "."]),
    ("diff", ["-u", "a", "b"]),
    ("diff", ["-r", "a", "b"]),  # run with --no-dereference (FORCED)
    ("python", ["-m", "pytest", "-q"]),
    ("sort", ["-k2", "x"]),
    ("wc", ["-l", "x"]),
    ("cat", ["-L", "x"]),  # programs without rules are left to the profile
    ("python", ["-Wc", "script.py"]),  # the warning filter "c"
    ("git", ["archive", "--output=a.tar", "HEAD"]),
    ("rsync", ["-a", "sub/", "copy/"]),
    ("rsync", ["-a", "./host:x", "copy"]),
    ("env", ["-i", "FOO=1"]),
    # an option of its own, not an abbreviation of the refused one it begins
    ("tar", ["-x", "--file=a.tar"]),
    ("tar", ["-c", "--file", "a.tar", "x"]),
    ("tar", ["-c", "--checkpoint=100", "-f", "a.tar", "x"]),
    ("zip", ["-qr", "a.zip", "sub", "-x", "*.o"]),
    ("fd", ["-e", "X", "-t", "f", "x"]),  # the extension "X"
    ("fd", ["-H", "--type", "f", "-E", "L", "x"]),
]


@pytest.mark.parametrize(("kind", "args", "refused"), RUNS_PROGRAMS, ids=_ids(RUNS_PROGRAMS))
def test_flags_that_run_other_programs_are_refused(kind, args, refused):
    found = refused_argument({kind}, args)
    assert found is not None and found.argument == refused


@pytest.mark.parametrize(("kind", "args", "refused"), FOLLOWS_LINKS, ids=_ids(FOLLOWS_LINKS))
def test_flags_that_make_a_program_follow_links_are_refused(kind, args, refused):
    found = refused_argument({kind}, args)
    assert found is not None and found.argument == refused
    assert "follow" in found.reason or "names" in found.reason or "absolute" in found.reason


@pytest.mark.parametrize(("kind", "args"), NOT_REFUSED, ids=_ids(NOT_REFUSED))
def test_ordinary_flags_are_left_alone(kind, args):
    assert refused_argument({kind}, args) is None


def test_diff_is_always_told_not_to_follow_links():
    assert forced_flags({"diff"}) == ["--no-dereference"]
    assert forced_flags({"ls", "grep"}) == []


def test_cp_never_writes_through_what_is_at_the_destination_and_sed_runs_sandboxed():
    assert forced_flags({"cp"}) == ["--remove-destination"]
    assert forced_flags({"sed"}) == ["--sandbox"]
    assert forced_flags({"zip"}) == ["--symlinks"]


def test_reasons_say_why_in_words_naming_the_program():
    assert refused_argument({"ls"}, ["-RL"]).reason == FOLLOWS.format(program="ls")
    assert refused_argument({"find"}, ["-exec"]).reason == RUNS


# `--` ends the options: what follows is operands (paths, pathspecs), never flags.
AFTER_DASHDASH = [
    ("git", ["log", "--", "-c"]),
    ("git", ["log", "--oneline", "--", "--upload-pack=x"]),
    ("git", ["grep", "x", "--", "-O"]),
    ("git", ["diff", "HEAD", "--", "--ext-diff"]),
    ("ls", ["-l", "--", "-L"]),
    ("grep", ["-n", "x", "--", "-R"]),
    ("du", ["--", "-L"]),
    ("cp", ["--", "-L", "copy"]),
    ("tar", ["-cf", "a.tar", "--", "-h", "host:x"]),
    ("python", ["script.py", "--", "-c"]),
    ("git", ["log", "-p", "--", "-c"]),  # -p takes no value in log
    ("git", ["status", "-s", "--", "-c"]),
    ("git", ["diff", "--no-renames", "--", "--ext-diff"]),
    ("git", ["log", "--format=%s", "--", "--output=x"]),  # the value is glued
    ("git", ["grep", "-e", "x", "--", "-O"]),  # -e took "x"
    ("grep", ["-e", "x", "--", "-R"]),
    ("grep", ["-nr", "--", "-R"]),
    ("ls", ["-lI", "x", "--", "-L"]),
    ("ls", ["--ignore=x", "--", "-L"]),
    ("tar", ["cf", "a.tar", "--", "-h"]),  # f took a.tar
    ("tar", ["-xf", "a.tar", "-C", "sub", "--", "-h"]),
]


@pytest.mark.parametrize(("kind", "args"), AFTER_DASHDASH, ids=_ids(AFTER_DASHDASH))
def test_checks_stop_at_dashdash(kind, args):
    assert refused_argument({kind}, args) is None
    assert "--" not in option_arguments({kind}, args)


def test_option_arguments_stop_at_dashdash_except_for_find():
    assert option_arguments({"ls"}, ["-l", "--", "-x"]) == ["-l"]
    assert option_arguments({"grep"}, ["-e", "--", "--", "-R"]) == ["-e", "--"]  # -e's "--"
    assert refused_argument({"grep"}, ["-e", "--", "--", "-R"]) is None
    assert option_arguments({"find"}, ["--", ".", "-x"]) == ["--", ".", "-x"]


GIT_SPLITS = [
    (["status"], (), "status", ()),
    (["-C", "sub", "status", "-s"], ("-C", "sub"), "status", ("-s",)),
    (["-C", "a", "-C", "b", "log"], ("-C", "a", "-C", "b"), "log", ()),
    (["--git-dir", "x/.git", "--work-tree=x", "diff"], ("--git-dir", "x/.git", "--work-tree=x"),
     "diff", ()),
    (["--no-pager", "-P", "show", "HEAD"], ("--no-pager", "-P"), "show", ("HEAD",)),
    (["-c", "a=b", "log"], ("-c", "a=b"), "log", ()),
    (["--version"], ("--version",), None, ()),
]  # fmt: skip


@pytest.mark.parametrize(("args", "globals_", "subcommand", "rest"), GIT_SPLITS)
def test_git_global_options_come_before_the_real_subcommand(args, globals_, subcommand, rest):
    parts = git_parts(args)
    assert (parts.globals, parts.subcommand, parts.rest) == (globals_, subcommand, rest)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_every_git_option_that_takes_a_value_is_known():
    """The table holds every option of the installed git that may take the next
    argument as its value: `--git-completion-helper` (long, with `=`) and `-h`
    (short, with `<value>`) of every builtin."""
    builtins = subprocess.run(
        ["git", "--list-cmds=builtins"], capture_output=True, text=True, check=True
    ).stdout.split()
    long_values, letters = set(), set()
    for name in builtins:
        for flag, pick in (("--git-completion-helper", "long"), ("-h", "short")):
            done = subprocess.run(["git", name, flag], capture_output=True, text=True)
            text = done.stdout + done.stderr
            if pick == "long":
                long_values |= {w[:-1] for w in text.split() if w.startswith("--") and w[-1] == "="}
            else:
                letters |= set(re.findall(r"^\s+-([A-Za-z0-9])(?:, --[a-z-]+)? <", text, re.M))
    assert long_values <= GIT_LONG_VALUES, sorted(long_values - GIT_LONG_VALUES)
    assert letters <= set(_GIT_LETTERS), sorted(letters - set(_GIT_LETTERS))


EXTRACTS = [
    ("tar", ["-xf", "a.tar"], True),
    ("tar", ["xvf", "a.tar"], True),
    ("tar", ["-v", "--extract", "-f", "a.tar"], True),
    ("tar", ["--get", "-f", "a.tar"], True),
    ("tar", ["--extr", "-f", "a.tar"], True),
    ("tar", ["-C", "sub", "-xzf", "a.tgz"], True),
    ("tar", ["-tf", "a.tar"], False),
    ("tar", ["-cf", "a.tar", "x"], False),
    ("tar", ["-cf", "x", "--", "-x"], False),  # a file named -x
    ("unzip", ["a.zip"], True),
    ("unzip", ["-o", "a.zip", "-d", "out"], True),
    ("unzip", ["-l", "a.zip"], False),
    ("unzip", ["-qt", "a.zip"], False),
    ("unzip", ["-p", "a.zip", "x"], False),
    ("unzip", ["-ld", "out", "a.zip"], False),  # -d takes "out"
    ("unzip", ["-d", "out", "-l", "a.zip"], False),
    ("unzip", ["-Z", "-1", "a.zip"], False),
    ("unzip", ["a.zip", "-l"], True),  # after the archive: a member named -l
    ("unzip", ["-o", "a.zip", "-x", "-l"], True),  # all but the member -l
    ("unzip", ["--l", "a.zip"], True),  # -l negated
    ("unzip", ["-l-", "a.zip"], True),
    ("unzip", ["-dl", "a.zip"], True),  # into the folder "l"
    ("unzip", ["--", "-l"], True),  # the archive -l
    ("tar", ["-x", "--file=a.tar"], True),
    ("tar", ["--ext", "-f", "a.tar"], True),
    ("cp", ["-r", "a", "b"], False),
]


@pytest.mark.parametrize(("kind", "args", "extracts"), EXTRACTS, ids=_ids(EXTRACTS))
def test_extracting_an_archive_is_told_from_listing_it(kind, args, extracts):
    assert extracts_archive({kind}, args) is extracts
