"""Benchmark: what `gbr-node mcp` adds to a tool call (GBR-MCP-01).

Usage: python scripts/bench/mcp.py [--runs N] [--cli-runs N] [--quick]

In one run on loopback (127.0.0.1 only), each node in its own process:

  mcp local      `tools/call read_file` (1 KiB file) from the SDK's stdio client
                 (`mcp.ClientSession`, modern era) to `gbr-node mcp`
  bare local     the same `read_file` run in this process on the same registry
                 (`NodeTools.run`): the tool itself, no transport
  mcp peer       `tools/call bob__read_file`: client -> `gbr-node mcp` -> libp2p
                 -> a `gbr-node serve` process ("bob")
  bare RPC       `/gbr/mcp/1.0.0` `read_file` on bob from this process, a new stream
                 per call on a warm connection (`gbr_node.p2p.service.call_tool`)
  gbr-node call  the CLI, one process per call (start, dial, call, exit)
  SDK floor      the same SDK client against a trivial SDK stdio server (one echo
                 tool, nothing else): what the SDK's stdio round trip costs alone

The MCP hop is `mcp peer - bare RPC` and `mcp local - bare local` (medians);
target: <= 1 ms each. The measures are interleaved in rounds so that the load of
this shared machine falls on all of them alike; the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

# Run as a script, this file's folder comes first on sys.path and its name, mcp.py,
# would hide the `mcp` SDK package: take the folder off.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

LOOPBACK = "/ip4/127.0.0.1/tcp/0"
ROUND = 50
FLOOR_SERVER = """
import trio, mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
async def tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema={"type": "object"})])
async def call(ctx, params):
    return types.CallToolResult(content=[types.TextContent(text="y" * 1024)])
server = Server("floor", on_list_tools=tools, on_call_tool=call)
async def main():
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())
trio.run(main)
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), NO_COLOR="1")
    return env


def _project(root: Path, profile: str) -> Path:
    (root / ".gbr_envs").mkdir(parents=True)
    (root / ".gbr_envs" / "default.toml").write_text(profile)
    (root / "kib.txt").write_text(("y" * 63 + "\n") * 16)  # 1,024 bytes
    return root


def _start_bob(work: Path, alice_id: str, bob_key: Path) -> tuple[subprocess.Popen, str]:
    root = _project(
        work / "bob",
        f'[node]\nlisten = ["{LOOPBACK}"]\n[peers.alice]\npeer_id = "{alice_id}"\n'
        'tools = ["read_file"]\n',
    )
    log = work / "bob.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gbr_node", "--identity", str(bob_key), "serve"],
            cwd=root,
            env=_env(work),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lines = [ln.strip() for ln in log.read_text().splitlines() if "/p2p/" in ln]
        if lines:
            return proc, lines[0]
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"serve did not start: {log.read_text()[-2000:]}")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds process `pid` used so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _child_pid(*words: str) -> int:
    """The process ID of this process's child whose command line holds all `words`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and all(w.encode() in argv for w in words):
            return int(entry.name)
    raise RuntimeError(f"no child process running {words}")


async def _timed(runs: int, op: Callable[[], Awaitable[object]]) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await op()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def _measure(args: argparse.Namespace, work: Path) -> dict:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from gbr_node.config.loader import load_profile
    from gbr_node.control import Node
    from gbr_node.p2p.host import open_host
    from gbr_node.p2p.identity import load_or_create_identity, peer_id_of
    from gbr_node.p2p.service import call_tool
    from gbr_node.rpc.limits import Limits

    alice_key, bob_key = work / "alice.key", work / "bob.key"
    alice = load_or_create_identity(alice_key)
    bob_proc, bob_addr = _start_bob(work, peer_id_of(alice), bob_key)
    bob_id, bob_tcp = bob_addr.rsplit("/p2p/", 1)[1], bob_addr.rsplit("/p2p/", 1)[0]
    project = _project(
        work / "alice",
        f'[node]\nlisten = ["{LOOPBACK}"]\n[peers.bob]\npeer_id = "{bob_id}"\n'
        f'addrs = ["{bob_tcp}"]\n',
    )
    node = Node(load_profile(project))
    ms: dict[str, Any] = {key: [] for key in ("mcp", "local", "peer", "rpc", "floor")}
    cpu: dict[str, dict[str, float]] = {}
    gbr_mcp = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gbr_node", "--identity", str(alice_key), "mcp"],
        cwd=str(project),
        env=_env(work),
    )
    floor = StdioServerParameters(command=sys.executable, args=["-c", FLOOR_SERVER])
    errlog = (work / "mcp-stderr.log").open("w")
    try:
        async with (
            stdio_client(gbr_mcp, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=60) as session,
            stdio_client(floor, errlog=errlog) as (floor_read, floor_write),
            ClientSession(floor_read, floor_write, read_timeout_seconds=60) as floor_session,
            open_host(alice, [], is_trusted=lambda _: False) as host,
        ):
            await session.discover()
            await floor_session.discover()
            host.add_addrs(bob_id, (bob_tcp,))
            limits = Limits(call_timeout_s=30)
            with trio.fail_after(60):
                while "bob__read_file" not in {t.name for t in (await session.list_tools()).tools}:
                    await trio.sleep(0.2)

            async def mcp_local() -> None:
                result = await session.call_tool("read_file", {"path": "kib.txt"})
                assert not result.is_error, result

            async def bare_local() -> None:
                result = await node.tools.registry.run("read_file", {"path": "kib.txt"})
                assert not result.is_error, result

            async def mcp_peer() -> None:
                result = await session.call_tool("bob__read_file", {"path": "kib.txt"})
                assert not result.is_error, result

            async def bare_rpc() -> None:
                result = await call_tool(
                    host, bob_id, "read_file", {"path": "kib.txt"}, limits=limits
                )
                assert not result["isError"], result

            async def sdk_floor() -> None:
                await floor_session.call_tool("echo", {})

            ops = {"mcp": mcp_local, "local": bare_local, "peer": mcp_peer, "rpc": bare_rpc}
            ops["floor"] = sdk_floor
            for op in ops.values():  # warm-up
                await _timed(ROUND, op)
            pids = {"mcp": _child_pid("gbr_node", "mcp"), "floor": _child_pid("-c", FLOOR_SERVER)}
            pids["serve"] = bob_proc.pid

            def cpu_now() -> dict[str, float]:
                return {"client": time.process_time()} | {k: _cpu_s(p) for k, p in pids.items()}

            for _ in range(max(args.runs // ROUND, 1)):
                for key, op in ops.items():
                    before = cpu_now()
                    ms[key] += await _timed(ROUND, op)
                    spent = cpu.setdefault(key, dict.fromkeys(before, 0.0))
                    for where, seconds in cpu_now().items():
                        spent[where] += seconds - before[where]
        ms["cli"] = []
        for _ in range(args.cli_runs):
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "gbr_node", "--identity", str(alice_key), "call", "bob"]
                + ["read_file", '{"path": "kib.txt"}'],
                cwd=project,
                env=_env(work),
                capture_output=True,
                timeout=60,
            )
            ms["cli"].append((time.perf_counter() - start) * 1000)
            assert done.returncode == 0, done.stderr
    finally:
        errlog.close()
        bob_proc.terminate()
        bob_proc.wait(timeout=10)
        node.approvals.close()
    calls = max(args.runs // ROUND, 1) * ROUND
    ms["cpu"] = {k: {w: v * 1000 / calls for w, v in d.items()} for k, d in cpu.items()}
    return ms


def _p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="round trips per measure")
    parser.add_argument("--cli-runs", type=int, default=10, help="`gbr-node call` processes")
    parser.add_argument("--quick", action="store_true", help="smoke run: one round, 2 processes")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.cli_runs = ROUND, 2
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="gbr-bench-mcp-") as tmp:
        ms = trio.run(_measure, args, Path(tmp))
    load_after = os.getloadavg()
    cpu = ms.pop("cpu")
    median = {key: statistics.median(samples) for key, samples in ms.items()}
    print(
        f"loopback, 1 KiB read_file, {os.cpu_count()} CPUs; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after; times in ms"
    )
    print(f"{'measure':<52}{'median':>9}{'p95':>9}{'min':>9}")
    rows = [
        ("mcp local: SDK client -> gbr-node mcp, read_file", "mcp"),
        ("bare local: read_file in process (NodeTools.run)", "local"),
        ("mcp peer: SDK client -> gbr-node mcp -> serve", "peer"),
        ("bare RPC: /gbr/mcp/1.0.0 call to serve, warm", "rpc"),
        ("gbr-node call: one process per call", "cli"),
        ("SDK floor: SDK client -> trivial SDK stdio server", "floor"),
    ]
    for label, key in rows:
        samples = ms[key]
        print(f"{label:<52}{median[key]:>9.2f}{_p95(samples):>9.2f}{min(samples):>9.2f}")
    local_hop, peer_hop = median["mcp"] - median["local"], median["peer"] - median["rpc"]
    print(f"MCP hop, local read_file: {local_hop:.2f} ms (target <= 1 ms)")
    print(
        f"MCP hop, peer's read_file: {peer_hop:.2f} ms (target <= 1 ms); mcp peer / bare RPC "
        f"{median['peer'] / median['rpc']:.2f}x; gbr-node call / mcp peer "
        f"{median['cli'] / median['peer']:.0f}x"
    )
    print(
        f"SDK floor (its default, thread-backed stdio server): {median['floor']:.2f} ms; "
        f"local hop minus floor: {local_hop - median['floor']:.2f} ms"
    )
    print("CPU per call (ms; far less sensitive than wall time to the machine's load):")
    print(f"  {'measure':<12}{'client':>9}{'gbr-node mcp':>14}{'serve':>9}{'floor server':>14}")
    for key in ("mcp", "peer", "rpc", "floor"):
        row = cpu[key]
        print(
            f"  {key:<12}{row['client']:>9.3f}{row['mcp']:>14.3f}{row['serve']:>9.3f}"
            f"{row['floor']:>14.3f}"
        )


if __name__ == "__main__":
    main()
