"""Fixtures for the model-client tests: a real scripted model server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from gbr_node.llm.settings import ClientSettings
from tests.support.model_server import ModelServer


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


@pytest.fixture
def settings(server: ModelServer) -> Callable[..., ClientSettings]:
    """Makes client settings for `server`: short timeouts and retry waits (seconds), overridable."""

    def make(**overrides: object) -> ClientSettings:
        values: dict[str, object] = {
            "base_url": server.base_url,
            "model": server.model,
            "api_key": "sk-test",
            "connect_timeout_s": 2.0,
            "idle_timeout_s": 2.0,
            "request_timeout_s": 2.0,
            "max_retries": 2,
            "backoff_base_s": 0.01,
        }
        values.update(overrides)
        return ClientSettings(**values)  # type: ignore[arg-type]  # values typed as a loose dict of fields

    return make
