"""GBR-PRIV-01 over the wire: a real `gbr-node serve` whose root is the home folder,
called by a real libp2p client holding a trusted peer's key and a `"*"` grant.

Every tool x every private path (the node's state, the profile, the identity
key, `~/.ssh`) x spellings is refused with the JSON-RPC security-violation
error, nothing is read or changed, and an approval flood is bounded.
"""

from __future__ import annotations

import json

import pytest
import trio

from gbr_node.errors import RpcError
from gbr_node.p2p.host import open_host
from gbr_node.p2p.service import call_tool
from gbr_node.rpc import codes
from gbr_node.rpc.limits import Limits
from tests.e2e.p2p_helpers import Identity, ServeProcess, write_serving_profile

pytestmark = pytest.mark.slow
MARK = "PRIVATE-9137"
PRIVATE = [".gbr/node.log", ".gbr_envs/default.toml", ".ssh/id_rsa", ".config/gbr-node/peer.key"]


@pytest.fixture
def served_home(tmp_path):
    """(alice, the serving node over a home folder that is its project and root)."""
    home = tmp_path / "home"
    home.mkdir()
    alice, bob = Identity(tmp_path / "alice.key"), Identity(home / ".config/gbr-node/peer.key")
    write_serving_profile(home, {"alice": (alice.peer_id, "*")}, extra=f"# {MARK}")
    for relative in (".gbr/node.log", ".ssh/id_rsa"):
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(f"{MARK}\n")
    (home / "pyproject.toml").write_text("[project]\n")
    (home / "notes.txt").write_text("ordinary\n")
    (home / "sub").mkdir()
    server = ServeProcess(home, home, bob)
    try:
        yield alice, server, home
    finally:
        server.kill()


def _calls(path: str) -> list[tuple[str, dict[str, object]]]:
    return [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "x"}),
        ("edit_file", {"path": path, "old_string": MARK, "new_string": "x"}),
        ("delete_path", {"path": path}),
        ("move_path", {"source": path, "destination": "taken.txt"}),
        ("search_text", {"pattern": MARK, "path": path}),
        ("list_dir", {"path": path.rsplit("/", 1)[0]}),
    ]


async def test_every_tool_is_refused_every_private_path_over_the_wire(served_home) -> None:
    alice, server, home = served_home
    before = {p: (home / p).read_bytes() for p in PRIVATE}
    limits = Limits(call_timeout_s=30)
    refused = 0
    async with open_host(alice.keypair, [], is_trusted=lambda _: False) as host:
        with trio.fail_after(120):
            for relative in PRIVATE:
                for spelling in (relative, str(home / relative), f"sub/../{relative}"):
                    for tool, arguments in _calls(spelling):
                        with pytest.raises(RpcError) as error:
                            await call_tool(host, server.addr, tool, arguments, limits=limits)
                        assert error.value.code == codes.SECURITY_VIOLATION, (tool, spelling)
                        refused += 1
            found = await call_tool(
                host, server.addr, "search_text", {"pattern": MARK}, limits=limits
            )
            listing = await call_tool(
                host, server.addr, "list_dir", {"path": ".", "depth": 4}, limits=limits
            )
    assert refused == len(PRIVATE) * 3 * 7
    assert MARK not in json.dumps(found) and "0 matching lines" in found["content"][0]["text"]
    shown = listing["content"][0]["text"]
    assert "notes.txt" in shown and not any(name in shown for name in (".gbr", ".ssh", ".config"))
    assert {p: (home / p).read_bytes() for p in PRIVATE} == before


async def test_an_approval_flood_from_a_peer_is_bounded(served_home) -> None:
    alice, server, home = served_home
    limits = Limits(call_timeout_s=30)
    answers = []
    async with open_host(alice.keypair, [], is_trusted=lambda _: False) as host:
        with trio.fail_after(120):
            for n in range(12):
                try:
                    result = await call_tool(
                        host,
                        server.addr,
                        "write_file",
                        {"path": "pyproject.toml", "content": f"{n}" * 1000},
                        limits=limits,
                    )
                    answers.append(result["structuredContent"]["status"])
                except RpcError as exc:
                    answers.append(exc.code)
            with pytest.raises(RpcError) as big:
                await call_tool(
                    host,
                    server.addr,
                    "write_file",
                    {"path": "pyproject.toml", "content": "x" * (300 * 1024)},
                    limits=Limits(call_timeout_s=30, max_message_bytes=4 * 1024 * 1024),
                )
    assert answers == ["pending_approval"] * 8 + [codes.BUSY] * 4
    assert big.value.code in (codes.TOO_LARGE,)
    assert (home / "pyproject.toml").read_text() == "[project]\n"
