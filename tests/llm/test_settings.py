"""Client settings validation and the retry-wait rule (RFC 9110 Retry-After, retry-after-ms)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

import pytest

from gbr_node.config.profile import ModelConfig
from gbr_node.llm.settings import ClientSettings, retry_wait_s

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
SETTINGS = ClientSettings(
    base_url="http://127.0.0.1:1/v1", model="m", backoff_base_s=0.5, retry_wait_cap_s=10
)


@pytest.mark.parametrize(
    ("headers", "attempt", "wait"),
    [
        ({"retry-after-ms": "250"}, 0, 0.25),
        ({"Retry-After-Ms": "250", "Retry-After": "9"}, 0, 0.25),
        ({"Retry-After": "2"}, 0, 2.0),
        ({"Retry-After": "1.5"}, 3, 1.5),
        ({"Retry-After": format_datetime(NOW + timedelta(seconds=3), usegmt=True)}, 0, 3.0),
        ({"Retry-After": format_datetime(NOW - timedelta(seconds=30), usegmt=True)}, 0, 0.0),
        ({"Retry-After": "soon"}, 1, 1.0),
        ({}, 0, 0.5),
        ({}, 2, 2.0),
        ({}, 10, 10.0),
        ({"Retry-After": "11"}, 0, None),
        ({"retry-after-ms": "60000"}, 0, None),
    ],
    ids=["ms", "ms_wins", "seconds", "fractional_seconds", "http_date", "http_date_past",
         "unreadable_falls_back", "backoff_first", "backoff_grows", "backoff_capped",
         "seconds_over_cap", "ms_over_cap"],
)  # fmt: skip
def test_retry_wait_follows_server_hints_then_capped_backoff(headers, attempt, wait) -> None:
    assert retry_wait_s(headers, attempt, SETTINGS, now=NOW) == wait


@pytest.mark.parametrize(
    ("field", "value"),
    [("base_url", "127.0.0.1:8080/v1"), ("model", ""), ("idle_timeout_s", 0),
     ("connect_timeout_s", -1), ("max_retries", -1)],
)  # fmt: skip
def test_bad_settings_name_the_field(field: str, value: object) -> None:
    values: dict[str, Any] = {"base_url": "http://x/v1", "model": "m", field: value}
    with pytest.raises(ValueError, match=field):
        ClientSettings(**values)


def test_settings_from_the_profile_model_table() -> None:
    config = ModelConfig(
        base_url="http://h/v1", model="m", temperature=0.2, headers={"x-a": "b"}, stream_tools=False
    )
    settings = ClientSettings.from_model_config(config, api_key="k")
    assert (settings.base_url, settings.model, settings.api_key) == ("http://h/v1", "m", "k")
    assert (settings.temperature, dict(settings.headers), settings.stream_tools) == (
        0.2,
        {"x-a": "b"},
        False,
    )


def test_profile_without_model_names_what_is_missing() -> None:
    with pytest.raises(ValueError, match=r"\[model\] model is not set"):
        ClientSettings.from_model_config(ModelConfig(base_url="http://h/v1"), api_key=None)
