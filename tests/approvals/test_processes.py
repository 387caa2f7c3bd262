"""The approval log shared by real processes: racing approvals, `kill -9`
with pending approvals and in the middle of applying (issue 6, "What must hold")."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest

from gbr_node.approvals import ApprovalLog, ApprovalLogError, Settled, default_path
from gbr_node.approvals.apply import apply
from gbr_node.sandbox import Sandbox

from .conftest import ORIGINAL, Ask, assert_every_apply_was_decided, run_cli, stored_events

TIMEOUT_S = 60
APPROVER = """
import argparse, sys
from gbr_node.approvals.cli import add_parser
project, ids = sys.argv[1], sys.argv[2:]
root = argparse.ArgumentParser()
root.add_argument("--project")
root.add_argument("--env")
add_parser(root.add_subparsers())
print("ready", flush=True)
sys.stdin.readline()
for approval_id in ids:
    args = root.parse_args(["--project", project, "approvals", "approve", approval_id])
    print("status", approval_id, args.func(args), flush=True)
"""
REQUESTER = """
import sys, time
from gbr_node.approvals import ApprovalLog, default_path, fingerprint
from gbr_node.approvals.state import PendingApproval
from gbr_node.errors import ApprovalRequired
from gbr_node.sandbox import Sandbox
project = sys.argv[1]
sandbox = Sandbox(project, ["pyproject.toml", "config/**"])
log = ApprovalLog(default_path(project))
for name in ("pyproject.toml", "config/a.toml"):
    where = sandbox.resolve(name)
    exc = ApprovalRequired("write_file", where.relative, str(where.path), content=name + "!")
    log.request(exc, "local", None, fingerprint(where.path))
with log.transaction() as tx:  # a third request, never committed
    event = PendingApproval(approval_id=3, at=0.0, requester="local", requester_alias=None,
        tool="write_file", path="config/b.toml", absolute="x", content="b", base_hash=None)
    tx.append(event, None)
    print("ready", flush=True)
    time.sleep(600)
"""
STALLED_APPLIER = """
import sys, time
from gbr_node.approvals import ApprovalLog, default_path
from gbr_node.approvals.apply import apply
from gbr_node.sandbox import Sandbox
project, when = sys.argv[1], sys.argv[2]

class Stalling(Sandbox):
    def write_atomic(self, path, data):
        if when == "after":
            super().write_atomic(path, data)
        print("stalled", flush=True)
        time.sleep(600)

log = ApprovalLog(default_path(project))
apply(log, 1, Stalling(project, ["pyproject.toml"]), by="doomed")
"""


Spawn = Callable[..., pexpect.spawn]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """`spawn(script, *arguments)`: a Python child process on a pty (every
    `expect` times out after TIMEOUT_S); any still running are killed at teardown."""
    children: list[pexpect.spawn] = []

    def start(script: str, *arguments: str) -> pexpect.spawn:
        command = ["-c", textwrap.dedent(script), *arguments]
        child = pexpect.spawn(sys.executable, command, encoding="utf-8", timeout=TIMEOUT_S)
        children.append(child)
        return child

    yield start
    for child in children:
        if child.isalive():
            child.terminate(force=True)


def kill_hard(child: pexpect.spawn) -> None:
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus == signal.SIGKILL


def test_two_processes_approving_the_same_ids_apply_each_once(
    project: Path, log: ApprovalLog, ask: Ask, spawn: Spawn
) -> None:
    count = 8
    for n in range(1, count + 1):
        ask("write_file", path=f"config/f{n}.toml", content=f"v{n}\n")
    ids = [str(n) for n in range(1, count + 1)]
    children = [spawn(APPROVER, str(project), *ids) for _ in range(2)]
    for child in children:
        child.expect("ready")
    for child in children:
        child.sendline("go")
    outputs: list[str] = []
    for child in children:
        child.expect(pexpect.EOF)
        outputs.append(str(child.before))
        child.close()
        assert child.exitstatus == 0, child.before
    lines = "".join(outputs).splitlines()
    statuses = [line.split()[2] for line in lines if line.startswith("status ")]
    assert statuses == ["0"] * (2 * count)  # both processes: every approve succeeded
    fresh = Counter(
        line.split()[1] for line in lines if " applied: " in line and "already" not in line
    )
    assert fresh == Counter({f"#{n}": 1 for n in range(1, count + 1)})
    applied = Counter(i for _, i, kind in stored_events(project) if kind == "Applied")
    assert applied == Counter({n: 1 for n in range(1, count + 1)})
    for n in range(1, count + 1):
        assert (project / "config" / f"f{n}.toml").read_text() == f"v{n}\n"
    assert_every_apply_was_decided(project)


def test_pending_approvals_survive_kill_9_and_apply_once_after(
    project: Path, sandbox: Sandbox, spawn: Spawn
) -> None:
    child = spawn(REQUESTER, str(project))
    child.expect("ready")
    kill_hard(child)
    with ApprovalLog(default_path(project)) as log:
        assert [(a.id, a.status) for a in log.list()] == [(1, "pending"), (2, "pending")]
    for approval_id in ("1", "2"):
        assert run_cli(project, sandbox, "approve", approval_id)[0] == 0
        assert run_cli(project, sandbox, "approve", approval_id)[1].startswith(
            f"approval #{approval_id} already applied"
        )
    assert (project / "pyproject.toml").read_text() == "pyproject.toml!"
    assert (project / "config" / "a.toml").read_text() == "config/a.toml!"
    assert [k for _, _, k in stored_events(project)].count("Applied") == 2
    assert_every_apply_was_decided(project)


@pytest.mark.parametrize("when", ["before", "after"])
def test_kill_9_while_applying_leaves_a_change_that_is_applied_exactly_once(
    project: Path, sandbox: Sandbox, log: ApprovalLog, ask: Ask, spawn: Spawn, when: str
) -> None:
    """The claim is the log's write lock: while the applier holds it nobody
    else applies; after it dies the next apply finishes the job, writing only
    if the write had not reached the disk (apply.py, "Crash safety")."""
    ask("write_file", path="pyproject.toml", content="NEW\n")
    log.approve(1, by="op")
    child = spawn(STALLED_APPLIER, str(project), when)
    child.expect("stalled")
    with (
        ApprovalLog(default_path(project), busy_timeout_s=0.1) as impatient,
        pytest.raises(ApprovalLogError, match="locked"),
    ):
        apply(impatient, 1, sandbox, by="second")
    kill_hard(child)
    on_disk = (project / "pyproject.toml").read_text()
    assert on_disk == ("NEW\n" if when == "after" else ORIGINAL)
    assert log.get(1).status == "approved"
    inode = os.stat(project / "pyproject.toml").st_ino
    outcome = apply(log, 1, sandbox, by="recovery")
    assert isinstance(outcome, Settled) and outcome.now and outcome.approval.status == "applied"
    assert (project / "pyproject.toml").read_text() == "NEW\n"
    assert (os.stat(project / "pyproject.toml").st_ino == inode) is (when == "after")
    assert [k for _, _, k in stored_events(project)].count("Applied") == 1
    assert_every_apply_was_decided(project)
