"""Remote tool calls between separate `gbr-node` processes on 127.0.0.1 (issue 3, ADR-0012b).

Each node is its own process with its own identity, project root and HOME:
`gbr-node serve` executes under its own sandbox and profile; `gbr-node call`
dials it over TCP + Noise + Yamux and calls one tool on `/gbr/mcp/1.0.0`.
Raw-frame tests use an in-process py-libp2p host holding a trusted identity.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import multiaddr
import pytest
import trio

from gbr_node.config.loader import load_profile
from gbr_node.errors import ProfileError
from gbr_node.p2p.host import open_host
from gbr_node.p2p.service import UNTRUSTED_LINGER_S, call_tool, list_tools
from gbr_node.rpc.codes import UnauthorizedPeer
from gbr_node.rpc.framing import encode_frame, encode_varint
from gbr_node.rpc.limits import Limits
from tests.e2e.conftest import gbr
from tests.e2e.p2p_helpers import (
    MCP,
    Identity,
    ServeProcess,
    children_running,
    decode_frame,
    gbr_call,
    is_running,
    start_call,
    write_serving_profile,
)
from tests.p2p.helpers import foreign_dial, foreign_host

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc; POSIX signals")

MAX_MESSAGE_BYTES = 65_536
NOTES = "line one\nline two\n"


@dataclass
class Cluster:
    """One serving node (`server`, root `root`) and the identities that call it."""

    tmp: Path
    root: Path
    server: ServeProcess
    alice: Identity  # trusted: read_file, write_file, run_command
    bob: Identity  # trusted: read_file only
    mallory: Identity  # not trusted
    caller_dir: Path

    def call(self, who: Identity, *args: str, target: str | None = None):
        home = self.tmp / f"home-{who.path.stem}"
        return gbr_call(self.caller_dir, home, who, target or self.server.addr, *args)


def _start_cluster(tmp_path: Path) -> Cluster:
    keys = tmp_path / "keys"
    keys.mkdir()
    server_id, alice, bob, mallory = (
        Identity(keys / f"{name}.key") for name in ("server", "alice", "bob", "mallory")
    )
    root = tmp_path / "served"
    root.mkdir()
    (root / "notes.txt").write_text(NOTES)
    (tmp_path / "secret.txt").write_text("outside the root\n")
    write_serving_profile(
        root,
        {
            "alice": (alice.peer_id, ["read_file", "write_file", "run_command"]),
            "bob": (bob.peer_id, ["read_file"]),
        },
        node=f"max_message_bytes = {MAX_MESSAGE_BYTES}\ncall_timeout_s = 60",
        extra='[tools.run_command]\nallow = ["sleep"]',
    )
    caller_dir = tmp_path / "caller"
    caller_dir.mkdir()
    server = ServeProcess(root, tmp_path / "home-server", server_id)
    return Cluster(tmp_path, root, server, alice, bob, mallory, caller_dir)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    """One serving node shared by the tests of this module that leave it running."""
    started = _start_cluster(tmp_path_factory.mktemp("cluster"))
    yield started
    started.server.stop()


@pytest.fixture
def own_cluster(tmp_path) -> Iterator[Cluster]:
    """A serving node for one test (which may kill it)."""
    started = _start_cluster(tmp_path)
    yield started
    started.server.stop()


def test_trusted_peer_reads_and_writes_files_in_the_serving_nodes_root(cluster):
    read = cluster.call(cluster.alice, "read_file", '{"path": "notes.txt"}')
    assert read.returncode == 0, read.stderr
    assert "line one" in read.stdout and "line two" in read.stdout

    wrote = cluster.call(cluster.alice, "write_file", '{"path": "out/new.txt", "content": "hi"}')
    assert wrote.returncode == 0, wrote.stderr
    assert (cluster.root / "out" / "new.txt").read_text() == "hi"
    assert not (cluster.caller_dir / "out").exists()  # executed there, not here
    cluster.server.wait_line(r"^alice write_file ok \d+ ms$")

    listed = cluster.call(cluster.alice, "--list")
    assert listed.returncode == 0, listed.stderr
    names = {line.split()[0] for line in listed.stdout.splitlines()}
    assert {"read_file", "write_file", "run_command"} <= names
    assert "search_text" not in names  # enabled there, not granted to alice


def test_the_serving_process_leaves_py_libp2ps_unused_subsystems_out(cluster):
    """mDNS (zeroconf) and the DHT (cbor2) are not loaded in `serve` (gbr_node/lean.py)."""
    maps = Path(f"/proc/{cluster.server.proc.pid}/maps").read_text()
    assert "/zeroconf/" not in maps and "/cbor2/" not in maps
    assert "_pydantic_core" in maps  # the check sees the process's shared objects


def test_two_serving_nodes_call_each_other_and_each_runs_in_its_own_root(tmp_path):
    """Two `serve` processes trust each other; each one's key calls the other (UBQ-DEV-01)."""
    nodes = {}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        nodes[name] = Identity(tmp_path / f"{name}.key")
    roots = {name: tmp_path / name for name in nodes}
    for name, other in (("a", "b"), ("b", "a")):
        write_serving_profile(roots[name], {other: (nodes[other].peer_id, "*")})
    servers = {
        name: ServeProcess(roots[name], tmp_path / f"home-{name}", nodes[name]) for name in nodes
    }
    try:
        for caller, callee in (("a", "b"), ("b", "a")):
            args = json.dumps({"path": "from.txt", "content": f"written by {caller}"})
            done = gbr_call(
                roots[caller],
                tmp_path / f"home-{caller}",
                nodes[caller],
                servers[callee].addr,
                "write_file",
                args,
            )
            assert done.returncode == 0, done.stderr
            servers[callee].wait_line(rf"^{caller} write_file ok \d+ ms$")
        assert (roots["b"] / "from.txt").read_text() == "written by a"
        assert (roots["a"] / "from.txt").read_text() == "written by b"
    finally:
        for server in servers.values():
            server.stop()


@pytest.mark.parametrize("path", ["../secret.txt", "out/../../secret.txt"])
def test_the_executing_nodes_sandbox_refuses_an_escape(cluster, path):
    """UNW-DEV-01 on the serving node: `..` out of its root is a security violation."""
    read = cluster.call(cluster.alice, "read_file", json.dumps({"path": path}))
    assert read.returncode == 1
    assert "climbs above the allowed root" in read.stderr
    assert "outside the root" not in read.stdout + read.stderr

    target = path.replace("secret", "escaped")
    wrote = cluster.call(cluster.alice, "write_file", json.dumps({"path": target, "content": "x"}))
    assert wrote.returncode == 1
    assert "climbs above the allowed root" in wrote.stderr
    assert not (cluster.tmp / "escaped.txt").exists()
    cluster.server.wait_line(r"^alice write_file security violation \d+ ms$")


def test_absolute_path_outside_the_root_is_refused(cluster):
    outside = str(cluster.tmp / "secret.txt")
    read = cluster.call(cluster.alice, "read_file", json.dumps({"path": outside}))
    assert read.returncode == 1, read.stdout
    assert "outside the root" not in read.stdout


def test_untrusted_peer_gets_unauthorized_and_its_write_leaves_no_trace(cluster):
    before = sorted(p.relative_to(cluster.root) for p in cluster.root.rglob("*"))
    wrote = cluster.call(
        cluster.mallory, "write_file", '{"path": "pwned.txt", "content": "mallory was here"}'
    )
    assert wrote.returncode == 3
    assert "does not trust your peer ID" in wrote.stderr
    listed = cluster.call(cluster.mallory, "--list")
    assert listed.returncode == 3
    assert listed.stdout == ""
    assert not (cluster.root / "pwned.txt").exists()
    short = f"{cluster.mallory.peer_id[:6]}…{cluster.mallory.peer_id[-6:]}"
    # refused before its request was read (GBR-DOS-01): the method is not known
    cluster.server.wait_count(rf"^{short} - unauthorized peer \d+ ms$", 2)
    # .gbr/node.log is the serving node's own log; nothing else changed
    after = sorted(
        p.relative_to(cluster.root) for p in cluster.root.rglob("*") if ".gbr" not in p.parts
    )
    assert after == [p for p in before if ".gbr" not in p.parts]


def test_a_tool_not_granted_is_refused_and_does_not_run(cluster):
    wrote = cluster.call(cluster.bob, "write_file", '{"path": "bob.txt", "content": "x"}')
    assert wrote.returncode == 1
    assert "unknown tool 'write_file'" in wrote.stderr
    assert not (cluster.root / "bob.txt").exists()
    cluster.server.wait_line(r"^bob write_file unknown tool \d+ ms$")  # what bob was told

    listed = cluster.call(cluster.bob, "--list")
    names = {line.split()[0] for line in listed.stdout.splitlines()}
    assert "read_file" in names and "write_file" not in names
    read = cluster.call(cluster.bob, "read_file", '{"path": "notes.txt"}')
    assert read.returncode == 0 and "line one" in read.stdout


def test_call_goes_past_a_broken_section_it_does_not_use_but_not_a_bad_peer_entry(cluster):
    """A call applies none of the profile's sandbox rules: a mistake there does not stop
    it, while `serve` still refuses that profile; a bad `[peers]` entry stops both, with
    one message (issue 35)."""
    project = cluster.tmp / "caller-broken"
    server_at = cluster.server.addr.rsplit("/p2p/", 1)[0]
    broken = "[tools.run_command]\ntimeout_s = -1\n"
    peer = f'[peers.server]\npeer_id = "{cluster.server.identity.peer_id}"\n'
    profile = write_serving_profile(project, {}, extra=broken + peer + f'addrs = ["{server_at}"]')
    home = cluster.tmp / "home-alice"

    read = gbr_call(project, home, cluster.alice, "server", "read_file", '{"path": "notes.txt"}')
    assert read.returncode == 0, read.stderr
    assert "line one" in read.stdout
    served = gbr(project, "--identity", str(cluster.alice.path), "serve", home=home)
    assert served.returncode == 1
    assert "[tools.run_command.timeout_s]: must be greater than 0" in served.stderr

    text = profile.read_text().replace(broken, "")  # serve would list both problems
    profile.write_text(text.replace(server_at, "/ip4/256.0.0.1/tcp/4001"))
    with pytest.raises(ProfileError) as refused:
        load_profile(project)
    for command in (("call", "server", "--list"), ("serve",)):
        done = gbr(project, "--identity", str(cluster.alice.path), *command, home=home)
        assert done.returncode == 1
        assert done.stderr == f"gbr-node: {refused.value}\n"
    assert "[peers.server]: /ip4/256.0.0.1/tcp/4001: 256.0.0.1 is not an ip4" in str(refused.value)


@contextlib.contextmanager
def _sleep_running_there(cluster: Cluster):
    """Alice's `gbr-node call ... run_command sleep 30`, once `sleep` runs on the server:
    yields (the caller process, the sleepers' PIDs); both are killed after."""
    caller = start_call(
        cluster.caller_dir,
        cluster.tmp / "home-alice",
        cluster.alice,
        cluster.server.addr,
        "run_command",
        '{"argv": ["sleep", "30"]}',
    )
    sleepers: list[int] = []
    try:
        deadline = time.monotonic() + 30  # for the call to reach `sleep` there
        while not sleepers and caller.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            sleepers = children_running(cluster.server.proc.pid, "sleep")
        assert sleepers, f"sleep never started; caller: {caller.poll()} {caller.communicate()}"
        yield caller, sleepers
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait(timeout=10)
        for pid in sleepers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_caller_killed_mid_call_is_a_line_of_the_serve_log(own_cluster):
    """Its command is killed with the call (guide: peers.md), and serve's one line per
    call names it too: it used to print nothing for it."""
    with _sleep_running_there(own_cluster) as (caller, sleepers):
        caller.kill()
        own_cluster.server.wait_line(r"^alice run_command caller left \d+ ms$", 30)
        deadline = time.monotonic() + 30
        while any(Path(f"/proc/{pid}").exists() for pid in sleepers):
            assert time.monotonic() < deadline, "the command outlived its call"
            time.sleep(0.05)


def test_killing_the_serving_process_mid_call_fails_the_call_at_once(own_cluster):
    """SIGKILL while `sleep 30` runs there: the caller gets exit 3, long before its 120 s limit."""
    with _sleep_running_there(own_cluster) as (caller, _):
        own_cluster.server.kill()
        # bounded by this wait's own timeout; the caller's call time limit is 120 s
        out, err = caller.communicate(timeout=30)
        assert caller.returncode == 3, (out, err)
        assert "closed the stream without answering" in err or "reset" in err, err


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_stopping_serve_mid_command_kills_the_command_and_prints_no_traceback(own_cluster, stop):
    server = own_cluster.server
    with _sleep_running_there(own_cluster) as (caller, sleepers):
        server.proc.send_signal(stop)
        assert server.proc.wait(timeout=30) == (130 if stop == signal.SIGINT else 0)
        assert not any("Traceback" in line for line in server.all_lines())
        deadline = time.monotonic() + 10
        while any(is_running(pid) for pid in sleepers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(is_running(pid) for pid in sleepers)
        caller.communicate(timeout=30)
        assert caller.returncode == 3


async def _raw_exchange(host, target: str, data: bytes) -> bytes:
    """Send `data` on a new `/gbr/mcp/1.0.0` stream; return all bytes until the server closes."""
    stream = await host.new_stream(target, MCP, timeout_s=10)
    try:
        await stream.send_all(data)
        received = b""
        while chunk := await stream.receive_some():
            received += chunk
        return received
    finally:
        await stream.aclose()


async def test_oversized_and_malformed_frames_get_json_rpc_errors_and_serving_goes_on(cluster):
    limits = Limits(max_message_bytes=MAX_MESSAGE_BYTES, call_timeout_s=30)
    async with open_host(cluster.alice.keypair, [], is_trusted=lambda _: False) as host:
        with trio.fail_after(60):
            # a length prefix one byte above max_message_bytes, and no body at all
            oversized = await _raw_exchange(
                host, cluster.server.addr, encode_varint(MAX_MESSAGE_BYTES + 1)
            )
            too_large = json.loads(decode_frame(oversized)[1])
            assert too_large["id"] is None
            assert too_large["error"]["code"] == -32004
            assert too_large["error"]["data"] == {
                "limit": MAX_MESSAGE_BYTES,
                "announced": MAX_MESSAGE_BYTES + 1,
            }

            huge = await _raw_exchange(host, cluster.server.addr, encode_varint(2**62))
            assert json.loads(decode_frame(huge)[1])["error"]["code"] == -32004

            malformed = await _raw_exchange(host, cluster.server.addr, encode_frame(b"{not json"))
            parse_error = json.loads(decode_frame(malformed)[1])
            assert parse_error["id"] is None
            assert parse_error["error"]["code"] == -32700

            not_utf8 = await _raw_exchange(host, cluster.server.addr, encode_frame(b"\xff\xfe{}"))
            assert json.loads(decode_frame(not_utf8)[1])["error"]["code"] == -32700

            # the same connection, and other peers, are still served
            result = await call_tool(
                host, cluster.server.addr, "read_file", {"path": "notes.txt"}, limits=limits
            )
            assert "line one" in result["content"][0]["text"]
            other = await trio.to_thread.run_sync(
                lambda: cluster.call(cluster.bob, "read_file", '{"path": "notes.txt"}')
            )
            assert other.returncode == 0 and "line two" in other.stdout
    cluster.server.wait_line(r"^alice - too large \d+ ms$")
    cluster.server.wait_line(r"^alice - parse error \d+ ms$")


async def test_an_untrusted_peer_that_stays_gets_its_answer_then_loses_the_connection(cluster):
    limits = Limits(call_timeout_s=30)
    async with open_host(cluster.mallory.keypair, [], is_trusted=lambda _: False) as host:
        with trio.fail_after(30):
            with pytest.raises(UnauthorizedPeer, match="does not trust"):
                await list_tools(host, cluster.server.addr, limits=limits)
            assert cluster.server.identity.peer_id in host.connected_peers()
            started = trio.current_time()
            while cluster.server.identity.peer_id in host.connected_peers():
                await trio.sleep(0.05)
    assert trio.current_time() - started < UNTRUSTED_LINGER_S + 5


@pytest.mark.parametrize(("security", "muxer"), [("plaintext", "yamux"), ("noise", "mplex")])
async def test_a_plaintext_or_mplex_only_host_cannot_connect_to_a_serving_process(
    cluster, security, muxer
):
    other = foreign_host(security=security, muxer=muxer)
    async with other.run([multiaddr.Multiaddr("/ip4/127.0.0.1/tcp/0")]):
        with trio.fail_after(20), pytest.raises(Exception, match="unable to connect"):
            await foreign_dial(other, cluster.server.addr)
    served = await trio.to_thread.run_sync(
        lambda: cluster.call(cluster.bob, "read_file", '{"path": "notes.txt"}')
    )
    assert served.returncode == 0, served.stderr


CYCLES = 1_000
WARMUP = 50
CLIENTS = 16  # py-libp2p's disconnect takes ~0.2 s: overlap the closes across hosts
MAX_RSS_GROWTH_BYTES = 10 * 1024 * 1024


@pytest.mark.slow
async def test_thousand_connect_call_disconnect_cycles_all_succeed_in_bounded_memory(tmp_path):
    """1,000 sequential dial + Noise + Yamux + `tools/call` + close against one `serve`.

    Each cycle dials anew; the ~0.2 s close of a connection runs in the
    background while the next cycle (from another client host) goes on.
    The serving process's resident memory may grow by less than 10 MB
    after a 50-cycle warm-up (issue 3).
    """
    callers = [Identity(tmp_path / f"caller{n}.key") for n in range(CLIENTS)]
    root = tmp_path / "served"
    root.mkdir()
    (root / "notes.txt").write_text(NOTES)
    write_serving_profile(
        root, {f"c{n}": (c.peer_id, ["read_file"]) for n, c in enumerate(callers)}
    )
    server = ServeProcess(root, tmp_path / "home", Identity(tmp_path / "server.key"))
    limits = Limits(call_timeout_s=10)
    rss: dict[str, int] = {}
    try:
        async with contextlib.AsyncExitStack() as stack:
            hosts = [
                await stack.enter_async_context(
                    open_host(c.keypair, [], is_trusted=lambda _: False)
                )
                for c in callers
            ]
            free = [trio.Event() for _ in hosts]
            for event in free:
                event.set()

            async def disconnect(slot: int) -> None:
                await hosts[slot].disconnect(server.peer_id)
                free[slot].set()

            async with trio.open_nursery() as nursery:
                for cycle in range(CYCLES):
                    slot = cycle % CLIENTS
                    with trio.fail_after(20):
                        await free[slot].wait()
                        args = {"path": "notes.txt", "offset": 1 + cycle % 2}
                        result = await call_tool(
                            hosts[slot], server.addr, "read_file", args, limits=limits
                        )
                    assert not result["isError"], (cycle, result)
                    assert "line two" in result["content"][0]["text"], cycle
                    free[slot] = trio.Event()
                    nursery.start_soon(disconnect, slot)
                    if cycle + 1 == WARMUP:
                        rss["warm"] = server.rss_bytes()
            # every call was answered and logged before measuring
            await trio.to_thread.run_sync(server.wait_count, r" read_file ok ", CYCLES, 20)
        rss["end"] = server.rss_bytes()
    finally:
        server.stop()
    growth = rss["end"] - rss["warm"]
    print(
        f"serve RSS after {WARMUP} cycles {rss['warm'] / 2**20:.1f} MiB, after {CYCLES} "
        f"{rss['end'] / 2**20:.1f} MiB, growth {growth / 2**20:.2f} MiB"
    )
    assert growth < MAX_RSS_GROWTH_BYTES
