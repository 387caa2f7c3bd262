"""The SSE decoder against the WHATWG event-stream rules and real servers' framing."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gbr_node.llm.sse import SseComment, SseDecoder, SseEvent


def decode(*chunks: bytes) -> list[SseEvent | SseComment]:
    decoder = SseDecoder()
    items = []
    for chunk in chunks:
        items += decoder.feed(chunk)
    return items + decoder.close()


CASES = [
    ("data_with_space", b"data: hi\n\n", [SseEvent("hi")]),
    ("data_without_space", b"data:hi\n\n", [SseEvent("hi")]),
    ("only_one_leading_space_removed", b"data:  hi\n\n", [SseEvent(" hi")]),
    ("crlf_line_endings", b"data: a\r\n\r\ndata: b\r\n\r\n", [SseEvent("a"), SseEvent("b")]),
    ("cr_line_endings", b"data: a\r\rdata: b\r\r", [SseEvent("a"), SseEvent("b")]),
    ("multi_line_data_joined_with_lf", b"data: a\ndata: b\n\n", [SseEvent("a\nb")]),
    ("empty_data_line_dispatches_empty", b"data:\n\n", [SseEvent("")]),
    ("event_field_names_the_type", b"event: error\ndata: x\n\n", [SseEvent("x", "error")]),
    ("event_type_resets_after_dispatch", b"event: e\ndata: 1\n\ndata: 2\n\n",
     [SseEvent("1", "e"), SseEvent("2")]),
    ("id_is_kept", b"id: 7\ndata: x\n\ndata: y\n\n",
     [SseEvent("x", id="7"), SseEvent("y", id="7")]),
    ("comment_is_a_keep_alive", b": ping\n\ndata: x\n\n", [SseComment("ping"), SseEvent("x")]),
    ("bare_colon_comment", b":\n", [SseComment("")]),
    ("unknown_fields_ignored", b"foo: bar\ndata: x\n\n", [SseEvent("x")]),
    ("field_without_colon_has_empty_value", b"data\n\n", [SseEvent("")]),
    ("blank_lines_without_data_dispatch_nothing", b"\n\n\nevent: x\n\n", []),
    ("leading_bom_dropped", b"\xef\xbb\xbfdata: x\n\n", [SseEvent("x")]),
    ("unterminated_last_event_flushed_at_close", b"data: x", [SseEvent("x")]),
    ("last_event_without_blank_line_flushed", b"data: x\n", [SseEvent("x")]),
    ("invalid_utf8_replaced", b"data: \xff\n\n", [SseEvent("\ufffd")]),
    ("non_sse_body_gives_no_event", b'{"error": "bad"}', []),
    # llama.cpp (2025 builds): a mid-stream error in a non-standard `error:` field
    ("llama_cpp_error_field", b'error: {"code":400}\n\ndata: [DONE]\n\n',
     [SseEvent('{"code":400}', "error"), SseEvent("[DONE]")]),
    ("error_field_without_space", b"error:{}\n\n", [SseEvent("{}", "error")]),
]  # fmt: skip


@pytest.mark.parametrize(("stream", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decoder_follows_event_stream_rules(stream: bytes, expected: list) -> None:
    assert decode(stream) == expected


def test_retry_field_is_read_as_milliseconds() -> None:
    decoder = SseDecoder()
    decoder.feed(b"retry: 1500\nretry: x1\n\n")
    assert decoder.retry == 1500


def test_cr_at_chunk_end_waits_for_a_following_lf() -> None:
    # "data: a\r" + "\n\n": the CRLF must count as one line ending, not CR then LF.
    assert decode(b"data: a\r", b"\ndata: b\r\n\r\n") == [SseEvent("a\nb")]


def test_utf8_character_split_across_chunks_is_decoded_whole() -> None:
    encoded = "data: olá ☃\n\n".encode()
    cut = encoded.index("☃".encode()) + 1
    assert decode(encoded[:cut], encoded[cut:]) == [SseEvent("olá ☃")]


STREAM = (
    ": keep-alive\r\n\r\n"
    'data: {"a": "héllo ☃"}\r\n\r\n'
    "event: error\ndata: line1\ndata: line2\n\n"
    "data:x\rdata: y\r\r"
    "data: [DONE]\n\n"
).encode()


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_of_a_stream_gives_the_same_items(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(STREAM)]
    chunks = [STREAM[a:b] for a, b in itertools.pairwise(points)]
    assert decode(*chunks) == decode(STREAM)


@given(st.lists(st.binary(max_size=40), max_size=8))
def test_any_bytes_give_items_and_never_an_exception(chunks: list[bytes]) -> None:
    for item in decode(*chunks):
        assert isinstance(item, SseEvent | SseComment)
