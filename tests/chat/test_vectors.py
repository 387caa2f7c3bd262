"""protocols/chat-vectors run through the reference chat host, and checked against the schemas
(protocols/gbr-chat-1.0.0.md, section 9): what another implementation is held to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from gbr_node.rpc.framing import FrameDecoder
from tests.chat.vectors import CASES, VECTORS, Host

SCHEMAS = VECTORS.parent / "schemas"
VECTOR_FILES = sorted(path for path in VECTORS.glob("*.json") if path.name != "host.json")


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _validator(name: str) -> jsonschema.Draft202012Validator:
    resources = [_load(path) for path in SCHEMAS.glob("*.json")]
    registry = Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in resources
    )
    schema = next(s for s in resources if s["$id"].endswith(f"/{name}"))
    return jsonschema.Draft202012Validator(schema, registry=registry)


def test_every_case_has_its_vector_file() -> None:
    assert sorted(p.stem for p in VECTOR_FILES) == sorted(c["name"] for c in CASES)


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
async def test_vector(path: Path, tmp_path: Path) -> None:
    vector = _load(path)
    host = Host(tmp_path, vector.get("limits"))
    for frame in vector["before_hex"]:
        await host.answer(vector["caller"], frame)
    before = len(host.shown)
    received = await host.answer(vector["caller"], vector["request_hex"])
    frames = FrameDecoder(1 << 20).feed(received)
    assert len(frames) == 1
    response = json.loads(frames[0])
    expect = vector["expect"]
    if "response" in expect:
        assert response == expect["response"]
    else:
        assert response["id"] == expect["error"]["id"]
        assert response["error"]["code"] == expect["error"]["code"]
        if "reason" in expect["error"]:
            assert response["error"]["data"]["reason"] == expect["error"]["reason"]
    assert received.hex() == vector["response_hex"], "our exact bytes changed: rerun the writer"
    accepted = response.get("result", {}).get("status") == "accepted"
    assert len(host.shown) == before + accepted, "only an accepted message is shown"
    host.store.close()


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
def test_vector_messages_follow_the_schemas(path: Path) -> None:
    vector = _load(path)
    request = vector["request"]
    send_schema = _validator("chat-send-request.json")
    valid = vector["expect"].get("error", {}).get("code") not in (-32602, -32601)
    assert send_schema.is_valid(request) == valid
    response = json.loads(FrameDecoder(1 << 20).feed(bytes.fromhex(vector["response_hex"]))[0])
    if "result" in response:
        _validator("chat-ack.json").validate(response["result"])
    else:
        _validator("chat-refusal.json").validate(response)
