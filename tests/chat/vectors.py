"""The reference chat host of protocols/chat-vectors/ and the vectors' cases, shared by the
check (test_vectors.py) and by `python -m tests.chat.vectors`, which writes the files.

Each case is frames sent before (each on its own stream, answers not compared) and the
frame whose answer the vector pins. The host runs `ProfileChatHost` with the limits of
`host.json` (a case may lower one) and a fixed clock.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from gbr_node.chat.server import ChatServer, ProfileChatHost
from gbr_node.chat.store import ChatStore
from gbr_node.config.network import TrustedPeer
from gbr_node.config.profile import ChatConfig
from gbr_node.rpc.framing import encode_frame
from gbr_node.rpc.limits import Limits
from tests.rpc.hosts import exchange

VECTORS = Path(__file__).resolve().parents[2] / "protocols" / "chat-vectors"
HOST: dict[str, Any] = {
    "description": "The reference host the /gbr/chat/1.0.0 vectors run against "
    "(protocols/gbr-chat-1.0.0.md, section 9).",
    "trusted_peer": "12D3KooWTrustedPeerForChatVectors",
    "chat_off_peer": "12D3KooWChatOffPeerForVectorsXX",
    "untrusted_peer": "12D3KooWStrangerPeerForVectorsX",
    "max_message_bytes": 1024,
    "messages_per_minute": 60,
    "inbox_max_per_peer": 100,
}
PEERS = {
    "trusted": TrustedPeer(peer_id="1" * 44, chat="reply"),
    "off": TrustedPeer(peer_id="2" * 44, chat="off"),
}
CALLERS = {
    "trusted": HOST["trusted_peer"],
    "chat_off": HOST["chat_off_peer"],
    "untrusted": HOST["untrusted_peer"],
}
SENT_AT = "2026-12-01T16:00:00Z"


def send(message_id: str, text: str = "hello bob", request_id: int = 1, **fields: Any) -> dict:
    message = {
        "kind": "message",
        "message_id": message_id,
        "context_id": fields.pop("context_id", "thread-1"),
        "role": fields.pop("role", "agent"),
        "parts": fields.pop("parts", [{"kind": "text", "text": text}]),
        "sent_at": SENT_AT,
        **fields,
    }
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "message/send",
        "params": {"message": message},
    }


def _hex(value: dict) -> str:
    return encode_frame(json.dumps(value, separators=(",", ":")).encode()).hex()


CASES: list[dict[str, Any]] = [
    {
        "name": "01-accepted",
        "description": "A trusted peer's message is kept and acknowledged accepted.",
        "request": send("m-1"),
        "expect": {
            "response": {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {"kind": "ack", "message_id": "m-1", "status": "accepted"},
            }
        },
    },
    {
        "name": "02-duplicate",
        "description": (
            "A second copy of an accepted message_id (a retry after a lost ack) is "
            "acknowledged duplicate and kept nowhere."
        ),
        "before": [send("m-2")],
        "request": send("m-2", request_id=2),
        "expect": {
            "response": {
                "jsonrpc": "2.0",
                "id": 2,
                "result": {"kind": "ack", "message_id": "m-2", "status": "duplicate"},
            }
        },
    },
    {
        "name": "03-data-part",
        "description": "Structured parts ride along with the text.",
        "request": send(
            "m-3",
            parts=[
                {"kind": "text", "text": "the numbers"},
                {"kind": "data", "data": {"passed": 12, "failed": 0}},
            ],
            in_reply_to="m-1",
        ),
        "expect": {
            "response": {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {"kind": "ack", "message_id": "m-3", "status": "accepted"},
            }
        },
    },
    {
        "name": "04-untrusted",
        "caller": "untrusted",
        "description": (
            "A peer the receiver does not trust gets UNAUTHORIZED_PEER (-32001), id null, "
            "before anything of the stream is read."
        ),
        "request": send("m-4"),
        "expect": {"error": {"id": None, "code": -32001}},
    },
    {
        "name": "05-chat-off",
        "caller": "chat_off",
        "description": (
            'A trusted peer whose chat is "off" gets CHAT_REFUSED (-32006) with reason policy, '
            "id null, before its message is read."
        ),
        "request": send("m-5"),
        "expect": {"error": {"id": None, "code": -32006, "reason": "policy"}},
    },
    {
        "name": "06-too-big",
        "description": (
            "A length prefix above max_message_bytes is refused TOO_LARGE (-32004) as soon as "
            "it is read."
        ),
        "request": send("m-6", text="x" * 2000),
        "expect": {"error": {"id": None, "code": -32004}},
    },
    {
        "name": "07-too-fast",
        "limits": {"messages_per_minute": 2},
        "description": (
            "More than messages_per_minute from one peer: CHAT_REFUSED, reason too_fast, with "
            "retry_after_s."
        ),
        "before": [send("m-7a"), send("m-7b")],
        "request": send("m-7c"),
        "expect": {"error": {"id": 1, "code": -32006, "reason": "too_fast"}},
    },
    {
        "name": "08-inbox-full",
        "limits": {"inbox_max_per_peer": 1},
        "description": (
            "A peer with inbox_max_per_peer messages kept: CHAT_REFUSED, reason inbox_full."
        ),
        "before": [send("m-8a")],
        "request": send("m-8b"),
        "expect": {"error": {"id": 1, "code": -32006, "reason": "inbox_full"}},
    },
    {
        "name": "09-no-text-part",
        "description": "A message needs at least one text part: INVALID_PARAMS (-32602).",
        "request": send("m-9", parts=[{"kind": "data", "data": {}}]),
        "expect": {"error": {"id": 1, "code": -32602}},
    },
    {
        "name": "10-unknown-member",
        "description": "Members the spec does not define are refused: INVALID_PARAMS (-32602).",
        "request": send("m-10", approved=True),
        "expect": {"error": {"id": 1, "code": -32602}},
    },
    {
        "name": "11-bad-id",
        "description": "A message_id outside [A-Za-z0-9._:-]{1,128}: INVALID_PARAMS (-32602).",
        "request": send("../etc/passwd"),
        "expect": {"error": {"id": 1, "code": -32602}},
    },
    {
        "name": "12-unknown-method",
        "description": "Any method but message/send: METHOD_NOT_FOUND (-32601).",
        "request": {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "t"}},
        "expect": {"error": {"id": 1, "code": -32601}},
    },
]


class Host:
    """The reference host: `ProfileChatHost` over a store in a temporary folder."""

    def __init__(self, folder: Path, limits: dict[str, int] | None = None) -> None:
        limits = {
            **{k: HOST[k] for k in ("messages_per_minute", "inbox_max_per_peer")},
            **(limits or {}),
        }
        self.config = ChatConfig(max_message_bytes=HOST["max_message_bytes"], **limits)
        self.store = ChatStore(folder / "chat.db")
        self.shown: list[Any] = []
        peers = {
            "trusted": PEERS["trusted"].model_copy(update={"peer_id": HOST["trusted_peer"]}),
            "off": PEERS["off"].model_copy(update={"peer_id": HOST["chat_off_peer"]}),
        }
        chat = ProfileChatHost(
            lambda: peers,
            lambda: self.config,
            self.store,
            self.shown.append,
            clock=lambda: 1_800_000_000.0,
        )
        self.server = ChatServer(chat, Limits(max_message_bytes=HOST["max_message_bytes"]))

    async def answer(self, caller: str, frame_hex: str) -> bytes:
        return await exchange(self.server, CALLERS[caller], bytes.fromhex(frame_hex))


async def run_case(case: dict[str, Any], folder: Path) -> bytes:
    """The bytes the reference host answers to the case's request (after its `before`)."""
    host = Host(folder, case.get("limits"))
    try:
        for frame in case.get("before", []):
            await host.answer(case.get("caller", "trusted"), _hex(frame))
        return await host.answer(case.get("caller", "trusted"), _hex(case["request"]))
    finally:
        host.store.close()


def write_all() -> None:
    """Write protocols/chat-vectors/*.json from CASES and what the reference host answers."""
    VECTORS.mkdir(exist_ok=True)
    (VECTORS / "host.json").write_text(json.dumps(HOST, indent=2) + "\n", encoding="utf-8")
    for case in CASES:
        with tempfile.TemporaryDirectory() as folder:
            answer = trio.run(run_case, case, Path(folder))
        vector = {
            "description": case["description"],
            "caller": case.get("caller", "trusted"),
            **({"limits": case["limits"]} if "limits" in case else {}),
            "before_hex": [_hex(frame) for frame in case.get("before", [])],
            "request_hex": _hex(case["request"]),
            "request": case["request"],
            "expect": case["expect"],
            "response_hex": answer.hex(),
        }
        path = VECTORS / f"{case['name']}.json"
        path.write_text(json.dumps(vector, indent=2) + "\n", encoding="utf-8")
        print(path, file=sys.stderr)


if __name__ == "__main__":
    write_all()
