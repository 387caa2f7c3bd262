"""run_command rules with real programs (issue 12, "Commands"): flags that make a program
follow a symlink out of the root, `--` ending the options, git's global options
before the subcommand, and a default profile that runs no arbitrary code.

Every root here holds `sub/escape -> outside/`, a symlink that `cat sub/escape/...`
can never read through: the same must hold whatever flags a program is given.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from gbr_node.config.loader import default_template
from gbr_node.config.validate import validate_text
from gbr_node.errors import SecurityViolation
from gbr_node.tools.rootlock import root_lock
from tests.tools.conftest import unconfined
from tests.tools.helpers import make_program, text_of

SECRET = "outside secret"


@pytest.fixture
def make_registry(make_registry):
    """Unconfined (`unconfined`): these are the checks that hold without the OS."""
    return unconfined(make_registry)


@pytest.fixture
def linked_root(root: Path, outside: Path) -> Path:
    (root / "sub").mkdir()
    (root / "sub" / "mine.txt").write_text("inside\n")
    (root / "sub" / "escape").symlink_to(outside)
    (root / "other").mkdir()
    (root / "other" / "mine.txt").write_text("inside too\n")
    (root / "other" / "escape").mkdir()
    (root / "other" / "escape" / "secret.txt").write_text("decoy\n")
    return root


def _copied(root: Path) -> bool:
    return (root / "copy" / "escape" / "secret.txt").is_file()


def _archived(root: Path) -> bool:
    return (root / "a.tar").is_file() and SECRET.encode() in (root / "a.tar").read_bytes()


# (argv, whether the outside content leaked: by output, or by a file left in the root)
FOLLOWING = [
    (["find", "-L", "sub", "-name", "secret.txt"], None),
    (["find", "sub", "-follow", "-name", "secret.txt"], None),
    (["ls", "-RL", "sub"], None),
    (["ls", "-R", "-L", "sub"], None),
    (["ls", "-lRL", "sub"], None),
    (["ls", "--dereference", "-R", "sub"], None),
    (["du", "-aL", "sub"], None),
    (["du", "-a", "--dereference", "sub"], None),
    (["grep", "-R", "secret", "sub"], None),
    (["grep", "-rR", "secret", "sub"], None),
    (["grep", "-nR", "secret", "sub"], None),
    (["grep", "--dereference-recursive", "secret", "sub"], None),
    (["cp", "-rL", "sub", "copy"], _copied),
    (["cp", "-RL", "sub", "copy"], _copied),
    (["cp", "-r", "--dereference", "sub", "copy"], _copied),
    (["cp", "-rl", "sub", "copy"], _copied),  # hard links to the files outside
    (["cp", "-R", "--link", "sub", "copy"], _copied),
    (["cp", "-r", "--li", "sub", "copy"], _copied),
    (["tar", "-chf", "a.tar", "sub"], _archived),
    (["tar", "chf", "a.tar", "sub"], _archived),
    (["tar", "-c", "-h", "-f", "a.tar", "sub"], _archived),
    (["tar", "-c", "--dereference", "-f", "a.tar", "sub"], _archived),
    # a "--" that the option before it takes as its value ends no checks
    (["grep", "-e", "--", "-R", "-e", "secret", "sub"], None),
    (["grep", "--regexp", "--", "-R", "-e", "secret", "sub"], None),
    (["grep", "-r", "--include", "--", "-R", "-e", "secret", "sub"], None),
    (["ls", "-I", "--", "-RL", "sub"], None),
    (["ls", "--ignore", "--", "-RL", "sub"], None),
    (["du", "-a", "--exclude", "--", "-L", "sub"], None),
    (["cp", "-r", "-S", "--", "-L", "sub", "copy"], _copied),
    (["tar", "-cf", "--", "-h", "sub"], lambda root: SECRET.encode() in (root / "--").read_bytes()),
]


def _leaked(argv: list[str], check, registry, root: Path) -> bool:
    try:
        text = text_of(registry.call("run_command", {"argv": argv}))
    except SecurityViolation:
        return False
    return check(root) if check else ("secret.txt" in text or SECRET in text)


@pytest.mark.parametrize(("argv", "check"), FOLLOWING, ids=[" ".join(a) for a, _ in FOLLOWING])
def test_no_flag_makes_a_program_follow_a_symlink_out_of_the_root(
    make_registry, linked_root, argv, check
) -> None:
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed")
    registry = make_registry(**{"run_command": {"allow": [argv[0]]}})
    with pytest.raises(SecurityViolation, match="follow"):
        registry.call("run_command", {"argv": argv})
    assert not _leaked(argv, check, registry, linked_root)


@pytest.mark.parametrize(
    "argv",
    [
        ["diff", "sub", "other"],  # GNU diff follows links in folders even without -r
        ["diff", "-r", "sub", "other"],
        ["diff", "-ru", "sub", "other"],
        ["diff", "--recursive", "sub", "other"],
    ],
    ids=" ".join,
)
def test_diff_compares_links_as_links(make_registry, linked_root, outside, argv) -> None:
    (linked_root / "sub" / "note.txt").symlink_to(outside / "secret.txt")
    (linked_root / "other" / "note.txt").write_text("mine\n")
    registry = make_registry(**{"run_command": {"allow": ["diff"]}})
    text = text_of(registry.call("run_command", {"argv": argv}))
    assert "is a symbolic link" in text
    assert SECRET not in text


def _tar_of(root: Path, name: str, data: bytes = b"written\n") -> None:
    with tarfile.open(root / "in.tar", "w") as archive:
        member = tarfile.TarInfo(name)
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))


def _zip_of(root: Path, name: str) -> None:
    with zipfile.ZipFile(root / "in.zip", "w") as archive:
        archive.writestr(name, "written\n")


def _tar_over_a_file_link(root: Path, outside: Path) -> None:
    """`sub/note -> outside/secret.txt` in the root, and an archive with a member `sub/note`."""
    (root / "sub" / "note").symlink_to(outside / "secret.txt")
    _tar_of(root, "sub/note", b"overwritten\n")


def _tar_hard_links_out(root: Path, outside: Path) -> None:
    """Hard-link members to the outside file, by absolute and by climbing names."""
    with tarfile.open(root / "in.tar", "w") as archive:
        for name, target in (("hl", str(outside / "secret.txt")), ("hl2", "../outside/secret.txt")):
            member = tarfile.TarInfo(name)
            member.type, member.linkname = tarfile.LNKTYPE, target
            archive.addfile(member)
        member = tarfile.TarInfo("hl")
        member.size = 12
        archive.addfile(member, io.BytesIO(b"overwritten\n"))  # written through the link


def _dst_with_a_link_out(root: Path, outside: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "x.txt").write_text("written\n")
    (root / "dst").mkdir()
    (root / "dst" / "x.txt").symlink_to(outside / "secret.txt")


# (name, setup(root, outside) or None, argv): each would write outside the root through
# sub/escape -> outside/, or through a symlink already at the destination
WRITES_THROUGH_LINKS = [
    ("cp_to_a_new_file_under_a_link", None, ["cp", "sub/mine.txt", "sub/escape/new.txt"]),
    ("cp_over_a_link_in_a_folder", _dst_with_a_link_out, ["cp", "-r", "src/.", "dst"]),
    ("cp_a_over_a_link_in_a_folder", _dst_with_a_link_out, ["cp", "-a", "src/.", "dst/"]),
    ("sort_o_a_new_file_under_a_link", None, ["sort", "-o", "sub/escape/new.txt", "sub/mine.txt"]),
    ("sort_output_glued", None, ["sort", "--output=sub/escape/new.txt", "sub/mine.txt"]),
    ("sed_w_command", None, ["sed", "-n", "w sub/escape/new.txt", "sub/mine.txt"]),
    ("sed_s_w_flag", None, ["sed", "s/inside/x/w sub/escape/new.txt", "sub/mine.txt"]),
    ("tar_x_keep_directory_symlink", lambda r, o: _tar_of(r, "sub/escape/new.txt"),
     ["tar", "-xf", "in.tar", "--keep-directory-symlink"]),
    # an extractor writes a member through a symlinked folder already on its way
    ("tar_x_through_a_link", lambda r, o: _tar_of(r, "sub/escape/new.txt"),
     ["tar", "-xf", "in.tar"]),
    ("tar_old_style_x", lambda r, o: _tar_of(r, "sub/escape/new.txt"), ["tar", "xf", "in.tar"]),
    ("tar_get", lambda r, o: _tar_of(r, "escape/new.txt"),
     ["tar", "--get", "-C", "sub", "-f", "in.tar"]),
    ("tar_extract_abbreviated", lambda r, o: _tar_of(r, "sub/escape/new.txt"),
     ["tar", "--extr", "--file=in.tar"]),
    ("unzip_through_a_link", lambda r, o: _zip_of(r, "sub/escape/new.txt"),
     ["unzip", "-o", "in.zip"]),
    ("unzip_quietly_into_a_folder", lambda r, o: _zip_of(r, "escape/new.txt"),
     ["unzip", "-qo", "in.zip", "-d", "sub"]),
    ("tar_x_overwrite_a_file_link", _tar_over_a_file_link,
     ["tar", "-xf", "in.tar", "--overwrite"]),
    ("tar_x_hard_link_members_out", _tar_hard_links_out, ["tar", "-xf", "in.tar"]),
    # after the archive's name -l is a member (here excluded), not the listing option
    ("unzip_excluding_a_member_named_l", lambda r, o: _zip_of(r, "sub/escape/new.txt"),
     ["unzip", "-o", "in.zip", "-x", "-l"]),
    ("unzip_l_negated", lambda r, o: _zip_of(r, "sub/escape/new.txt"),
     ["unzip", "-o", "--l", "in.zip"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("setup", "argv"),
    [c[1:] for c in WRITES_THROUGH_LINKS],
    ids=[c[0] for c in WRITES_THROUGH_LINKS],
)
def test_no_program_writes_through_a_symlink_out_of_the_root(
    make_registry, linked_root, outside, setup, argv
) -> None:
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed")
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    if setup is not None:
        setup(linked_root, outside)
    registry = make_registry(**{"run_command": {"allow": [argv[0]]}})
    with contextlib.suppress(SecurityViolation):  # refused, or run without following
        registry.call("run_command", {"argv": argv})
    after = {p.name: p.read_bytes() for p in outside.iterdir()}
    assert after == before


def test_an_archive_cannot_plant_the_link_a_second_one_writes_through(
    make_registry, root, outside
) -> None:
    with tarfile.open(root / "one.tar", "w") as archive:
        link = tarfile.TarInfo("planted")
        link.type, link.linkname = tarfile.SYMTYPE, str(outside)
        archive.addfile(link)
    _tar_of(root, "planted/new.txt")
    registry = make_registry(**{"run_command": {"allow": ["tar"]}})
    registry.call("run_command", {"argv": ["tar", "-xf", "one.tar"]})  # plants the link
    with pytest.raises(SecurityViolation, match="planted is a symlink leading out"):
        registry.call("run_command", {"argv": ["tar", "-xf", "in.tar"]})
    assert not (outside / "new.txt").exists()
    listed = text_of(registry.call("run_command", {"argv": ["tar", "-tf", "in.tar"]}))
    assert "planted/new.txt" in listed  # listing writes nothing: still allowed


EXTRACTIONS = [
    (["tar", "-xf", "in.tar"], True),
    (["tar", "--extract", "--file=in.tar"], True),
    (["unzip", "-o", "in.zip"], True),
    (["tar", "-tf", "in.tar"], False),
    (["unzip", "-l", "in.zip"], False),
]


def _tar_link_then_through(root: Path, outside: Path) -> None:
    with tarfile.open(root / "in.tar", "w") as archive:
        for name, target in (("absolute", str(outside)), ("climbing", "../outside")):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, target
            archive.addfile(link)
            member = tarfile.TarInfo(f"{name}/new.txt")
            member.size = 8
            archive.addfile(member, io.BytesIO(b"written\n"))


def _zip_link_then_through(root: Path, outside: Path) -> None:
    with zipfile.ZipFile(root / "in.zip", "w") as archive:
        link = zipfile.ZipInfo("planted")
        link.create_system, link.external_attr = 3, 0o120777 << 16  # a unix symlink
        archive.writestr(link, str(outside))
        archive.writestr("planted/new.txt", "written\n")


@pytest.mark.parametrize(
    ("setup", "argv"),
    [
        (_tar_link_then_through, ["tar", "-xf", "in.tar"]),
        (_tar_link_then_through, ["tar", "-xf", "in.tar", "--overwrite"]),
        (_zip_link_then_through, ["unzip", "-o", "in.zip"]),
    ],
    ids=["tar", "tar_overwrite", "unzip"],
)
def test_an_archive_never_writes_through_a_link_it_holds_itself(
    make_registry, root, outside, setup, argv
) -> None:
    """No link out is in the root before: tar and unzip make an archive's links
    last, so that its later members cannot go through them."""
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed")
    setup(root, outside)
    registry = make_registry(**{"run_command": {"allow": [argv[0]]}})
    with contextlib.suppress(SecurityViolation):
        registry.call("run_command", {"argv": argv})
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


@pytest.mark.parametrize(("argv", "alone"), EXTRACTIONS, ids=[" ".join(a) for a, _ in EXTRACTIONS])
def test_an_extraction_runs_alone(make_registry, root, argv, alone) -> None:
    """While another tool call changes the root (it holds the root's lock shared, as
    a write or a command does), an extraction waits, so that no parallel call can put
    a symlink out on its way between its check and its writes; a listing runs."""
    _tar_of(root, "x/new.txt")
    _zip_of(root, "x/new.txt")
    registry = make_registry(**{"run_command": {"allow": ["tar", "unzip"]}})
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        with root_lock(root).shared():
            started.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    started.wait(10)
    try:
        if alone:
            result = registry.call("run_command", {"argv": argv, "timeout_s": 0.3})
            assert result.is_error and f"{argv[0]} waits for the tool calls" in text_of(result)
            assert not (root / "x").exists()
        else:
            assert "x/new.txt" in text_of(registry.call("run_command", {"argv": argv}))
    finally:
        release.set()
        holder.join()


@pytest.mark.parametrize(
    ("link", "target", "refused"),
    [
        ("a/b/c/deep", "{outside}", True),  # anywhere in the root, however deep
        ("dangling", "{outside}/gone/x", True),  # its target need not exist
        ("up", "..", True),
        ("to_sub", "sub", False),  # links inside the root are fine
        ("a/b/back", "../../sub", False),
    ],
    ids=lambda v: v if isinstance(v, str) else str(v),
)
def test_any_symlink_out_of_the_root_stops_an_extraction(
    make_registry, root, outside, link, target, refused
) -> None:
    (root / "sub").mkdir()
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(target.format(outside=outside))
    _tar_of(root, "x/new.txt")
    registry = make_registry(**{"run_command": {"allow": ["tar"]}})
    if refused:
        with pytest.raises(SecurityViolation, match=f"{link} is a symlink leading out"):
            registry.call("run_command", {"argv": ["tar", "-xf", "in.tar"]})
    else:
        registry.call("run_command", {"argv": ["tar", "-xf", "in.tar"]})
        assert (root / "x" / "new.txt").read_text() == "written\n"


def test_zip_stores_links_as_links(make_registry, linked_root) -> None:
    if shutil.which("zip") is None:
        pytest.skip("zip is not installed")
    registry = make_registry(**{"run_command": {"allow": ["zip"]}})
    registry.call("run_command", {"argv": ["zip", "-qr", "a.zip", "sub"]})
    with zipfile.ZipFile(linked_root / "a.zip") as archive:
        assert "sub/escape/secret.txt" not in archive.namelist()
        assert SECRET.encode() not in b"".join(archive.read(n) for n in archive.namelist())


# (argv, the file its program would create): programs that run what they are told
RUNS_PROGRAMS = [
    (["env", "sh", "-c", "touch MARK"], "MARK"),
    (["env", "FOO=1", "sh", "-c", "touch MARK"], "MARK"),
    (["env", "-S", "sh -c 'touch MARK'"], "MARK"),
    (["env", "--", "sh", "-c", "touch MARK"], "MARK"),
    (["xargs", "sh", "-c", "touch MARK"], "MARK"),
    (["xargs", "-a", "sub/mine.txt", "touch"], "inside"),
    (["timeout", "5", "sh", "-c", "touch MARK"], "MARK"),
    (["nice", "touch", "MARK"], "MARK"),
    (["nohup", "touch", "MARK"], "MARK"),
    (["setsid", "touch", "MARK"], "MARK"),
    (["stdbuf", "-oL", "touch", "MARK"], "MARK"),
    (["sed", "1e touch MARK", "sub/mine.txt"], "MARK"),
    (["sed", "s/.*/touch MARK/e", "sub/mine.txt"], "MARK"),
    (["awk", 'BEGIN { system("touch MARK") }'], "MARK"),
    (["awk", 'BEGIN { print "x" | "sh -c \'touch MARK\'" }'], "MARK"),
    (["make", "--eval=x:\n\ttouch MARK", "x"], "MARK"),
    (["make", "-E", "x:\n\ttouch MARK", "x"], "MARK"),
    (["python3", "-W", "--", "-c", "open('MARK', 'w')"], "MARK"),
    (["zip", "-q", "a.zip", "sub/mine.txt", "-T", "-TT", "sh -c 'touch MARK'"], "MARK"),
    (["zip", "-qTT", "sh -c 'touch MARK'", "-T", "a.zip", "sub/mine.txt"], "MARK"),
    (["zip", "a.zip", "sub/mine.txt", "--test", "--unzip-command=sh -c 'touch MARK'"], "MARK"),
    (["zip", "a.zip", "-P", "--", "-T", "-TT", "sh -c 'touch MARK'", "sub/mine.txt"], "MARK"),
]


@pytest.mark.parametrize(
    ("argv", "made"), RUNS_PROGRAMS, ids=[" ".join(a) for a, _ in RUNS_PROGRAMS]
)
def test_no_allowed_program_starts_a_program_the_allow_list_does_not_name(
    make_registry, linked_root, argv, made
) -> None:
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed")
    registry = make_registry(**{"run_command": {"allow": [argv[0]]}})
    with contextlib.suppress(SecurityViolation):  # refused, or run sandboxed
        registry.call("run_command", {"argv": argv})
    assert not (linked_root / made).exists()


def test_sed_still_edits_and_cp_still_copies(make_registry, linked_root) -> None:
    registry = make_registry(**{"run_command": {"allow": ["sed", "cp"]}})
    text = text_of(registry.call("run_command", {"argv": ["sed", "s/in/out/", "sub/mine.txt"]}))
    assert "outside" in text
    registry.call("run_command", {"argv": ["cp", "-r", "sub", "copy"]})
    assert (linked_root / "copy" / "mine.txt").read_text() == "inside\n"
    assert (linked_root / "copy" / "escape").is_symlink()


def test_the_same_programs_without_those_flags_stay_inside(make_registry, linked_root) -> None:
    registry = make_registry(**{"run_command": {"allow": ["find", "ls", "grep", "cp"]}})
    runs = [
        ["find", "sub", "-name", "*.txt"],
        ["ls", "-lR", "sub"],
        ["grep", "-r", "inside", "sub"],
        ["cp", "-r", "sub", "copy"],
    ]
    for argv in runs:
        text = text_of(registry.call("run_command", {"argv": argv}))
        assert SECRET not in text and "secret.txt" not in text.replace("other/escape", "")
    assert (linked_root / "copy" / "escape").is_symlink()  # copied as a link, not followed


def test_a_value_after_dashdash_is_checked_as_a_path(make_registry, root, outside) -> None:
    (root / "-escape").symlink_to(outside / "secret.txt")
    registry = make_registry(**{"run_command": {"allow": ["cat"]}})
    with pytest.raises(SecurityViolation) as caught:
        registry.call("run_command", {"argv": ["cat", "--", "-escape"]})
    assert caught.value.subject == "-escape"


# (profile rule, argv): a flag-looking word after `--` is an operand, not refused
AFTER_DASHDASH = [
    ({"name": "echoargs", "deny_args": ["-x"]}, ["echoargs", "--", "-x"]),
    ({"name": "echoargs", "deny_args": ["--output"]}, ["echoargs", "--", "--output=notes.txt"]),
    ({"name": "git"}, ["git", "log", "--oneline", "--", "-c"]),
    ({"name": "git"}, ["git", "log", "--", "--upload-pack=x"]),
    ({"name": "git"}, ["git", "grep", "-e", "x", "--", "--exec=y"]),
]


@pytest.mark.parametrize(
    ("rule", "argv"), AFTER_DASHDASH, ids=[" ".join(a) for _, a in AFTER_DASHDASH]
)
def test_dashdash_ends_the_options(make_registry, bin_dir, root, rule, argv) -> None:
    make_program(bin_dir, "echoargs", 'for a in "$@"; do echo "arg:$a"; done')
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    registry = make_registry(
        search_path=f"{bin_dir}:/usr/bin:/bin", **{"run_command": {"allow": [rule]}}
    )
    text = text_of(registry.call("run_command", {"argv": argv}))  # it ran: not refused
    assert "exit code" in text
    if argv[0] == "echoargs":
        assert f"arg:{argv[-1]}" in text


def test_deny_args_refuse_abbreviations_of_long_options(make_registry, bin_dir) -> None:
    make_program(bin_dir, "echoargs", 'for a in "$@"; do echo "arg:$a"; done')
    rule = {"name": "echoargs", "deny_args": ["--output"]}
    registry = make_registry(search_path=str(bin_dir), **{"run_command": {"allow": [rule]}})
    for arg in ("--outp=x", "--out", "--output-dir=y"):
        with pytest.raises(SecurityViolation, match="rule"):
            registry.call("run_command", {"argv": ["echoargs", arg]})
    assert "arg:--o" not in text_of(registry.call("run_command", {"argv": ["echoargs", "-o"]}))


@pytest.fixture
def git_root(root: Path, outside: Path) -> Path:
    env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "PATH": "/usr/bin:/bin"}
    for folder in (root / "sub", outside):
        folder.mkdir(exist_ok=True)
        subprocess.run(["git", "init", "-q"], cwd=folder, check=True, env=env)
    (root / "sub" / "new.txt").write_text("x\n")
    (outside / "outside-file.txt").write_text("x\n")
    return root


# (argv, what the output shows): git's global options before the subcommand
GLOBAL_OPTIONS = [
    (["git", "-C", "sub", "status", "--short"], "?? new.txt"),
    (["git", "-C", "sub", "-C", ".", "status", "--short"], "?? new.txt"),
    (["git", "--no-pager", "-C", "sub", "status", "--short"], "?? new.txt"),
    (["git", "--git-dir=sub/.git", "--work-tree=sub", "status", "--short"], "?? new.txt"),
]


@pytest.mark.parametrize(
    ("argv", "shown"), GLOBAL_OPTIONS, ids=[" ".join(a[1:]) for a, _ in GLOBAL_OPTIONS]
)
def test_global_options_come_before_the_subcommand_the_rule_allows(
    make_registry, git_root, argv, shown
) -> None:
    rule = {"name": "git", "subcommands": ["status", "log"]}
    registry = make_registry(**{"run_command": {"allow": [rule]}})
    assert shown in text_of(registry.call("run_command", {"argv": argv}))


@pytest.mark.parametrize(
    "argv",
    [
        ["git", "-C", "sub", "push"],  # the real subcommand is not allowed
        ["git", "-C", "sub", "-c", "core.fsmonitor=x", "status"],
        ["git", "-C", "../outside", "status"],  # -C leaves the root
        ["git", "-C", "/", "status"],
        ["git", "-C", "sub", "log", "--", "../../outside/outside-file.txt"],
        ["git", "-C", "sub", "status", "../../outside"],  # relative to -C's folder
    ],
    ids=lambda argv: " ".join(argv[1:]),
)
def test_global_options_are_still_checked_like_every_argument(
    make_registry, git_root, argv
) -> None:
    rule = {"name": "git", "subcommands": ["status", "log"]}
    registry = make_registry(**{"run_command": {"allow": [rule]}})
    with pytest.raises(SecurityViolation):
        registry.call("run_command", {"argv": argv})


CODE_RUNNERS = {
    "python", "pytest", "node", "npm", "npx", "make", "cmake", "cargo", "go", "sh", "bash",
    "zsh", "perl", "ruby", "env", "xargs", "tox", "nox", "uv", "pip", "poetry", "yarn", "pnpm",
    "deno", "bun", "java", "gradle", "mvn", "awk", "sed", "find",
}  # fmt: skip


def test_the_default_profile_allows_no_interpreter_or_build_tool() -> None:
    allowed = validate_text(default_template(), file="default.toml").tools.run_command.allow
    names = {rule.name for rule in allowed}
    assert names == {"git", "ls"}
    assert not names & CODE_RUNNERS
    assert '# name = "pytest"' in default_template()  # the examples stay, commented
