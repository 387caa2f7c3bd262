"""Unsigned-varint framing (multiformats unsigned-varint spec): pure, bytes in, frames out."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gbr_node.errors import LocalProtocolError, RemoteProtocolError
from gbr_node.rpc.codes import PARSE_ERROR, TOO_LARGE
from gbr_node.rpc.framing import FrameDecoder, encode_frame, encode_varint


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (255, "ff01"),
        (300, "ac02"),
        (16384, "808001"),
        (4 * 1024 * 1024, "80808002"),
        (2**63 - 1, "ffffffffffffffff7f"),
    ],
)
def test_varint_matches_the_multiformats_examples(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert FrameDecoder(max_size=2**63).feed(bytes.fromhex(encoded)) == ([b""] if not value else [])


@pytest.mark.parametrize("value", [-1, 2**63])
def test_varint_refuses_values_outside_nine_bytes(value: int) -> None:
    with pytest.raises(LocalProtocolError):
        encode_varint(value)


def test_encode_frame_refuses_text() -> None:
    with pytest.raises(TypeError, match="body must be bytes"):
        encode_frame("hello")  # type: ignore[arg-type]  # the wrong type is the test


def test_frames_come_out_whole_and_in_order_across_feeds() -> None:
    decoder = FrameDecoder(max_size=100)
    data = encode_frame(b"one") + encode_frame(b"") + encode_frame(b"three")
    assert decoder.feed(data[:2]) == []
    assert decoder.buffered == 2
    assert decoder.feed(data[2:6]) == [b"one", b""]
    assert decoder.feed(data[6:]) == [b"three"]
    assert decoder.buffered == 0


def test_oversized_prefix_is_refused_before_any_body_byte() -> None:
    decoder = FrameDecoder(max_size=1000)
    with pytest.raises(RemoteProtocolError) as caught:
        decoder.feed(encode_varint(1001))
    assert caught.value.code == TOO_LARGE
    assert caught.value.data == {"limit": 1000, "announced": 1001}


def test_frame_of_exactly_max_size_is_accepted() -> None:
    assert FrameDecoder(max_size=5).feed(encode_frame(b"12345")) == [b"12345"]


@pytest.mark.parametrize(
    "prefix",
    [bytes([0x80, 0x00]), bytes([0x81, 0x80, 0x00]), bytes([0xFF] * 9 + [0x01])],
    ids=["non-minimal-zero", "non-minimal-one", "ten-bytes"],
)
def test_malformed_prefix_is_a_parse_error(prefix: bytes) -> None:
    with pytest.raises(RemoteProtocolError) as caught:
        FrameDecoder(max_size=2**63).feed(prefix)
    assert caught.value.code == PARSE_ERROR


def test_a_broken_decoder_keeps_refusing() -> None:
    decoder = FrameDecoder(max_size=10)
    with pytest.raises(RemoteProtocolError):
        decoder.feed(bytes([0x80, 0x00]))
    with pytest.raises(RemoteProtocolError):
        decoder.feed(encode_frame(b"fine"))


def test_frames_before_a_bad_prefix_are_returned_and_the_next_feed_raises() -> None:
    decoder = FrameDecoder(max_size=10)
    assert decoder.feed(encode_frame(b"ok") + encode_varint(11)) == [b"ok"]
    with pytest.raises(RemoteProtocolError) as caught:
        decoder.feed(b"")
    assert caught.value.code == TOO_LARGE


@given(st.binary(max_size=64), st.lists(st.integers(min_value=0, max_value=64), max_size=8))
def test_any_bytes_give_frames_or_a_protocol_error(data: bytes, cuts: list[int]) -> None:
    decoder = FrameDecoder(max_size=32)
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    try:
        for start, end in zip(bounds, bounds[1:], strict=False):
            for frame in decoder.feed(data[start:end]):
                assert isinstance(frame, bytes) and len(frame) <= 32
    except RemoteProtocolError as exc:
        assert exc.code in (PARSE_ERROR, TOO_LARGE)


@given(
    st.lists(st.binary(max_size=300), max_size=6),
    st.lists(st.integers(min_value=0, max_value=2000), max_size=12),
)
def test_any_split_of_a_valid_stream_gives_the_same_frames(
    bodies: list[bytes], cuts: list[int]
) -> None:
    data = b"".join(encode_frame(body) for body in bodies)
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    decoder = FrameDecoder(max_size=300)
    frames: list[bytes] = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        frames += decoder.feed(data[start:end])
    assert frames == bodies
    assert decoder.buffered == 0
