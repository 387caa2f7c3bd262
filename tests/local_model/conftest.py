"""Fixtures for the embedded-model tests: the real llama.cpp server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gbr_node.llm.local import (
    DEFAULT_LOCAL_MODEL,
    SMALL_LOCAL_MODEL,
    LocalModel,
    local_model_available,
    local_model_server,
)

START_TIMEOUT_S = 90.0  # bounded by local_model_server itself; a cold CI disk is slow


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalModel]:
    """A running embedded model server, stopped after the test; its log in tmp_path.

    SmolLM2-135M, named explicitly: these tests check mechanics (streaming, the grammar,
    the window, cancellation), which a model that loads in a second shows as well as the
    default (issue 32); `test_run_offline` runs the default."""
    async with local_model_server(
        tmp_path / "node.log", SMALL_LOCAL_MODEL, startup_timeout_s=START_TIMEOUT_S
    ) as run:
        yield run


@pytest.fixture
async def default_local(tmp_path: Path) -> AsyncIterator[LocalModel]:
    """The default model's server (Qwen2.5-Coder-1.5B, its GGUF's own chat template), for
    what needs a model that calls tools on its own; skipped when it is not installed."""
    if not local_model_available(DEFAULT_LOCAL_MODEL):
        pytest.skip("the default embedded model is not installed (.ci/install-local-model)")
    async with local_model_server(
        tmp_path / "node.log", DEFAULT_LOCAL_MODEL, startup_timeout_s=START_TIMEOUT_S
    ) as run:
        yield run
