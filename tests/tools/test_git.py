"""git through run_command with a real git: no repository setting can start a program,
and git never works on a repository outside the root (issue 12, "Commands").

Each case plants a side door the way an agent could (a repository nested under
the root, a `.git` file, an included config file, `.gitattributes`) or as a
user's config may have it, wired to a program that leaves a marker file; the
command must run (or be refused) without the marker ever appearing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from gbr_node.errors import SecurityViolation
from gbr_node.tools.git import FIXED_SETTINGS, GIT_ENV, ConfigEntry, config_settings
from tests.tools.conftest import unconfined
from tests.tools.helpers import make_program, text_of

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture
def make_registry(make_registry):
    """Unconfined (`unconfined`): these are the checks that hold without the OS."""
    return unconfined(make_registry)


ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
}


def git(folder: Path, *args: str) -> str:
    """Run git as the person setting the scene (not through the sandbox)."""
    done = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=folder,
        env=ENV,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def repo(folder: Path, text: str = "hello\n") -> Path:
    """A repository at `folder` with one committed file a.txt, then a.txt touched."""
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q")
    (folder / "a.txt").write_text(text)
    git(folder, "add", "a.txt")
    git(folder, "commit", "-qm", "one")
    os.utime(folder / "a.txt", (1, 1))  # the index no longer vouches for it: git must look
    return folder


class Scene:
    """A root with an `evil` program (outside it) that writes `marker` when run."""

    def __init__(self, root: Path, outside: Path, bin_dir: Path) -> None:
        self.root, self.outside = root, outside
        self.marker = outside / "marker"
        body = f'echo "$0 $*" >> "{self.marker}"; cat'
        self.evil = str(make_program(bin_dir, "evil", body))

    def config(self, repository: Path, *settings: tuple[str, str]) -> None:
        for key, value in settings:
            git(repository, "config", key, value)


def _root_fsmonitor(s: Scene):
    s.config(repo(s.root), ("core.fsmonitor", s.evil))
    return ["status"]


def _nested_fsmonitor(s: Scene):
    repo(s.root)
    s.config(repo(s.root / "sub"), ("core.fsmonitor", s.evil))
    return ["-C", "sub", "status"]


def _nested_hook(s: Scene):
    repo(s.root)
    nested = repo(s.root / "sub")
    make_program(nested / ".git" / "hooks", "post-index-change", f"{s.evil}")
    return ["-C", "sub", "status"]


def _hooks_path(s: Scene):
    nested = repo(s.root / "sub")
    make_program(s.root / "my-hooks", "post-index-change", f"{s.evil}")
    s.config(nested, ("core.hooksPath", str(s.root / "my-hooks")))
    return ["-C", "sub", "status"]


def _external_diff(s: Scene):
    nested = repo(s.root / "sub")
    (nested / "a.txt").write_text("changed\n")
    s.config(nested, ("diff.external", s.evil))
    return ["-C", "sub", "diff"]


def _diff_driver_command(s: Scene):
    nested = repo(s.root / "sub")
    (nested / ".gitattributes").write_text("a.txt diff=x\n")
    (nested / "a.txt").write_text("changed\n")
    s.config(nested, ("diff.x.command", s.evil))
    return ["-C", "sub", "diff"]


def _textconv(args: list[str]):
    def setup(s: Scene):
        nested = repo(s.root / "sub")
        (nested / ".gitattributes").write_text("a.txt diff=x\n")
        git(nested, "add", ".gitattributes")
        (nested / "a.txt").write_text("changed\n")
        git(nested, "commit", "-qam", "two")
        s.config(nested, ("diff.x.textconv", s.evil))
        return ["-C", "sub", *args]

    return setup


def _filter(args: list[str]):
    def setup(s: Scene):
        nested = repo(s.root / "sub")
        (nested / ".gitattributes").write_text("a.txt filter=x\n")
        s.config(nested, ("filter.x.clean", s.evil), ("filter.x.smudge", s.evil))
        return ["-C", "sub", *args]

    return setup


def _included_config(s: Scene):
    nested = repo(s.root / "sub")
    (s.root / "extra.cfg").write_text(f"[core]\n\tfsmonitor = {s.evil}\n")
    s.config(nested, ("include.path", str(s.root / "extra.cfg")))
    return ["-C", "sub", "status"]


def _git_file_inside(s: Scene):
    data = repo(s.root / "data")
    (s.root / "work").mkdir()
    shutil.move(str(data / ".git"), str(s.root / "gitdir"))
    (s.root / "work" / ".git").write_text(f"gitdir: {s.root / 'gitdir'}\n")
    s.config(s.root / "work", ("core.worktree", str(s.root / "work")))
    s.config(s.root / "work", ("core.fsmonitor", s.evil))
    return ["-C", "work", "status"]


def _ssh_command(s: Scene):
    s.config(repo(s.root / "sub"), ("core.sshCommand", s.evil))
    return ["-C", "sub", "ls-remote", "ssh://127.0.0.1:9/x"]


def _git_proxy(s: Scene):
    s.config(repo(s.root / "sub"), ("core.gitProxy", s.evil))
    return ["-C", "sub", "ls-remote", "git://127.0.0.1:9/x"]


def _ext_transport(s: Scene):
    s.config(repo(s.root / "sub"), ("protocol.ext.allow", "always"))
    return ["-C", "sub", "ls-remote", f"ext::{s.evil} %S"]


def _upload_pack(s: Scene):
    nested = repo(s.root / "sub")
    repo(s.root / "other")
    s.config(
        nested,
        ("remote.origin.url", str(s.root / "other")),
        ("remote.origin.uploadpack", s.evil),
    )
    return ["-C", "sub", "fetch", "origin"]


def _signature_check(s: Scene):
    nested = repo(s.root / "sub")
    commit = git(nested, "cat-file", "commit", "HEAD")
    head, _, message = commit.partition("\n\n")
    signed = f"{head}\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n -----END PGP SIGNATURE-----\n"
    forged = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
        cwd=nested, env=ENV, input=f"{signed}\n{message}", capture_output=True, text=True,
        check=True,
    ).stdout.strip()  # fmt: skip
    git(nested, "update-ref", "HEAD", forged)
    s.config(nested, ("log.showSignature", "true"), ("gpg.program", s.evil))
    return ["-C", "sub", "log", "-1"]


def _archive_command(s: Scene):
    s.config(repo(s.root / "sub"), ("tar.tgz.command", s.evil))
    return ["-C", "sub", "archive", "--format=tgz", "-o", "out.tgz", "HEAD"]


def _submodule_filter(s: Scene):
    top = repo(s.root)
    module = repo(top / "mod")
    (module / ".gitattributes").write_text("a.txt filter=x\n")
    s.config(module, ("filter.x.clean", s.evil))
    git(top, "submodule", "add", "-q", "./mod", "mod")
    git(top, "config", "-f", ".gitmodules", "submodule.mod.ignore", "none")
    os.utime(module / "a.txt", (2, 2))
    return ["status"]


def _git_option(*args: str, external: bool = False):
    """git options that open a program named on the command line (`{evil}`: a copy
    of it the agent wrote inside the root, which the path checks let through)."""

    def setup(s: Scene):
        nested = repo(s.root / "sub")
        (nested / "a.txt").write_text("changed\n")
        if external:
            s.config(nested, ("diff.external", s.evil))
        planted = s.root / "tools" / "evil"
        planted.parent.mkdir()
        shutil.copy2(s.evil, planted)
        return ["-C", "sub", *(a.format(evil=planted) for a in args)]

    return setup


def _alias_spelled(subcommand: str, *settings: tuple[str, str]):
    """An alias `st` that runs `evil`, called as `subcommand` (git looks aliases up
    ignoring case, and a mistyped name runs the one it resembles under autocorrect)."""

    def setup(s: Scene):
        s.config(repo(s.root / "sub"), ("alias.st", f"!{s.evil}"), *settings)
        return ["-C", "sub", subcommand]

    return setup


def _external_diff_after(*args: str):
    """`diff.external` set, and `--ext-diff` behind a `--` that an option takes as its value."""

    def setup(s: Scene):
        nested = repo(s.root / "sub")
        (nested / "a.txt").write_text("changed\n")
        git(nested, "commit", "-qam", "two")
        (nested / "a.txt").write_text("changed again\n")
        s.config(nested, ("diff.external", s.evil))
        return ["-C", "sub", *args]

    return setup


def _conditional_include(condition: str, *settings: tuple[str, str]):
    """A textconv driver in a file of the root that the nested repository includes
    under `condition` (`{branch}`: its branch)."""

    def setup(s: Scene):
        args = _textconv(["show"])(s)
        nested = s.root / "sub"
        git(nested, "config", "--unset", "diff.x.textconv")
        (s.root / "inc.cfg").write_text(f'[diff "x"]\n\ttextconv = {s.evil}\n')
        branch = git(nested, "branch", "--show-current").strip()
        s.config(nested, *settings, (f"includeIf.{condition.format(branch=branch)}.path",
                                     str(s.root / "inc.cfg")))  # fmt: skip
        return args

    return setup


def _attributes_in_the_git_dir(s: Scene):
    nested = repo(s.root / "sub")
    (nested / ".git" / "info" / "attributes").write_text("a.txt filter=x\n")
    s.config(nested, ("filter.x.clean", s.evil))
    return ["-C", "sub", "status"]


def _worktree_config(s: Scene):
    nested = repo(s.root / "sub")
    s.config(nested, ("extensions.worktreeConfig", "true"))
    git(nested, "config", "--worktree", "core.fsmonitor", s.evil)
    return ["-C", "sub", "status"]


def _section_in_capitals(s: Scene):
    nested = repo(s.root / "sub")
    (nested / ".gitattributes").write_text("a.txt filter=X\n")
    config = nested / ".git" / "config"
    config.write_text(config.read_text() + f'[FILTER "X"]\n\tCLEAN = {s.evil}\n')
    return ["-C", "sub", "status"]


def _git_dir_symlink(s: Scene):
    other = repo(s.root / "other")
    s.config(other, ("core.fsmonitor", s.evil))
    (s.root / "w").mkdir()
    (s.root / "w" / ".git").symlink_to("../other/.git")
    return ["-C", "w", "status"]


def _submodule_diff(args: list[str], keep_gitmodules: bool = True):
    """A submodule whose own config has a textconv driver (or a clean filter, when its
    .gitmodules entry is gone), shown inline or looked into by `args`."""

    def setup(s: Scene):
        top = repo(s.root / "top")
        module = repo(top / "mod")
        (module / ".gitattributes").write_text("a.txt diff=x filter=x\n")
        git(module, "add", ".gitattributes")
        git(module, "commit", "-qm", "attributes")
        git(top, "submodule", "add", "-q", "./mod", "mod")
        git(top, "commit", "-qm", "module")
        (module / "a.txt").write_text("changed\n")
        git(module, "commit", "-qam", "change")
        git(top, "add", "mod")
        git(top, "commit", "-qm", "bump")
        s.config(top, ("diff.submodule", "diff"))
        if not keep_gitmodules:
            git(top, "rm", "-q", "--cached", ".gitmodules")
            (top / ".gitmodules").unlink()
            git(top, "commit", "-qm", "no .gitmodules")
        s.config(module, ("diff.x.textconv", s.evil), ("filter.x.clean", s.evil))
        os.utime(module / "a.txt", (2, 2))
        return ["-C", "top", *args]

    return setup


# (name, setup returning git's argv[1:]); every setup makes git run `evil` today
SIDE_DOORS = [
    ("root_repository_fsmonitor", _root_fsmonitor),
    ("nested_repository_fsmonitor", _nested_fsmonitor),
    ("nested_repository_hook", _nested_hook),
    ("hooks_path_into_the_root", _hooks_path),
    ("diff_external", _external_diff),
    ("diff_driver_command", _diff_driver_command),
    ("textconv_on_log_p", _textconv(["log", "-p", "-1"])),
    ("textconv_on_show", _textconv(["show"])),
    ("textconv_on_diff", _textconv(["diff", "HEAD~1"])),
    ("textconv_on_blame", _textconv(["blame", "a.txt"])),
    ("textconv_asked_for", _textconv(["grep", "--textconv", "changed"])),
    ("clean_filter_on_status", _filter(["status"])),
    ("filters_on_diff", _filter(["diff"])),
    ("smudge_filter_on_cat_file", _filter(["cat-file", "--filters", "HEAD:a.txt"])),
    ("include_path", _included_config),
    ("git_file_to_a_git_dir_in_the_root", _git_file_inside),
    ("ssh_command", _ssh_command),
    ("git_proxy", _git_proxy),
    ("ext_transport", _ext_transport),
    ("remote_upload_pack", _upload_pack),
    ("gpg_program_on_log", _signature_check),
    ("archive_command", _archive_command),
    ("submodule_config_through_status", _submodule_filter),
    ("grep_O", _git_option("grep", "-O{evil}", "changed")),
    ("grep_nO", _git_option("grep", "-nO{evil}", "changed")),
    ("grep_open_files_in_pager", _git_option("grep", "--open-files-in-pager={evil}", "changed")),
    ("grep_open_files_abbreviated", _git_option("grep", "--open-files={evil}", "changed")),
    ("diff_ext_diff", _git_option("diff", "--ext-diff", external=True)),
    ("log_ext_diff", _git_option("log", "-p", "--ext-diff", "-1", external=True)),
    ("alias_in_capitals", _alias_spelled("ST")),
    ("alias_in_mixed_case", _alias_spelled("sT")),
    ("alias_by_autocorrect", _alias_spelled("sx", ("help.autocorrect", "-1"))),
    ("alias_by_autocorrect_immediate", _alias_spelled("ts", ("help.autoCorrect", "immediate"))),
    ("log_decorate_refs_takes_dashdash", _external_diff_after("log", "--decorate-refs", "--",
                                                              "--ext-diff", "-p", "-1")),
    ("show_decorate_refs_exclude_takes_dashdash", _external_diff_after(
        "show", "--decorate-refs-exclude", "--", "--ext-diff")),
    ("diff_no_index_src_prefix_takes_dashdash", _external_diff_after(
        "diff", "--no-index", "--src-prefix", "--", "--ext-diff", "a.txt", ".git/config")),
    ("grep_e_takes_dashdash", _git_option("grep", "-e", "--", "-O{evil}", "-e", "changed")),
    ("include_if_on_branch", _conditional_include("onbranch:{branch}")),
    ("include_if_has_config", _conditional_include(
        "hasconfig:remote.*.url:https://example.org/**", ("remote.o.url", "https://example.org/x"))),
    ("attributes_in_the_git_dir", _attributes_in_the_git_dir),
    ("worktree_config", _worktree_config),
    ("config_section_in_capitals", _section_in_capitals),
    ("dot_git_symlink_to_a_repository_in_the_root", _git_dir_symlink),
    ("submodule_shown_inline", _submodule_diff(["show", "--submodule=diff"])),
    ("submodule_by_diff_submodule_setting", _submodule_diff(["log", "-p", "-1"])),
    ("submodule_without_gitmodules_on_status", _submodule_diff(["status"], keep_gitmodules=False)),
]  # fmt: skip


@pytest.fixture
def scene(root: Path, outside: Path, bin_dir: Path) -> Scene:
    return Scene(root, outside, bin_dir)


@pytest.mark.parametrize("setup", [c[1] for c in SIDE_DOORS], ids=[c[0] for c in SIDE_DOORS])
def test_no_repository_setting_makes_git_run_a_program(
    make_registry, scene: Scene, setup: Callable[[Scene], list[str]]
) -> None:
    args = setup(scene)
    registry = make_registry(**{"run_command": {"allow": ["git"]}})
    with contextlib.suppress(SecurityViolation):  # refused is fine; running the program is not
        registry.call("run_command", {"argv": ["git", *args], "timeout_s": 20})
    assert not scene.marker.exists(), scene.marker.read_text()


def _git_file_outside(s: Scene):
    repo(s.outside / "elsewhere")
    (s.root / "sub").mkdir()
    (s.root / "sub" / ".git").write_text(f"gitdir: {s.outside / 'elsewhere' / '.git'}\n")
    return ["-C", "sub", "log", "-p"]


def _work_tree_outside(s: Scene):
    nested = repo(s.root / "sub")
    s.config(nested, ("core.worktree", str(s.outside)))
    return ["-C", "sub", "status", "--short"]


def _git_dir_option_to_a_git_file(s: Scene):
    repo(s.outside / "elsewhere")
    (s.root / "sub").mkdir()
    (s.root / "sub" / "dot-git").write_text(f"gitdir: {s.outside / 'elsewhere' / '.git'}\n")
    return ["--git-dir=sub/dot-git", "log"]


def _common_dir_outside(s: Scene):
    elsewhere = repo(s.outside / "elsewhere")
    nested = repo(s.root / "sub")
    (nested / ".git" / "commondir").write_text(str(elsewhere / ".git") + "\n")
    return ["-C", "sub", "log", "-p"]


def _alternates_outside(s: Scene):
    elsewhere = repo(s.outside / "elsewhere")
    nested = repo(s.root / "sub")
    alternates = nested / ".git" / "objects" / "info" / "alternates"
    alternates.write_text(str(elsewhere / ".git" / "objects") + "\n")
    return ["-C", "sub", "cat-file", "--batch-all-objects", "--batch"]


def _alias(s: Scene):
    s.config(repo(s.root / "sub"), ("alias.st", f"!{s.evil}"))
    return ["-C", "sub", "st"]


def _naming_outside(*settings: tuple[str, str], args: tuple[str, ...] = ("log",)):
    """A nested repository whose config names files outside the root (`{secret}`, a
    file `{config}` of settings, or a repository `{repo}` holding a blob)."""

    def setup(s: Scene):
        nested = repo(s.root / "sub")
        elsewhere = repo(s.outside / "elsewhere")
        (s.outside / "settings.cfg").write_text("[user]\n\tname = outside secret\n")
        names = {
            "secret": str(s.outside / "elsewhere-secret.txt"),
            "config": str(s.outside / "settings.cfg"),
            "repo": str(elsewhere),
            "relative": os.path.relpath(s.outside / "elsewhere-secret.txt", nested),
        }
        for key, value in settings:
            s.config(nested, (key.format(**names), value.format(**names)))
        return ["-C", "sub", *args]

    return setup


def _submodule_from_outside(s: Scene):
    repo(s.outside / "elsewhere", "outside secret\n")
    top = repo(s.root)
    module = repo(top / "mod")
    git(top, "submodule", "add", "-q", "./mod", "mod")
    git(top, "commit", "-qm", "module")
    shutil.rmtree(module)
    (top / ".gitmodules").write_text(  # what the agent may write: .gitmodules is no .git/
        f'[submodule "mod"]\n\tpath = mod\n\turl = {s.outside / "elsewhere"}\n'
    )
    git(top, "submodule", "sync", "-q")
    return ["submodule", "update", "--init"]


def _rebase_todo(*lines: str):
    """A nested repository stopped in an interactive rebase whose todo list, which
    the agent can write, holds `lines`."""

    def setup(s: Scene):
        nested = repo(s.root / "sub")
        (nested / "a.txt").write_text("two\n")
        git(nested, "commit", "-qam", "two")
        env = {**ENV, "GIT_SEQUENCE_EDITOR": "sed -i '1i break'"}
        subprocess.run(["git", "rebase", "-q", "-i", "HEAD~1"], cwd=nested, env=env,
                       capture_output=True, check=True)  # fmt: skip
        todo = nested / ".git" / "rebase-merge" / "git-rebase-todo"
        todo.write_text("".join(line.format(evil=s.evil) + "\n" for line in lines))
        return ["-C", "sub", "rebase", "--continue"]

    return setup


def _lazy_fetch(remote_in: str = "config"):
    """A nested partial clone whose promisor remote lies outside the root, named in
    its config or in the old `remotes/` or `branches/` files of its git dir."""

    def setup(s: Scene):
        elsewhere = repo(s.outside / "elsewhere", "outside secret\n")
        blob = git(elsewhere, "rev-parse", "HEAD:a.txt").strip()
        s.config(elsewhere, ("uploadpack.allowAnySHA1InWant", "true"))
        nested = repo(s.root / "sub")
        s.config(
            nested,
            ("core.repositoryformatversion", "1"),
            ("extensions.partialClone", "origin"),
            ("remote.origin.promisor", "true"),
        )
        url = f"file://{elsewhere}"
        if remote_in == "config":
            s.config(nested, ("remote.origin.url", url))
        else:
            (nested / ".git" / remote_in).mkdir(exist_ok=True)
            line = f"URL: {url}" if remote_in == "remotes" else f"{elsewhere}#main"
            (nested / ".git" / remote_in / "origin").write_text(line + "\n")
        return ["-C", "sub", "show", blob]  # the blob is missing: a partial clone fetches it

    return setup


# (name, setup); git would read outside the root, or run an alias or a rebase todo: refused
REFUSED = [
    ("git_file_pointing_outside", _git_file_outside),
    ("work_tree_outside", _work_tree_outside),
    ("git_dir_option_to_a_git_file_pointing_outside", _git_dir_option_to_a_git_file),
    ("common_dir_outside", _common_dir_outside),
    ("object_alternates_outside", _alternates_outside),
    ("repository_alias", _alias),
    ("mailmap_file_outside", _naming_outside(("mailmap.file", "{secret}"), args=("log",))),
    ("blame_ignore_revs_file_outside", _naming_outside(
        ("blame.ignoreRevsFile", "{secret}"), args=("blame", "a.txt"))),
    ("blame_ignore_revs_file_climbing", _naming_outside(
        ("blame.ignoreRevsFile", "{relative}"), args=("blame", "a.txt"))),
    ("include_of_a_file_outside", _naming_outside(("include.path", "{config}"))),
    ("include_from_home", _naming_outside(("include.path", "~/.gitconfig"))),
    ("conditional_include_outside", _naming_outside(("includeIf.gitdir:/.path", "{config}"))),
    ("exclude_file_outside", _naming_outside(("core.excludesFile", "{secret}"), args=("status",))),
    ("remote_outside_fetched", _naming_outside(("remote.origin.url", "{repo}"),
                                               args=("fetch", "origin"))),
    ("remote_outside_as_file_url", _naming_outside(("remote.o.url", "file://{repo}"),
                                                   args=("ls-remote", "o"))),
    ("partial_clone_fetching_from_outside", _lazy_fetch()),
    ("partial_clone_remote_in_a_remotes_file", _lazy_fetch("remotes")),
    ("partial_clone_remote_in_a_branches_file", _lazy_fetch("branches")),
    ("url_rewritten_to_a_repository_outside", _naming_outside(
        ("url.{repo}.insteadOf", "mirror:"), args=("ls-remote", "mirror:x"))),
    ("submodule_url_outside_in_the_roots_own_repository", _submodule_from_outside),
    ("rebase_todo_exec", _rebase_todo("exec {evil}")),
    ("rebase_todo_x_after_picks", _rebase_todo("# comment", "  x {evil} --now")),
]  # fmt: skip


@pytest.mark.parametrize("setup", [c[1] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_git_is_refused_where_it_would_leave_the_root(make_registry, scene: Scene, setup) -> None:
    (scene.outside / "elsewhere-secret.txt").write_text("outside secret\n")
    args = setup(scene)
    registry = make_registry(**{"run_command": {"allow": ["git"]}})
    with pytest.raises(SecurityViolation):
        registry.call("run_command", {"argv": ["git", *args]})
    assert not scene.marker.exists()


def test_the_roots_own_repository_may_name_files_outside(make_registry, scene: Scene) -> None:
    top = repo(scene.root)
    (scene.outside / "mailmap").write_text("Someone Else <t@example.org>\n")
    scene.config(top, ("mailmap.file", str(scene.outside / "mailmap")))
    # (a confined command reads outside the root only where read_paths say it may)
    rules = {"allow": ["git"], "read_paths": [str(scene.outside)]}
    registry = make_registry(run_command=rules)
    argv = ["git", "log", "--format=%aN"]
    assert "Someone Else" in text_of(registry.call("run_command", {"argv": argv}))


def test_a_config_written_by_a_parallel_tool_call_never_lands_between_check_and_run(
    make_registry, scene: Scene
) -> None:
    """A peer (or the model's parallel calls) rewrites a nested repository's config
    through write_file while git runs there: the driver it adds must never run."""
    _textconv(["show"])(scene)
    config = "sub/.git/config"
    benign = (scene.root / config).read_text()
    armed = benign + f'[diff "x"]\n\ttextconv = {scene.evil}\n'
    git(scene.root / "sub", "config", "--unset", "diff.x.textconv")
    benign = (scene.root / config).read_text()
    registry = make_registry(**{"run_command": {"allow": ["git"]}})
    done = threading.Event()

    def rewrite() -> None:
        while not done.is_set():
            for text in (armed, benign):
                registry.call("write_file", {"path": config, "content": text})

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        for _ in range(40):
            with contextlib.suppress(SecurityViolation):
                registry.call("run_command", {"argv": ["git", "-C", "sub", "show"]})
            if scene.marker.exists():
                break
    finally:
        done.set()
        writer.join()
    assert not scene.marker.exists(), scene.marker.read_text()


def test_git_never_writes_a_protected_file_where_the_agent_says(make_registry, scene) -> None:
    top = repo(scene.root)
    before = (top / ".git" / "config").read_bytes()
    registry = make_registry(**{"run_command": {"allow": [
        {"name": "git", "subcommands": ["log"], "deny_args": ["--output"]}]}})  # fmt: skip
    fsmonitor = "--format=[core]%n%x09fsmonitor = touch pwned"
    for args in (
        ["log", "--decorate-refs", "--", "--output=.git/config", fsmonitor, "-1"],
        ["log", "--decorate-refs-exclude", "--", "--outp=.git/config", fsmonitor, "-1"],
        ["log", "-L", "--", "--output=.git/config", "-1"],
        ["log", "--output=.git/config", fsmonitor, "-1"],
    ):
        with pytest.raises(SecurityViolation):
            registry.call("run_command", {"argv": ["git", *args]})
    assert (top / ".git" / "config").read_bytes() == before


def test_the_roots_own_repository_works_even_with_its_git_dir_elsewhere(
    make_registry, scene: Scene, tmp_path: Path
) -> None:
    main = repo(tmp_path / "main")
    git(main, "worktree", "add", "-q", str(scene.root))  # the root is a linked worktree
    registry = make_registry(**{"run_command": {"allow": ["git"]}})
    (scene.root / "sub").mkdir()
    for argv in (["git", "log", "--oneline"], ["git", "-C", "sub", "log", "--oneline"]):
        assert " one" in text_of(registry.call("run_command", {"argv": argv}))


def test_git_output_is_what_git_says_without_the_disarmed_programs(make_registry, scene) -> None:
    args = _textconv(["show"])(scene)
    registry = make_registry(**{"run_command": {"allow": ["git"]}})
    shown = text_of(registry.call("run_command", {"argv": ["git", *args]}))
    assert "-hello\n+changed" in shown  # textconv replaced by the text itself
    assert not scene.marker.exists()


def test_every_git_run_has_the_fixed_settings_and_environment(make_registry, bin_dir) -> None:
    script = """
    case "$*" in *rev-parse*) echo "fatal: not a git repository" >&2; exit 128;; esac
    for a in "$@"; do echo "arg:$a"; done; /usr/bin/env
    """
    make_program(bin_dir, "git", script)
    registry = make_registry(search_path=str(bin_dir), **{"run_command": {"allow": ["git"]}})
    text = text_of(registry.call("run_command", {"argv": ["git", "diff"]}))
    assert "arg:--no-pager" in text
    for key, value in FIXED_SETTINGS:
        assert f"arg:{key}={value}" in text
    assert "arg:diff\narg:--no-ext-diff" in text
    for name, value in GIT_ENV.items():
        assert f"{name}={value}\n" in text


DISARMED = [
    ("filter.lfs.clean", "git-lfs clean -- %f", "filter.lfs.clean="),
    ("filter.x.process", "evil", "filter.x.process="),
    ("diff.word.textconv", "docx2txt", "diff.word.textconv=cat"),
    ("diff.x.command", "evil", "diff.x.command="),
    ("merge.ours.driver", "evil %A", "merge.ours.driver="),
    ("credential.https://example.org.helper", "store", "credential.https://example.org.helper="),
    ("trailer.sign.command", "evil", "trailer.sign.command="),
    ("tar.tar.xz.command", "evil", "tar.tar.xz.command="),
    ("hook.pre-commit.command", "evil", "hook.pre-commit.command="),
    ("gpg.ssh.defaultkeycommand", "evil", "gpg.ssh.defaultkeycommand="),
    ("core.alternaterefscommand", "evil", "core.alternaterefscommand="),
    ("submodule.mod.url", "./mod", "submodule.mod.ignore=all"),
    ("submodule.mod.update", "!evil", "submodule.mod.update=none"),
]


@pytest.mark.parametrize(("key", "value", "setting"), DISARMED, ids=[d[0] for d in DISARMED])
def test_program_settings_of_the_repository_are_disarmed(key, value, setting) -> None:
    assert setting in config_settings([ConfigEntry("file:.git/config", key, value)], "status")


def test_harmless_settings_are_left_as_they_are() -> None:
    entries = [
        ConfigEntry("file:.git/config", "core.bare", "false"),
        ConfigEntry("file:.git/config", "user.name", "me"),
        ConfigEntry("file:.git/config", "filter.lfs.required", "true"),
        ConfigEntry("file:.git/config", "alias.st", "status"),  # not the subcommand run
    ]
    assert config_settings(entries, "log") == []


@pytest.mark.parametrize(
    ("key", "match"),
    [
        ("filter.a=b.clean", "'='"),  # -c NAME=VALUE could not name it
        ("remote.origin.uploadpack", "first value"),  # git keeps the first one it reads
        ("remote.o.receivepack", "first value"),
    ],
)
def test_a_program_setting_that_no_later_setting_can_disarm_is_refused(key, match) -> None:
    with pytest.raises(SecurityViolation, match=match):
        config_settings([ConfigEntry("file:x", key, "evil")], "status")
