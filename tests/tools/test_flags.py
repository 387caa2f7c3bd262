"""The built-in flag refusals of run_command, whatever the profile says [pure] (issues 2, 12).

One table per class: flags that run programs, flags that make a program follow
symlinks by itself (every spelling: clusters, abbreviations, `=value`, tar's
dash-less first argument), `--` ending the options, and git's global options
before the subcommand. Each row: (program kind, argv[1:], the refused
argument or None).
"""

from __future__ import annotations

import pytest

from gbr_node.tools.flags import (
    FOLLOWS,
    RUNS,
    forced_flags,
    git_parts,
    option_arguments,
    refused_argument,
)

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
]

FOLLOWS_LINKS = [
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
    ("tree", ["-l"], "-l"),
    ("chown", ["-RL", "u", "."], "-RL"),
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
]


def _ids(rows):
    return [f"{row[0]} {' '.join(row[1])}" for row in rows]


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
]


@pytest.mark.parametrize(("kind", "args"), AFTER_DASHDASH, ids=_ids(AFTER_DASHDASH))
def test_checks_stop_at_dashdash(kind, args):
    assert refused_argument({kind}, args) is None
    assert "--" not in option_arguments({kind}, args)


def test_option_arguments_stop_at_dashdash_except_for_find():
    assert option_arguments({"ls"}, ["-l", "--", "-x"]) == ["-l"]
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
