"""Results as `gbr-node mcp` hands them over (GBR-MCP-01): capped with a paging note,
peers' failures kept apart by kind, other content reduced to text."""

import pytest

from gbr_node.errors import CallTimeout, PeerUnreachable, StreamBroken
from gbr_node.mcp.results import CHARS_PER_TOKEN, capped, peer_failure, peer_result, text_only
from gbr_node.rpc.codes import (
    InvalidParams,
    PeerBusy,
    PeerCallTimeout,
    PeerSecurityViolation,
    UnauthorizedPeer,
)


def text_result(text, **extra):
    return {"content": [{"type": "text", "text": text}], "isError": False, **extra}


def test_a_result_within_budget_is_unchanged():
    result = text_result("a" * 400)
    assert capped(result, tool="read_file", max_tokens=100) is result


def test_a_big_result_is_cut_at_a_line_end_with_a_note_on_paging():
    lines = "".join(f"line {n:05d}\n" for n in range(10_000))  # 110,000 characters
    schema = {"properties": {"path": {}, "offset": {}, "limit": {}}}
    out = capped(text_result(lines), tool="read_file", input_schema=schema, max_tokens=1_000)
    body, note = out["content"]
    assert len(body["text"]) <= 1_000 * CHARS_PER_TOKEN and body["text"].endswith("\n")
    assert lines.startswith(body["text"])
    assert "110,000 characters" in note["text"] and "offset" in note["text"]
    assert out["isError"] is False


def test_the_default_budget_is_twenty_thousand_tokens():
    out = capped(text_result("y" * 100_000), tool="t")
    assert len(out["content"][0]["text"]) == 20_000 * CHARS_PER_TOKEN
    assert "call t again asking for less" in out["content"][-1]["text"]


def test_items_past_the_budget_and_oversized_structured_content_are_dropped():
    result = {
        "content": [{"type": "text", "text": "a" * 300}, {"type": "text", "text": "b" * 300}],
        "structuredContent": {"blob": "c" * 1000},
        "isError": True,
    }
    out = capped(result, tool="t", max_tokens=100)
    assert [len(i["text"]) for i in out["content"][:-1]] == [300, 100]
    assert "structuredContent" not in out and out["isError"] is True
    assert "structuredContent did not fit" in out["content"][-1]["text"]


def test_max_tokens_must_be_positive():
    with pytest.raises(ValueError, match="max_tokens"):
        capped(text_result("x"), tool="t", max_tokens=0)


FAILURES = [
    # (exception, kind, words the text must hold)
    (
        PeerUnreachable("connection refused (nothing listens on that port)"),
        "unreachable",
        "unreachable",
    ),
    (StreamBroken("the peer closed the stream without answering"), "unreachable", "unreachable"),
    (CallTimeout("tools/call: no response within 120.0 s"), "timeout", "in time"),
    (PeerCallTimeout(-32003, "ran past 120 s"), "timeout", "in time"),
    (UnauthorizedPeer(-32001, "this node does not trust your peer ID"), "refused", "refused"),
    (InvalidParams(-32602, "unknown tool 'x'"), "refused", "unknown tool"),
    (PeerSecurityViolation(-32002, "path escapes the root"), "refused", "escapes"),
    (PeerBusy(-32005, "too many concurrent calls"), "refused", "too many"),
]


def test_each_kind_of_peer_failure_is_a_distinct_error_result_naming_the_peer():
    for exc, kind, words in FAILURES:
        out = peer_failure("bob", "read_file", exc)
        assert out["isError"] is True
        assert out["structuredContent"]["peer_error"] == {
            "kind": kind,
            "peer": "bob",
            "tool": "read_file",
        }, exc
        text = out["content"][0]["text"]
        assert "bob" in text and words in text, text


def test_a_peers_failed_tool_is_tool_failed_and_keeps_its_words():
    failed = {"content": [{"type": "text", "text": "no such file: x"}], "isError": True}
    out = peer_result("bob", "read_file", failed)
    assert out["structuredContent"]["peer_error"]["kind"] == "tool_failed"
    assert [i["text"] for i in out["content"]] == [
        "read_file failed on peer bob:",
        "no such file: x",
    ]
    ok = text_result("fine")
    assert peer_result("bob", "read_file", ok) is ok


def test_non_text_content_becomes_a_line_saying_what_it_was():
    out = text_only(
        [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA" * 100, "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b", "blob": "AAAA"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"},
        ]
    )
    texts = [i["text"] for i in out]
    assert all(i["type"] == "text" for i in out)
    assert texts[0] == "hello" and "image/png" in texts[1] and "300 bytes" in texts[1]
    assert texts[2] == "inside" and "file:///b" in texts[3] and "file:///c" in texts[4]
