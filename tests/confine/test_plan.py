"""The launcher plan, read as data (GBR-CONF-01): Landlock grants with exceptions, the
seccomp program (run by a small BPF interpreter), mount order, prefixes, secrets."""

from __future__ import annotations

import glob
import os
import struct
from pathlib import Path

import pytest

from gbr_node.confine import rights, seccomp
from gbr_node.confine.plan import Private, build_plan, install_prefix, readable_trees
from gbr_node.confine.policy import CommandPolicy, _expand
from gbr_node.confine.spawn import Report, parse_reports
from gbr_node.sandbox import Sandbox

EVERYTHING = rights.handled_fs(7)


def tree(tmp_path: Path, *files: str) -> Path:
    for name in files:
        path = tmp_path / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x")
    return tmp_path


def entries(folder: str):
    return [(entry.path, entry.is_symlink()) for entry in os.scandir(folder)]


def test_a_tree_without_exceptions_is_one_rule(tmp_path):
    top = str(tree(tmp_path, "a/b.txt"))
    assert rights.grant_tree(top, EVERYTHING, {}, entries) == [(top, EVERYTHING)]


def test_folders_above_an_exception_get_only_what_the_exception_may_have(tmp_path):
    top = tree(tmp_path, "pyproject.toml", ".git/config", "src/m.py", ".gbr/log.db")
    exceptions = {
        str(top / "pyproject.toml"): rights.READ,
        str(top / ".git"): rights.READ,
        str(top / ".gbr"): 0,
    }
    rules = dict(rights.grant_tree(str(top), EVERYTHING, exceptions, entries))
    assert rules[str(top)] == rights.READ_DIR  # names only: .gbr may not be read
    assert rules[str(top / "src")] == EVERYTHING
    assert rules[str(top / "pyproject.toml")] == rights.READ
    assert rules[str(top / ".git")] == rights.READ
    assert str(top / ".gbr") not in rules


def test_symlinks_get_no_rule_of_their_own(tmp_path):
    top = tree(tmp_path, "secret/key", "keep.txt")
    os.symlink("/etc", top / "link")
    rules = dict(rights.grant_tree(str(top), rights.READ, {str(top / "secret"): 0}, entries))
    assert str(top / "link") not in rules and str(top / "keep.txt") in rules


@pytest.mark.parametrize(
    ("abi", "fs_bits", "net", "scoped", "size"),
    [(1, 13, 0, 0, 8), (3, 15, 0, 0, 8), (4, 15, 3, 0, 16), (5, 16, 3, 0, 16), (7, 16, 3, 3, 24)],
)
def test_what_each_landlock_abi_can_handle(abi, fs_bits, net, scoped, size):
    assert rights.handled_fs(abi) == (1 << fs_bits) - 1
    assert rights.handled_net(abi, network=False) == net
    assert rights.handled_net(abi, network=True) == 0
    assert rights.handled_scopes(abi) == scoped
    assert rights.ruleset_attr_size(abi) == size


def run_bpf(program: bytes, nr: int, arch: int, arg0: int) -> int:
    """Evaluate a classic-BPF seccomp program on one syscall (only the opcodes we emit)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    ops = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == 0x20:
            acc = struct.unpack("=I", data[k : k + 4])[0]
        elif code in (0x15, 0x35):
            taken = acc == k if code == 0x15 else acc >= k
            pc += jt if taken else jf
        elif code == 0x06:
            return k
        pc += 1


ALLOW, REFUSE = 0x7FFF0000, 0x0005000D
X86, SOCKET, URING, OPEN = 0xC000003E, 41, 425, 2


@pytest.mark.parametrize(
    ("inet", "unix", "family", "verdict"),
    [
        (False, False, 2, REFUSE),
        (False, False, 1, REFUSE),
        (True, False, 2, ALLOW),
        (True, False, 1, REFUSE),
        (False, True, 1, ALLOW),
        (False, True, 10, REFUSE),
        (True, True, 2, ALLOW),
    ],
)
def test_seccomp_program_decides_socket_families(inet, unix, family, verdict):
    program = seccomp.filter_program("x86_64", allow_inet=inet, allow_unix=unix)
    assert run_bpf(program, SOCKET, X86, family) == verdict
    assert run_bpf(program, OPEN, X86, 0) == ALLOW
    for refused in (URING, 248, 249, 250):  # io_uring_setup, add_key, request_key, keyctl
        assert run_bpf(program, refused, X86, 0) == REFUSE
    assert run_bpf(program, 0x40000000 | SOCKET, X86, family) == REFUSE  # x32
    assert run_bpf(program, 102, 0x40000003, 1) == REFUSE  # i386 socketcall


def test_secret_globs_expand_like_glob(tmp_path):
    tree(tmp_path, "etc/shadow", "etc/shadow-", "etc/ssh/ssh_host_rsa_key", "etc/ssh/x.pub")
    patterns = [str(tmp_path / p) for p in ("etc/shadow*", "etc/ssh/ssh_host_*key", "etc/none")]
    assert sorted(_expand(patterns)) == sorted(hit for p in patterns for hit in glob.glob(p))


def test_install_prefix_is_the_folder_above_bin_only_when_it_looks_installed(tmp_path):
    tree(tmp_path, "venv/bin/python", "venv/pyvenv.cfg", "tools/bin/run", "opt/lib/", "opt/bin/x")
    assert install_prefix(str(tmp_path / "venv/bin/python")) == str(tmp_path / "venv")
    assert install_prefix(str(tmp_path / "tools/bin/run")) == str(tmp_path / "tools/bin")
    assert install_prefix(str(tmp_path / "opt/bin/x")) == str(tmp_path / "opt")


def test_a_prefix_holding_the_home_folder_is_narrowed_to_the_program(tmp_path):
    tree(tmp_path, "root/", "u/lib/", "u/bin/tool", "u/home/.ssh/id_rsa")
    policy = CommandPolicy(
        Sandbox(tmp_path / "root"),
        executables=(str(tmp_path / "u/bin/tool"),),
        home=str(tmp_path / "u/home"),
    )
    trees = readable_trees(policy, policy.secrets())
    assert str(tmp_path / "u/bin/tool") in trees and str(tmp_path / "u") not in trees


@pytest.fixture
def nested(tmp_path):
    root = tree(tmp_path / "root", "a/b/c.lock", "pyproject.toml", ".git/config", ".gbr/x.db")
    (tmp_path / "home").mkdir()
    policy = CommandPolicy(
        Sandbox(root, ["pyproject.toml", "**/*.lock"]), home=str(tmp_path / "home")
    )
    private = Private(str(tmp_path / "private"))
    os.mkdir(private.base)
    private.create()
    return policy, private


def _plan(policy, private, namespaces=True):
    return build_plan(
        policy,
        abi=7,
        argv=["/bin/true"],
        cwd=policy.root,
        env={"PATH": "/usr/bin"},
        new_root="/nowhere",
        private=None if namespaces else private,
    )


def test_mounts_come_parents_first_with_protected_paths_read_only_and_state_hidden(nested):
    policy, private = nested
    root = str(policy.root)
    mounts = _plan(policy, private)["mounts"]
    targets = [op[-1] for op in mounts]
    for index, target in enumerate(targets):
        parent = os.path.dirname(target)
        mounted_above = [t for t in targets[:index] if parent.startswith(t.rstrip("/") + "/")]
        assert target == "/" or mounted_above or parent == "/", target
    by_target = {op[-1]: op for op in mounts}
    assert by_target[root] == ("bind", root, "rw", root)
    for protected in ("pyproject.toml", ".git", "a/b/c.lock"):
        assert by_target[f"{root}/{protected}"][2] == "ro"
    for pin in ("a", "a/b"):  # a protected file's folders cannot be renamed away
        assert by_target[f"{root}/{pin}"] == ("bind", f"{root}/{pin}", "rw", f"{root}/{pin}")
    assert by_target[f"{root}/.gbr"] == ("hide", f"{root}/.gbr")
    assert targets.index(root) < targets.index(f"{root}/.git")
    assert by_target["/tmp"][0] == by_target[os.path.realpath(policy.home)][0] == "tmpfs"
    if os.path.exists("/etc/shadow"):
        assert by_target["/etc/shadow"] == ("hide", "/etc/shadow")


def test_the_environment_gets_a_private_tmp_and_home(nested):
    policy, private = nested
    ns, alone = _plan(policy, private)["env"], _plan(policy, private, namespaces=False)["env"]
    assert ns["TMPDIR"] == "/tmp" and ns["HOME"] == os.path.realpath(policy.home)
    assert alone["TMPDIR"] == private.tmp and alone["HOME"] == private.home
    assert ns["PATH"] == "/usr/bin"


def test_landlock_only_grants_the_root_entry_by_entry(nested):
    policy, private = nested
    root = str(policy.root)
    rules = {p: a for p, a, _ in _plan(policy, private, False)["landlock"]["paths"]}
    assert rules[root] == rights.READ_DIR
    assert rules[f"{root}/pyproject.toml"] == rights.READ
    assert f"{root}/.gbr" not in rules
    assert rules[private.tmp] == EVERYTHING


def test_status_frames_parse_and_a_torn_one_is_dropped():
    frames = b"E" + struct.pack("=Ii", 8, 2) + b"nope" + b"X" + struct.pack("=Ii", 4, 256)
    assert parse_reports(frames + b"F\x09") == [
        Report("E", "nope", errno=2),
        Report("X", wait_status=256),
    ]


def test_protected_entries_walk_only_as_deep_as_a_pattern_reaches(tmp_path):
    root = tree(tmp_path, "x.lock", "deep/y.lock", ".git/objects/z")
    assert Sandbox(root, ["*.lock"]).protected_entries() == [".git", "x.lock"]
    assert Sandbox(root, ["**/*.lock"]).protected_entries() == [".git", "deep/y.lock", "x.lock"]


def test_a_program_inside_the_root_opens_nothing_outside(tmp_path):
    """An allow-listed script inside the root is the agent's to rewrite: its `#!`
    line or a symlink in its place must not make a secret readable."""
    root = tree(tmp_path / "root", "tool.sh")
    tree(tmp_path, "home/.ssh/id_rsa", "private/notes.txt")
    (root / "tool.sh").write_text(f"#!{tmp_path}/private/notes.txt\n")
    os.symlink(tmp_path / "home/.ssh/id_rsa", root / "link")
    policy = CommandPolicy(
        Sandbox(root),
        executables=(str(root / "tool.sh"), str(root / "link")),
        home=str(tmp_path / "home"),
    )
    trees = readable_trees(policy, policy.secrets())
    assert not any(t.startswith(str(tmp_path / "private")) for t in trees)
    assert not any(t.startswith(str(tmp_path / "home")) for t in trees)
