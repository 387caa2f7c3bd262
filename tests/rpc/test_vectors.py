"""protocols/vectors run through the server, and protocols/schemas checked against them.

Each vector is request bytes -> expected response; another implementation of
/gbr/mcp/1.0.0 can be checked against the same files (protocols/gbr-mcp-1.0.0.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from gbr_node.errors import RemoteProtocolError
from gbr_node.rpc.framing import FrameDecoder
from gbr_node.rpc.limits import Limits
from gbr_node.rpc.messages import decode_message
from gbr_node.rpc.server import RpcServer
from tests.rpc.hosts import HOST_SPEC, TRUSTED, UNTRUSTED, VECTORS, VectorHost, exchange

SCHEMAS = VECTORS.parent / "schemas"
VECTOR_FILES = sorted(path for path in VECTORS.glob("*.json") if path.name != "host.json")


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _validator(name: str) -> jsonschema.Draft202012Validator:
    resources = [_load(path) for path in SCHEMAS.glob("*.json")]
    registry = Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in resources
    )
    schema = next(s for s in resources if s["$id"].endswith(f"/{name}"))
    return jsonschema.Draft202012Validator(schema, registry=registry)


def test_the_vector_suite_covers_every_case_the_protocol_names() -> None:
    names = {path.stem.split("-", 1)[1] for path in VECTOR_FILES}
    assert {
        "tools-list",
        "tools-call-ok",
        "tools-call-tool-error",
        "unknown-method",
        "invalid-params",
        "unknown-tool",
        "parse-error",
        "batch",
        "oversized-prefix",
        "unauthorized-call",
        "notification",
    } <= names


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
async def test_vector(path: Path) -> None:
    vector = _load(path)
    host = VectorHost()
    server = RpcServer(host, Limits(max_message_bytes=HOST_SPEC["max_message_bytes"]))
    peer = TRUSTED if vector["caller"] == "trusted" else UNTRUSTED
    received = await exchange(server, peer, bytes.fromhex(vector["request_hex"]))
    expect = vector["expect"]
    if expect.get("no_response"):
        assert received == b""
        assert host.notifications == [(vector["request"]["method"], vector["request"]["params"])]
        return
    frames = FrameDecoder(HOST_SPEC["max_message_bytes"]).feed(received)
    assert len(frames) == 1
    response = json.loads(frames[0])
    if "response" in expect:
        assert response == expect["response"]
    else:
        assert response["id"] == expect["error"]["id"]
        assert response["error"]["code"] == expect["error"]["code"]
    assert received.hex() == vector["response_hex"], "our exact bytes changed: update the vector"
    if vector["caller"] == "untrusted" or response["id"] is None:
        assert host.calls == [], "a refused request must run nothing"


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
def test_vector_messages_follow_the_schemas(path: Path) -> None:
    vector = _load(path)
    request = vector.get("request")
    if isinstance(request, dict) and request.get("jsonrpc") == "2.0":
        _validator("message.json").validate(request)
        if request["method"] == "tools/call" and isinstance(request["params"]["arguments"], dict):
            _validator("tools-call-params.json").validate(request["params"])
    response = vector.get("response")
    if response is None:
        return
    _validator("message.json").validate(response)
    if "result" in response:
        name = (
            "tools-list-result.json" if "tools" in response["result"] else "tools-call-result.json"
        )
        _validator(name).validate(response["result"])


@pytest.mark.parametrize(
    "value",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "a"}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}},
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "m"}},
        {"jsonrpc": "2.0", "id": None, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": True, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "extra": 1},
        {"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -1}},
        {"id": 1, "result": {}},
        [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}],
    ],
)
def test_schema_and_decoder_agree_on_what_is_a_message(value: object) -> None:
    schema_ok = _validator("message.json").is_valid(value)
    try:
        decode_message(json.dumps(value).encode())
        decoder_ok = True
    except RemoteProtocolError:
        decoder_ok = False
    assert schema_ok == decoder_ok
