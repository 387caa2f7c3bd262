"""`/gbr/mcp/1.1.0` with an independent libp2p implementation: js-libp2p 3.2.0 (issue 35).

- js/pipelined.js `call` proposes 1.1.0 then 1.0.0 to a `gbr-node serve` process and
  sends every request at once on one stream, written only from
  protocols/gbr-mcp-1.1.0.md: the answers come back matched by id, one withdrawn with
  notifications/cancelled never comes, and its command is killed there.
- js/pipelined.js `serve` answers `reverse` on 1.1.0 after a delay each request names,
  so in another order than asked; our `McpStreams` calls it on one kept stream, and
  withdraws one call. js/server.js speaks 1.0.0 only: our `McpStreams` falls back.

Needs `node` and `npm` and tests/interop/js/node_modules (`.ci/install-interop`).
"""

from __future__ import annotations

import json
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from gbr_node.p2p.host import open_host
from gbr_node.p2p.mcp_streams import McpStreams
from gbr_node.rpc.limits import Limits
from tests.e2e.p2p_helpers import (
    Identity,
    ServeProcess,
    children_running,
    write_serving_profile,
)
from tests.interop.test_js_interop import (
    CLIENT_SEED,
    JS,
    NODE,
    SERVER_SEED,
    TIMEOUT_S,
    JsServer,
    js_peer_id,
    pytestmark,
)

__all__ = ["pytestmark"]  # the same skip as test_js_interop.py: js needs installing

LIMITS = Limits(call_timeout_s=30)


def run_js_call(target: str, requests: list[Any], cancel: tuple[Any, ...] = ()) -> dict[str, Any]:
    done = subprocess.run(
        [NODE, "pipelined.js", "call", CLIENT_SEED, target, json.dumps(requests)]
        + [json.dumps(list(cancel))],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


@pytest.fixture
def served(tmp_path: Path):
    root = tmp_path / "served"
    root.mkdir()
    (root / "hello.txt").write_text("hello from python\n")
    write_serving_profile(
        root,
        {"jsclient": (js_peer_id(CLIENT_SEED), ["read_file", "run_command"])},
        extra='[tools.run_command]\nallow = ["sleep"]',
    )
    server = ServeProcess(root, tmp_path / "home", Identity(tmp_path / "server.key"))
    yield server
    server.stop()


def test_js_libp2p_pipelines_calls_to_our_node_on_1_1_0_and_withdraws_one(served):
    read = {"name": "read_file", "arguments": {"path": "hello.txt"}}
    sleep = {"name": "run_command", "arguments": {"argv": ["sleep", "30"]}}
    out = run_js_call(
        served.addr,
        [
            [1, "tools/list", None],
            ["two", "tools/call", read],
            [3, "tools/call", sleep],
            [4, "tools/call", {"name": "write_file", "arguments": {"path": "x", "content": ""}}],
            [5, "tools/call", {"name": "read_file", "arguments": {"path": "../escape"}}],
            [6, "tools/call", read],
        ],
        cancel=(3,),
    )
    assert out["protocol"] == "/gbr/mcp/1.1.0"
    answers = {answer["id"]: answer for answer in out["responses"]}
    assert sorted(answers, key=str) == [1, 4, 5, 6, "two"], "3 was withdrawn: no answer"
    assert {"read_file", "run_command"} <= {t["name"] for t in answers[1]["result"]["tools"]}
    assert "hello from python" in answers["two"]["result"]["content"][0]["text"]
    assert answers[4]["error"]["code"] == -32602 and answers[5]["error"]["code"] == -32002
    assert "hello from python" in answers[6]["result"]["content"][0]["text"]
    served.wait_line(r"^jsclient run_command caller cancelled \d+ ms$")
    killed_by = time.monotonic() + 2  # its process group was signalled; it dies at once
    while children_running(served.proc.pid, "sleep") and time.monotonic() < killed_by:
        time.sleep(0.02)
    assert children_running(served.proc.pid, "sleep") == []


def test_js_libp2p_with_an_untrusted_peer_id_on_1_1_0_is_unauthorized(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    write_serving_profile(root, {})
    server = ServeProcess(root, tmp_path / "home", Identity(tmp_path / "server.key"))
    try:
        out = run_js_call(server.addr, [[1, "tools/list", None], [2, "tools/list", None]])
    finally:
        server.stop()
    assert out["protocol"] == "/gbr/mcp/1.1.0"
    assert [(r["id"], r["error"]["code"]) for r in out["responses"]] == [(None, -32001)]


class JsPipelinedServer(JsServer):
    """js/pipelined.js serve in its own process; it stops when its stdin closes."""

    def __init__(self, trusted_peer_id: str) -> None:
        self.proc = subprocess.Popen(
            [NODE, "pipelined.js", "serve", SERVER_SEED, trusted_peer_id],
            cwd=JS,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.stop()
            raise AssertionError("js pipelined server did not start")
        started = json.loads(line)
        self.peer_id = started["peerId"]
        self.addr = next(a for a in started["addrs"] if a.startswith("/ip4/127.0.0.1/tcp/"))


def reverse(text: str, delay_ms: int = 0) -> dict[str, Any]:
    return {"name": "reverse", "arguments": {"text": text, "delay_ms": delay_ms}}


async def test_our_node_pipelines_calls_to_js_libp2p_on_one_kept_stream(tmp_path):
    me = Identity(tmp_path / "me.key")
    server = JsPipelinedServer(trusted_peer_id=me.peer_id)
    finished: list[str] = []
    try:
        async with open_host(me.keypair, [], is_trusted=lambda _: False) as host:
            streams = McpStreams(host)

            async def one(text: str, delay_ms: int) -> None:
                result = await streams.call(
                    server.addr, "tools/call", reverse(text, delay_ms), limits=LIMITS
                )
                assert result["content"][0]["text"] == text[::-1]
                finished.append(text)

            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    for n, delay in enumerate((400, 0, 200, 0)):
                        nursery.start_soon(one, f"call {n}", delay)
                    nursery.start_soon(one, "quick", 0)
                    with trio.move_on_after(0.2):
                        await streams.call(
                            server.addr, "tools/call", reverse("withdrawn", 5000), limits=LIMITS
                        )
            await streams.aclose()
    finally:
        log = [json.loads(line) for line in server.stop().splitlines() if line.startswith("{")]
    assert finished.index("call 0") > finished.index("call 2") > finished.index("call 1")
    assert [e["stream"] for e in log if "stream" in e] == ["/gbr/mcp/1.1.0"]
    assert len([e for e in log if "cancelled" in e]) == 1
    assert len([e for e in log if "answered" in e]) == 5


async def test_our_node_falls_back_to_1_0_0_for_a_js_peer_that_speaks_only_that(tmp_path):
    me = Identity(tmp_path / "me.key")
    server = JsServer(trusted_peer_id=me.peer_id)
    try:
        async with open_host(me.keypair, [], is_trusted=lambda _: False) as host:
            streams = McpStreams(host)
            with trio.fail_after(30):
                for text in ("abc", "héllo"):
                    result = await streams.call(
                        server.addr,
                        "tools/call",
                        {"name": "reverse", "arguments": {"text": text}},
                        limits=LIMITS,
                    )
                    assert result["content"][0]["text"] == text[::-1]
    finally:
        log = server.stop()
    answered = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert len(answered) == 2 and all(a["caller"] == me.peer_id for a in answered)
