"""A trusted peer's tools through `gbr-node mcp` (GBR-MCP-01): a second real `gbr-node serve`
process, errors kept apart by kind, and an MCP client's cancellation reaching the peer's tool."""

from __future__ import annotations

import time

import pytest
import trio
from mcp.client.subscriptions import listen

from tests.e2e.mcp_helpers import (
    ERAS,
    WAIT_S,
    mcp_session,
    text_of,
    tool_names,
    wait_for_tool,
    write_mcp_profile,
)
from tests.e2e.p2p_helpers import Identity, ServeProcess, write_serving_profile
from tests.mcp.conftest import support_server_argv, toml_array

pytestmark = pytest.mark.slow


class Peers:
    """alice (the node `gbr-node mcp` runs as) and bob (a `gbr-node serve` trusting alice)."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.alice = Identity(tmp_path / "alice.key")
        self.bob = Identity(tmp_path / "bob.key")
        self.project = tmp_path / "alice"
        self.project.mkdir()
        self.bob_root = tmp_path / "bob"
        self.bob_root.mkdir()
        (self.bob_root / "remote.txt").write_text("kept on bob\n", encoding="utf-8")
        self.marks = tmp_path / "marks"
        self.server = None

    def serve_bob(self, tools, node=""):
        self.grant(tools, node)
        self.server = ServeProcess(self.bob_root, self.tmp / "bob-home", self.bob)

    def grant(self, tools, node=""):
        """(Re)write bob's profile: alice granted `tools`, the test server mounted as `t`."""
        mounted = f"[mcp_servers.t]\ncommand = {toml_array(support_server_argv(self.marks))}\n"
        write_serving_profile(
            self.bob_root, {"alice": (self.alice.peer_id, tools)}, node=node, extra=mounted
        )

    def trust_bob(self, node=""):
        addr = self.server.addr.rsplit("/p2p/", 1)[0]
        write_mcp_profile(
            self.project,
            f'{node}\n[peers.bob]\npeer_id = "{self.bob.peer_id}"\naddrs = ["{addr}"]\n',
        )

    def session(self, era):
        return mcp_session(self.project, era, identity=self.alice.path)


@pytest.fixture
def peers(tmp_path):
    pair = Peers(tmp_path)
    yield pair
    if pair.server is not None:
        pair.server.kill()


@pytest.mark.parametrize("era", ERAS)
async def test_a_trusted_peers_tool_is_called_as_alias__tool(peers, era):
    peers.serve_bob(["read_file"])
    peers.trust_bob()
    async with peers.session(era) as session:
        await wait_for_tool(session, "bob__read_file")
        result = await session.call_tool("bob__read_file", {"path": "remote.txt"})
        assert not result.is_error and "kept on bob" in text_of(result)
    peers.server.wait_line(r"^alice read_file ok \d+ ms")


async def test_peer_errors_are_distinct_results_naming_the_peer(peers):
    peers.serve_bob(["read_file", "t__wait"], node="call_timeout_s = 60")
    peers.trust_bob(node="call_timeout_s = 2")
    async with peers.session("modern") as session:
        await wait_for_tool(session, "bob__t__wait")

        def kind_of(result):
            assert result.is_error, text_of(result)
            assert "bob" in text_of(result)
            return result.structured_content["peer_error"]["kind"]

        missing = await session.call_tool("bob__read_file", {"path": "absent.txt"})
        assert kind_of(missing) == "tool_failed" and "no such file" in text_of(missing)
        slow = await session.call_tool("bob__t__wait", {"seconds": 20})
        assert kind_of(slow) == "timeout"

        # bob takes back read_file (hot reload) after we listed it: refused, and the
        # client hears that the list changed when gbr-node mcp asks bob again
        async with listen(session, tools_list_changed=True) as subscription:
            peers.grant(["t__wait"])
            peers.server.wait_line(r"profile default reloaded", WAIT_S)
            refused = await session.call_tool("bob__read_file", {"path": "remote.txt"})
            assert kind_of(refused) == "refused" and "unknown tool" in text_of(refused)
            with trio.fail_after(WAIT_S):
                await subscription.__anext__()
        assert "bob__read_file" not in await tool_names(session)

        peers.server.kill()
        gone = await session.call_tool("bob__t__wait", {"seconds": 1})
        assert kind_of(gone) == "unreachable"


async def test_a_clients_cancellation_reaches_the_peers_tool_within_a_second(peers):
    peers.serve_bob(["t__wait"])
    peers.trust_bob()
    async with peers.session("modern") as session:
        await wait_for_tool(session, "bob__t__wait")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.call_tool, "bob__t__wait", {"seconds": 60})
            with trio.fail_after(WAIT_S):
                while not (peers.marks / "started").exists():
                    await trio.sleep(0.02)
            nursery.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        cancelled_at = time.time()
        with trio.fail_after(10):
            while not (peers.marks / "cancelled").exists():
                await trio.sleep(0.02)
        seen = float((peers.marks / "cancelled").read_text())
        assert seen - cancelled_at < 1.0, (
            f"the peer's tool saw it {seen - cancelled_at:.2f} s later"
        )
