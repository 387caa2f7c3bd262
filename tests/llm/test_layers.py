"""The pure parts of gbr_node.llm load neither httpx nor trio (STYLE.md "Pure cores")."""

from __future__ import annotations

import subprocess
import sys

PURE = ["gbr_node.llm.sse", "gbr_node.llm.deltas", "gbr_node.llm.events", "gbr_node.llm.settings"]


def test_pure_llm_modules_import_no_io_library() -> None:
    code = (
        f"import sys; import {', '.join(PURE)}; "
        "print(sorted(m for m in ('httpx', 'httpcore', 'trio') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
