"""protocols/mcp-1.1.0-vectors run through the serving side of `/gbr/mcp/1.1.0`, and the
schemas checked against them. Another implementation can be checked against the same
files (protocols/gbr-mcp-1.1.0.md, section 8)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from gbr_node.rpc.framing import FrameDecoder
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.pipelined import serve_pipelined
from gbr_node.rpc.server import RpcServer
from tests.rpc.hosts import (
    HOST_1_1,
    HOST_SPEC,
    TRUSTED,
    UNTRUSTED,
    VECTORS_1_1,
    PipelinedVectorHost,
)
from tests.rpc.test_vectors import _validator

VECTOR_FILES = sorted(p for p in VECTORS_1_1.glob("*.json") if p.name != "host.json")


def _load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_the_vector_suite_covers_every_case_the_protocol_names() -> None:
    names = {path.stem.split("-", 1)[1] for path in VECTOR_FILES}
    assert {
        "pipelined-any-order",
        "cancelled",
        "cancel-unknown-id",
        "duplicate-id-in-flight",
        "busy-over-slots",
        "untrusted",
        "oversized-prefix",
        "half-frame-then-end",
        "parse-error",
        "response-sent-to-server",
        "batch",
    } <= names


async def _serve(vector: dict[str, Any], host: PipelinedVectorHost) -> list[bytes]:
    """Send the vector's bytes on a stream, end our side, read until the server ends it."""
    limits = Limits(
        max_message_bytes=HOST_SPEC["max_message_bytes"],
        max_concurrent_calls_per_peer=HOST_1_1["max_concurrent_calls_per_peer"],
    )
    server = RpcServer(host, limits)
    peer = TRUSTED if vector["caller"] == "trusted" else UNTRUSTED
    client, served = trio.testing.memory_stream_pair()
    received = bytearray()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_pipelined, server, served, peer)
            await client.send_all(bytes.fromhex(vector["request_hex"]))
            await client.send_stream.aclose()
            while chunk := await client.receive_some():
                received += chunk
    assert server.active_calls(peer) == 0
    return FrameDecoder(1 << 30).feed(bytes(received))


def _matches(expected: dict[str, Any], response: dict[str, Any]) -> bool:
    if "response" in expected:
        return bool(expected["response"] == response)
    error = expected["error"]
    return (
        response.get("id") == error["id"] and response.get("error", {}).get("code") == error["code"]
    )


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
async def test_vector(path: Path, autojump_clock: trio.abc.Clock) -> None:
    vector = _load(path)
    host = PipelinedVectorHost()
    frames = await _serve(vector, host)
    responses = [json.loads(frame) for frame in frames]
    unmatched = list(responses)
    for expected in vector["expect"]["responses"]:
        found = next((r for r in unmatched if _matches(expected, r)), None)
        assert found is not None, f"{expected} not among {unmatched}"
        unmatched.remove(found)
    assert unmatched == [], f"unexpected responses: {unmatched}"
    first = vector["expect"].get("first", [])
    assert {r["id"] for r in responses[: len(first)]} == set(first)
    assert Counter(f.hex() for f in frames) == Counter(vector["responses_hex"]), (
        "our exact bytes changed: update the vector"
    )
    if vector["caller"] == "untrusted":
        assert host.calls == [], "an untrusted peer runs nothing"


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
def test_vector_messages_follow_the_schemas(path: Path) -> None:
    vector = _load(path)
    for message in vector["requests"]:
        if not isinstance(message, dict) or "hex" in message:
            continue  # bytes that are no message, or a batch: refused on purpose
        _validator("message.json").validate(message)
        if message.get("method") == "notifications/cancelled":
            valid = type(message["params"]["requestId"]) in (int, str)  # `true`: ignored there
            assert _validator("cancelled-notification.json").is_valid(message) == valid
    for response in vector["responses"]:
        _validator("message.json").validate(response)
