"""The pure parts of the chat plane: messages, the rate window, backoff, the profile keys."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from gbr_node.chat.limits import RateWindow, backoff_s
from gbr_node.chat.messages import ChatMessage, DataPart, TextPart, new_message
from gbr_node.config.loader import parse_profile
from gbr_node.errors import ProfileError

PEER = "12D3KooWBwWFwNgcJhE2qEsL3ewZHApd6s68SSUBGAiVwXHre1E7"


def test_a_message_round_trips_through_its_wire_form() -> None:
    msg = new_message("hi\nthere", role="agent", context_id="t-1", in_reply_to="m-0")
    wire = msg.wire()
    assert wire["sent_at"].endswith("Z") and wire["parts"] == [
        {"kind": "text", "text": "hi\nthere"}
    ]
    assert ChatMessage.model_validate(wire) == msg
    assert msg.text == "hi\nthere" and msg.context_id == "t-1"


def test_text_parts_are_joined_and_data_parts_kept_apart() -> None:
    msg = ChatMessage(
        message_id="m",
        context_id="t",
        role="user",
        parts=(TextPart(text="a"), DataPart(data={"n": 1}), TextPart(text="b")),
        sent_at=datetime.now(UTC),
    )
    assert msg.text == "a\nb" and msg.data == ({"n": 1},)


@pytest.mark.parametrize(
    "change",
    [
        {"parts": [{"kind": "data", "data": {}}]},
        {"parts": []},
        {"parts": [{"kind": "text", "text": "x"}] * 17},
        {"role": "system"},
        {"message_id": ""},
        {"message_id": "a/b"},
        {"context_id": "x" * 129},
        {"sent_at": "2026-12-01T16:00:00"},
        {"from": "operator"},
        {"parts": [{"kind": "text", "text": "x", "mime": "text/html"}]},
    ],
)
def test_a_message_out_of_the_spec_is_refused(change: dict) -> None:
    wire = {**new_message("x", role="agent").wire(), **change}
    with pytest.raises(ValidationError):
        ChatMessage.model_validate(wire)


def test_the_rate_window_counts_per_peer_and_slides() -> None:
    window = RateWindow()
    assert [window.allow("a", 2, t) for t in (0.0, 1.0)] == [None, None]
    assert window.allow("a", 2, 2.0) == pytest.approx(58.0)
    assert window.allow("b", 2, 2.0) is None  # another peer has its own window
    assert window.allow("a", 2, 60.5) is None  # the first one left the window
    window.forget("a")
    assert window.allow("a", 2, 60.6) is None


def test_backoff_doubles_up_to_its_cap_and_follows_the_peers_hint() -> None:
    assert [backoff_s(n) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff_s(0, hint_s=12.5) == 12.5
    assert backoff_s(0, hint_s=0.01) == 1 and backoff_s(0, hint_s=999) == 30


def _profile(tmp_path, chat_line: str):
    text = f'[peers.bob]\npeer_id = "{PEER}"\n{chat_line}\n'
    return parse_profile(text, file="default.toml", project_dir=tmp_path, name="default")


@pytest.mark.parametrize("mode", ["off", "show", "reply"])
def test_chat_takes_its_three_values(tmp_path, mode: str) -> None:
    assert _profile(tmp_path, f'chat = "{mode}"').profile.peers["bob"].chat == mode


def test_chat_is_off_unless_the_profile_says_otherwise(tmp_path) -> None:
    assert _profile(tmp_path, "").profile.peers["bob"].chat == "off"


@pytest.mark.parametrize("line", ['chat = "on"', 'chat = "Reply"', "chat = true", 'chat = ""'])
def test_a_broken_chat_value_is_a_profile_error(tmp_path, line: str) -> None:
    """GBR-FAIL-01: a broken value refuses the profile (hot reload keeps the old one)."""
    with pytest.raises(ProfileError, match="chat"):
        _profile(tmp_path, line)
