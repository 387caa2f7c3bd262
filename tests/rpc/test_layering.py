"""The RPC plane's import rules (STYLE.md, "Layers import downwards only")."""

from __future__ import annotations

import subprocess
import sys

import pytest

FOREIGN = ("trio", "httpx", "libp2p")


def imported_roots(*modules: str) -> set[str]:
    code = (
        f"import sys; import {', '.join(modules)}; "
        f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split()) & set(FOREIGN)


def test_codec_and_framing_are_pure() -> None:
    assert (
        imported_roots("gbr_node.rpc.codes", "gbr_node.rpc.messages", "gbr_node.rpc.framing")
        == set()
    )


@pytest.mark.parametrize("module", ["gbr_node.rpc.server", "gbr_node.rpc.client"])
def test_server_and_client_depend_on_trio_only(module: str) -> None:
    assert imported_roots(module) == {"trio"}
