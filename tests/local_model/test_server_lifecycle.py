"""The embedded model server as a child process: started, ready, logged, always stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from gbr_node.errors import ModelError
from gbr_node.llm import local as local_module
from gbr_node.llm.local import CATALOGUE, SMALL_LOCAL_MODEL, LocalModel, local_model_server
from tests.local_model.support import requires_local_model

pytestmark = requires_local_model

GONE_TIMEOUT_S = 20


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting to be reaped counts as gone). Linux /proc."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


async def test_the_server_lists_smollm2_and_its_output_goes_to_the_log(
    local: LocalModel, tmp_path: Path
) -> None:
    assert local.model == CATALOGUE[SMALL_LOCAL_MODEL].alias
    assert local.base_url.startswith("http://127.0.0.1:") and local.base_url.endswith("/v1")
    log = (tmp_path / "node.log").read_text(errors="replace")
    assert "gbr-node: starting" in log and "--chat-template" in log
    assert "listening on http://127.0.0.1:" in log  # the server's own output, not the terminal


async def test_the_child_waits_passively_for_openmp_work(local: LocalModel) -> None:
    environ = Path(f"/proc/{local.pid}/environ").read_bytes().split(b"\0")
    expected = os.environ.get("OMP_WAIT_POLICY", "PASSIVE")  # a policy set by the user is kept
    assert f"OMP_WAIT_POLICY={expected}".encode() in environ


async def test_leaving_the_block_stops_the_child(tmp_path: Path) -> None:
    async with local_model_server(tmp_path / "node.log", SMALL_LOCAL_MODEL) as running:
        assert alive(running.pid)
    assert not alive(running.pid)


async def test_cancellation_still_stops_the_child(tmp_path: Path) -> None:
    with trio.move_on_after(60) as scope:
        async with local_model_server(tmp_path / "node.log", SMALL_LOCAL_MODEL) as running:
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught and not alive(running.pid)  # type: ignore[unreachable]  # stale trio-typing stubs


async def test_a_child_that_exits_early_is_reported_with_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_argv = local_module.server_argv
    missing = tmp_path / "no-such-model.gguf"
    monkeypatch.setattr(
        local_module, "server_argv", lambda gguf, port, name: real_argv(missing, port, name)
    )
    log = tmp_path / "node.log"
    with trio.fail_after(60), pytest.raises(ModelError) as info:
        async with local_model_server(log, SMALL_LOCAL_MODEL):
            pass
    assert "exited with status" in str(info.value) and str(log) in str(info.value)
    assert "no-such-model.gguf" in log.read_text(errors="replace")


def test_a_killed_parent_leaves_no_server_behind(tmp_path: Path) -> None:
    script = (
        "import sys, trio\n"
        "from pathlib import Path\n"
        "from gbr_node.llm.local import local_model_server\n"
        "async def main():\n"
        '    async with local_model_server(Path(sys.argv[1]), "smollm2-135m") as running:\n'
        "        print(running.pid, flush=True)\n"
        "        await trio.sleep_forever()\n"
        "trio.run(main)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "node.log")], stdout=subprocess.PIPE
    )
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()  # bounded by the server's own startup timeout
        server_pid = int(line)
        assert alive(server_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=GONE_TIMEOUT_S)
        assert wait_gone(server_pid), "the server outlived its killed parent"
    finally:
        parent.kill()
        parent.wait(timeout=GONE_TIMEOUT_S)
