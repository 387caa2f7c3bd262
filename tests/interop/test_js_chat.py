"""`/gbr/chat/1.0.0` with an independent libp2p implementation: js-libp2p 3.2.0 (issue 19).

js/chat.js is written from protocols/gbr-chat-1.0.0.md alone: it sends messages to a
`gbr-node serve` and gets the acks (a second copy is a duplicate), and it receives one
that `gbr-node run`'s `/msg` sends, acknowledging it.

Needs `node`, `npm` and tests/interop/js/node_modules (`.ci/install-interop`).
"""

from __future__ import annotations

import json
import select
import subprocess
import types

from tests.e2e.chat_helpers import ChatNode
from tests.e2e.p2p_helpers import Identity, ServeProcess, write_serving_profile
from tests.interop.test_js_interop import (
    CLIENT_SEED,
    JS,
    NODE,
    SERVER_SEED,
    TIMEOUT_S,
    js_peer_id,
    pytestmark,  # noqa: F401  (the same skip when js-libp2p is not installed)
)


def run_js_sender(target: str, messages: list[dict]) -> dict:
    done = subprocess.run(
        [NODE, "chat.js", "send", CLIENT_SEED, target, json.dumps(messages)],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_js_libp2p_peer_sends_a_message_from_the_spec_and_gets_the_ack(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    write_serving_profile(root, {"jsclient": (js_peer_id(CLIENT_SEED), [])}, extra='chat = "show"')
    server = ServeProcess(root, tmp_path / "home", Identity(tmp_path / "server.key"))
    try:
        out = run_js_sender(
            server.addr,
            [
                {"text": "hello from js", "message_id": "js-1", "context_id": "js-thread"},
                {"text": "hello from js", "message_id": "js-1", "context_id": "js-thread"},
            ],
        )
        first, second = out["responses"]
        assert first["result"] == {"kind": "ack", "message_id": "js-1", "status": "accepted"}
        assert second["result"]["status"] == "duplicate"
        server.wait_line(r"✉ message from jsclient's agent \(12D3Ko…\w+\) · thread js-threa")
        server.wait_line(r"  │ hello from js")
    finally:
        server.stop()
    assert sum("│ hello from js" in line for line in server.all_lines()) == 1


def test_a_js_libp2p_peer_that_is_not_trusted_gets_unauthorized(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    write_serving_profile(root, {})
    server = ServeProcess(root, tmp_path / "home", Identity(tmp_path / "server.key"))
    try:
        out = run_js_sender(server.addr, [{"text": "let me in"}])
    finally:
        server.stop()
    assert out["responses"][0]["error"]["code"] == -32001
    assert not any("let me in" in line for line in server.all_lines())


def test_our_node_sends_a_message_a_js_libp2p_peer_receives(tmp_path):
    alice = ChatNode(tmp_path, "alice")
    js = subprocess.Popen(
        [NODE, "chat.js", "receive", SERVER_SEED, alice.peer_id],
        cwd=JS,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert js.stdout is not None
        ready, _, _ = select.select([js.stdout], [], [], TIMEOUT_S)
        started = json.loads(js.stdout.readline() if ready else "{}")
        addr = next(a for a in started["addrs"] if a.startswith("/ip4/127.0.0.1/tcp/"))
        peer = types.SimpleNamespace(peer_id=started["peerId"], addr=addr.rsplit("/p2p/", 1)[0])
        alice.write_profile({"jspeer": (peer, "show", "")})
        term = alice.start()
        term.sendline("/msg jspeer hello, js-libp2p")
        term.expect_new(r"→ jspeer · message \w+ delivered", 60)
        ready, _, _ = select.select([js.stdout], [], [], TIMEOUT_S)
        received = json.loads(js.stdout.readline() if ready else "{}")
    finally:
        alice.stop()
        try:
            js.communicate(input="", timeout=20)
        except subprocess.TimeoutExpired:
            js.kill()
            js.communicate(timeout=10)
    assert received["caller"] == alice.peer_id and received["status"] == "accepted"
    message = received["message"]
    assert message["parts"] == [{"kind": "text", "text": "hello, js-libp2p"}]
    assert message["role"] == "user" and message["sent_at"].endswith("Z")
    assert set(message) <= {"kind", "message_id", "context_id", "role", "parts", "sent_at"}
