"""Interoperability with an independent libp2p implementation: js-libp2p 3.2.0 (issue 3).

- js/client.js dials a `gbr-node serve` process and calls `tools/list` and
  `tools/call`, written only from protocols/gbr-mcp-1.0.0.md (varint-prefixed
  JSON, one request per stream), over js-libp2p's TCP, Noise and Yamux.
- js/server.js serves one tool (`reverse`) on `/gbr/mcp/1.0.0`; `gbr-node call`
  calls it, by multiaddr and by the alias our profile trusts it under.

Needs `node` and `npm` and tests/interop/js/node_modules (`.ci/install-interop`).
"""

from __future__ import annotations

import json
import select
import shutil
import subprocess
from pathlib import Path

import pytest
from libp2p.crypto.ed25519 import create_new_key_pair

from gbr_node.p2p.identity import peer_id_of
from tests.e2e.p2p_helpers import Identity, ServeProcess, gbr_call, write_serving_profile

JS = Path(__file__).with_name("js")
NODE = shutil.which("node") or "node"  # the tests are skipped without it
TIMEOUT_S = 60

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None
    or shutil.which("npm") is None
    or not (JS / "node_modules" / "libp2p").is_dir(),
    reason="js interop needs node, npm and tests/interop/js/node_modules: run .ci/install-interop",
)

CLIENT_SEED = "11" * 32
SERVER_SEED = "22" * 32


def js_peer_id(seed_hex: str) -> str:
    """The peer ID js-libp2p derives from an Ed25519 seed (RFC 8032 seeds agree across both)."""
    return peer_id_of(create_new_key_pair(bytes.fromhex(seed_hex)))


def run_js_client(target: str, requests: list) -> dict:
    done = subprocess.run(
        [NODE, "client.js", CLIENT_SEED, target, json.dumps(requests)],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    (root / "hello.txt").write_text("hello from python\n")
    write_serving_profile(root, {"jsclient": (js_peer_id(CLIENT_SEED), ["read_file"])})
    server = ServeProcess(root, tmp_path / "home", Identity(tmp_path / "server.key"))
    yield root, server
    server.stop()


def test_js_libp2p_client_lists_and_calls_our_tools(served):
    root, server = served
    out = run_js_client(
        server.addr,
        [
            ["tools/list", None],
            ["tools/call", {"name": "read_file", "arguments": {"path": "hello.txt"}}],
            ["tools/call", {"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}],
            ["tools/call", {"name": "read_file", "arguments": {"path": "../escape"}}],
        ],
    )
    assert out["peerId"] == js_peer_id(CLIENT_SEED)
    listed, read, not_granted, escape = out["responses"]
    assert listed["id"] == 1
    tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
    assert "read_file" in tools and "write_file" not in tools
    assert tools["read_file"]["inputSchema"]["required"] == ["path"]
    assert read["id"] == 2 and read["result"]["isError"] is False
    assert "hello from python" in read["result"]["content"][0]["text"]
    assert not_granted["error"]["code"] == -32602
    assert escape["error"]["code"] == -32002
    assert not (root / "x.txt").exists()
    server.wait_line(r"^jsclient read_file ok \d+ ms$")


def test_js_libp2p_client_with_an_untrusted_peer_id_is_unauthorized(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    write_serving_profile(root, {})
    server = ServeProcess(root, tmp_path / "home", Identity(tmp_path / "server.key"))
    try:
        out = run_js_client(server.addr, [["tools/list", None]])
    finally:
        server.stop()
    assert out["responses"][0]["error"]["code"] == -32001


class JsServer:
    """js/server.js in its own process; it stops when its stdin closes."""

    def __init__(self, trusted_peer_id: str) -> None:
        self.proc = subprocess.Popen(
            [NODE, "server.js", SERVER_SEED, trusted_peer_id],
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
            stderr = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"js server did not start: {stderr}")
        started = json.loads(line)
        self.peer_id = started["peerId"]
        self.addr = next(a for a in started["addrs"] if a.startswith("/ip4/127.0.0.1/tcp/"))

    def stop(self) -> str:
        try:
            out, _err = self.proc.communicate(input="", timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _err = self.proc.communicate(timeout=10)
        return out


def test_our_client_calls_a_tool_served_by_js_libp2p(tmp_path):
    me = Identity(tmp_path / "me.key")
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "home"
    server = JsServer(trusted_peer_id=me.peer_id)
    try:
        assert server.peer_id == js_peer_id(SERVER_SEED)
        # trusted on our side under an alias, with the address to dial
        write_serving_profile(project, {"jspeer": (server.peer_id, ["reverse"])})
        profile = project / ".gbr_envs" / "default.toml"
        profile.write_text(profile.read_text() + f'addrs = ["{server.addr}"]\n')

        called = gbr_call(project, home, me, server.addr, "reverse", '{"text": "héllo, js"}')
        assert called.returncode == 0, called.stderr
        assert called.stdout.strip() == "sj ,olléh"

        by_alias = gbr_call(project, home, me, "jspeer", "reverse", '{"text": "abc"}')
        assert by_alias.returncode == 0, by_alias.stderr
        assert by_alias.stdout.strip() == "cba"

        listed = gbr_call(project, home, me, "jspeer", "--list")
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.split()[0] == "reverse"

        unknown = gbr_call(project, home, me, "jspeer", "nope", "{}")
        assert unknown.returncode == 1
        assert "unknown tool" in unknown.stderr

        stranger = Identity(tmp_path / "stranger.key")
        refused = gbr_call(project, home, stranger, server.addr, "reverse", '{"text": "x"}')
        assert refused.returncode == 3
        assert "does not trust your peer ID" in refused.stderr
    finally:
        log = server.stop()
    callers = {json.loads(line)["caller"] for line in log.splitlines() if line.startswith("{")}
    assert me.peer_id in callers and stranger.peer_id in callers
