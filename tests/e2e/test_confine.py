"""Confinement seen from outside (GBR-CONF-01): it holds for commands a remote peer
starts through `gbr-node serve` (real processes, a real libp2p call per step; the
trusted peer writes an attack script with write_file and runs it with run_command,
as its agent would), and `gbr-node env check` says which confinement is in force."""

from __future__ import annotations

import json
import re
import socket
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import gbr
from tests.e2e.p2p_helpers import (
    Identity,
    ServeProcess,
    gbr_call,
    start_call,
    write_serving_profile,
)
from tests.tools.helpers import processes_with, unique_nap, wait_no_process_with

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Landlock is Linux only")

SSH_KEY = "ssh-secret-of-the-serving-node-4242"
ORIGINAL = "# original\n"


class Served:
    def __init__(self, tmp: Path) -> None:
        keys = tmp / "keys"
        keys.mkdir()
        server_id, self.alice = Identity(keys / "server.key"), Identity(keys / "alice.key")
        self.home = tmp / "home-server"
        (self.home / ".ssh").mkdir(parents=True)
        (self.home / ".ssh" / "id_rsa").write_text(SSH_KEY)
        self.root = tmp / "served"
        (self.root / "work").mkdir(parents=True)
        (self.root / "pyproject.toml").write_text(ORIGINAL)
        self.outside = tmp / "outside"
        self.outside.mkdir()
        self.server_key = server_id.path
        write_serving_profile(
            self.root,
            {"alice": (self.alice.peer_id, ["write_file", "run_command"])},
            node="call_timeout_s = 60",
            extra=f'[tools.run_command]\nconfine = "required"\n'
            f'[[tools.run_command.allow]]\nname = "python3"\npath = "{sys.executable}"\n',
        )
        self.caller = tmp / "caller"
        self.caller.mkdir()
        self.tmp = tmp
        self.server = ServeProcess(self.root, self.home, server_id)

    def run_script(self, source: str):
        home = self.tmp / "home-alice"
        write = json.dumps({"path": "work/attack.py", "content": source})
        wrote = gbr_call(self.caller, home, self.alice, self.server.addr, "write_file", write)
        assert wrote.returncode == 0, wrote.stderr
        run = json.dumps({"argv": ["python3", "work/attack.py"]})
        return gbr_call(self.caller, home, self.alice, self.server.addr, "run_command", run)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    node = Served(tmp_path_factory.mktemp("confine-serve"))
    yield node
    node.server.stop()


def test_serve_says_at_start_that_commands_run_confined(served):
    line = served.server.wait_line(r"^commands run")
    assert line.startswith("commands run confined: Landlock ABI")


def test_a_peers_command_cannot_read_the_serving_nodes_secrets(served):
    secrets = [str(served.home / ".ssh" / "id_rsa"), str(served.server_key)]
    done = served.run_script(
        f"for path in {secrets!r}:\n"
        "    try:\n        print(open(path).read())\n"
        "    except OSError as exc:\n        print('refused', type(exc).__name__)\n"
    )
    assert done.returncode == 0, done.stderr
    assert SSH_KEY not in done.stdout and done.stdout.count("refused") == 2, done.stdout


def test_a_peers_command_cannot_write_outside_or_protected_files(served):
    done = served.run_script(f"import os\nopen('{served.outside}/planted.txt', 'w').write('x')\n")
    assert done.returncode == 1 and "planted.txt" in done.stdout
    assert not (served.outside / "planted.txt").exists()
    done = served.run_script("open('pyproject.toml', 'w').write('HACKED')\n")
    assert done.returncode == 1 and "Read-only file system" in done.stdout, done.stdout
    assert (served.root / "pyproject.toml").read_text() == ORIGINAL


def test_a_peers_command_has_no_network(served):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        done = served.run_script(
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        )
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert done.returncode == 1


def test_a_peers_ordinary_command_still_works(served):
    done = served.run_script(
        "import json, os, tempfile\n"
        "listing = json.dumps(sorted(os.listdir('work')))\n"
        "open('work/result.txt', 'w').write(listing)\n"
        "print('tmp', tempfile.gettempdir())\n"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((served.root / "work" / "result.txt").read_text()) == ["attack.py"]
    assert "tmp /tmp" in done.stdout


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("", "# confinement: commands run confined: Landlock ABI "),
        ('confine = "off"', '# confinement: commands run unconfined: confine = "off"'),
    ],
)
def test_env_check_says_which_confinement_is_in_force_and_the_landlock_abi(
    tmp_path, setting, expected
):
    project = tmp_path / "proj"
    project.mkdir()
    profile = project / ".gbr_envs" / "default.toml"
    profile.parent.mkdir()
    profile.write_text(f'[tools.run_command]\nallow = ["ls"]\n{setting}\n')
    out = gbr(project, "env", "check")
    assert out.returncode == 0, out.stderr
    assert expected in out.stdout
    assert re.search(r"^# kernel Landlock ABI: \d+$", out.stdout, re.MULTILINE)


def test_a_peers_command_dies_with_a_serving_node_killed_by_sigkill(tmp_path):
    """Unconfined process groups outlive a SIGKILLed node; confined commands die with
    it (their launcher's fork server sees the node's socket close)."""
    node = Served(tmp_path)
    nap = unique_nap()
    run = json.dumps({"argv": ["python3", "work/attack.py"]})
    source = f"import os\nos.setsid()\nos.execv('/bin/sleep', ['sleep', '{nap}'])\n"
    write = json.dumps({"path": "work/attack.py", "content": source})
    home = tmp_path / "home-alice"
    try:
        assert gbr_call(node.caller, home, node.alice, node.server.addr, "write_file", write)
        caller = start_call(node.caller, home, node.alice, node.server.addr, "run_command", run)
        deadline = time.monotonic() + 30
        while not processes_with(nap) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_with(nap), "the command never started"
        node.server.kill()
        assert wait_no_process_with(nap), "the confined command outlived its node"
        caller.communicate(timeout=30)
    finally:
        node.server.stop()
