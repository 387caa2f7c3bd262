"""Ordinary work still works under confinement (GBR-CONF-01): the project's pytest, a
file written inside the root, system libraries read, git status; with the
network only when the profile allows it."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gbr_node.config.profile import ToolsConfig
from gbr_node.sandbox import Sandbox
from gbr_node.tools import build_registry
from tests.confine.conftest import SYSTEM_PATH, World, build_world
from tests.tools.helpers import text_of


@pytest.fixture(params=["namespaces", "landlock"])
def confined(request, tmp_path, monkeypatch) -> World:
    return build_world(tmp_path, monkeypatch, request.param)


def test_the_projects_pytest_runs_and_passes(confined: World):
    if not (Path(sys.prefix) / "bin" / "pytest").exists():
        pytest.skip("no pytest in this interpreter's prefix")
    tests = confined.root / "work" / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef two():\n    return 2\n"
    )
    (tests / "test_sum.py").write_text(
        "def test_sum(two, tmp_path):\n"
        "    (tmp_path / 'scratch').write_text('x')\n"
        "    assert 1 + 1 == two\n"
    )
    result = confined.run("pytest", "-q", "work/tests")
    assert not result.is_error, text_of(result)
    assert "1 passed" in text_of(result)


def test_a_file_written_inside_the_root_is_there_afterwards(confined: World):
    (confined.root / "attack.py").write_text(
        "open('work/out.txt', 'w').write('made by a command')\n"
    )
    result = confined.run("python3", "attack.py")
    assert not result.is_error, text_of(result)
    assert (confined.root / "work" / "out.txt").read_text() == "made by a command"


def test_a_new_file_directly_in_the_root(confined: World):
    """Namespaces: any new file in the root. Landlock alone cannot create one in a
    folder that holds protected paths (the root holds .git): refused, as the README says."""
    (confined.root / "attack.py").write_text("open('new.txt', 'w').write('new')\n")
    result = confined.run("python3", "attack.py")
    if confined.mode == "namespaces":
        assert not result.is_error, text_of(result)
        assert (confined.root / "new.txt").read_text() == "new"
    else:
        assert result.is_error and "Permission denied" in text_of(result)
        assert not (confined.root / "new.txt").exists()


def test_system_libraries_and_the_temp_folder_are_usable(confined: World):
    (confined.root / "attack.py").write_text(
        "import json, os, sqlite3, ssl, tempfile\n"
        "print(len(open(os.__file__).read()) > 0, len(os.listdir('/usr/lib')) > 0)\n"
        "with tempfile.NamedTemporaryFile() as f:\n"
        "    f.write(b'x')\n"
        "db = sqlite3.connect(os.path.join(tempfile.gettempdir(), 'x.db'))\n"
        "db.execute('create table t (x)')\n"
        "print('HOME', os.path.isdir(os.environ['HOME']), json.dumps([1]))\n"
    )
    result = confined.run("python3", "attack.py")
    assert not result.is_error, text_of(result)
    assert "True True" in text_of(result) and "HOME True [1]" in text_of(result)


def test_git_status_works_in_the_confined_root(confined: World):
    subprocess.run(["git", "init", "-q", str(confined.root)], check=True)
    (confined.root / "work" / "file.txt").write_text("x\n")
    result = confined.run("git", "status")
    assert not result.is_error, text_of(result)
    assert "work/" in text_of(result)


GIT = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]


def _repository_with_worktree(tmp_path: Path, worktree: Path) -> Path:
    main = tmp_path / "main-repo"
    subprocess.run([*GIT, "init", "-q", str(main)], check=True)
    (main / "a.txt").write_text("a\n")
    subprocess.run([*GIT, "-C", str(main), "add", "a.txt"], check=True)
    subprocess.run([*GIT, "-C", str(main), "commit", "-qm", "a"], check=True)
    subprocess.run([*GIT, "-C", str(main), "worktree", "add", "-q", str(worktree)], check=True)
    return main


@pytest.mark.parametrize("mode", ["namespaces", "landlock"])
def test_git_status_works_in_a_root_that_is_a_worktree_of_a_repository_outside(
    tmp_path, monkeypatch, mode
):
    world = build_world(tmp_path, monkeypatch, mode)  # for its HOME and the mode
    root = tmp_path / "worktree"
    _repository_with_worktree(tmp_path, root)
    (root / "b.txt").write_text("b\n")
    tools = ToolsConfig.model_validate(
        {"run_command": {"allow": [{"name": "git"}], "confine": "required"}}
    )
    registry = build_registry(tools, Sandbox(root), search_path=SYSTEM_PATH)
    result = registry.call("run_command", {"argv": ["git", "status"]})
    assert not result.is_error, text_of(result)
    assert "b.txt" in text_of(result) and world.mode == mode


def test_a_git_pointer_file_below_the_root_opens_nothing_outside(confined: World, tmp_path):
    """A `.git` file the agent writes below the root could point anywhere (a private
    repository, ~/.ssh): only the root's own, protected `.git` is followed."""
    _repository_with_worktree(tmp_path, confined.root / "work" / "tree")
    # run_command's git guard refuses this repository before git starts; a program
    # the agent wrote runs git itself, so only the confinement stands in its way.
    (confined.root / "work" / "tree" / "st.py").write_text(
        "import subprocess, sys\n"
        "done = subprocess.run(['git', 'status'], capture_output=True, text=True)\n"
        "print(done.stdout, done.stderr)\n"
        "sys.exit(done.returncode)\n"
    )
    result = confined.run("python3", "st.py", cwd="work/tree")
    assert result.is_error and "not a git repository" in text_of(result), text_of(result)


@pytest.mark.parametrize("network", [False, True])
def test_network_true_in_the_profile_allows_connections(tmp_path, monkeypatch, network):
    world = build_world(tmp_path, monkeypatch, "namespaces")
    server = socket.create_server(("127.0.0.1", 0))
    tools = ToolsConfig.model_validate(
        {"run_command": {"allow": ["python3"], "network": network, "confine": "required"}}
    )
    registry = build_registry(tools, Sandbox(world.root), search_path=SYSTEM_PATH)
    port = server.getsockname()[1]
    (world.root / "attack.py").write_text(
        f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('ok')\n"
    )
    result = registry.call("run_command", {"argv": ["python3", "attack.py"]})
    server.setblocking(False)
    try:
        server.accept()[0].close()
        arrived = True
    except BlockingIOError:
        arrived = False
    server.close()
    assert arrived is network, text_of(result)
    assert result.is_error is not network


def test_commands_back_to_back_and_apart_each_run_once(confined: World):
    """Warm launchers (`confine.launcher._Spares`) take some of these runs, cold ones
    the rest: every command runs exactly once, with its own output."""
    import time

    (confined.root / "work" / "count.py").write_text(
        "import sys\nopen('work/runs.txt', 'a').write(sys.argv[1] + '\\n')\nprint(sys.argv[1])\n"
    )
    outputs = []
    for n in range(12):
        result = confined.run("python3", "work/count.py", str(n))
        outputs.append((result.structured or {})["exit_code"])
        if n % 3 == 0:
            time.sleep(0.1)  # room for the spares to be built
    assert outputs == [0] * 12
    assert (confined.root / "work" / "runs.txt").read_text().split() == [str(n) for n in range(12)]
