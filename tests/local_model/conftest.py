"""Fixtures for the embedded-model tests: the real llama.cpp server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gbr_node.llm.local import LocalModel, local_model_server

START_TIMEOUT_S = 90.0  # bounded by local_model_server itself; a cold CI disk is slow


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalModel]:
    """A running embedded model server, stopped after the test; its log in tmp_path."""
    async with local_model_server(tmp_path / "node.log", startup_timeout_s=START_TIMEOUT_S) as run:
        yield run
