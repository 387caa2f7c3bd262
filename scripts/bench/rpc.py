"""Benchmark: `/gbr/mcp/1.1.0` and `/gbr/mcp/1.0.0` calls to a real `gbr-node serve`
process, beside the bare py-libp2p echo and a js-libp2p echo (issues 3 and 35).

Usage: python scripts/bench/rpc.py [--runs N] [--connects N] [--calls N] [--concurrency N] [--quick]

In one run on loopback (127.0.0.1 only), every server in its own process, the
Python clients in this one and the js-libp2p client in its own:

  connect      dial + TCP + Noise + Yamux to the `serve` process, a fresh
               connection each run (gbr_node.p2p.host.P2PHost.connect)
  1.1.0 kept   `tools/call read_file` of a 1 KiB file on the kept 1.1.0 stream
               (gbr_node.p2p.mcp_streams.McpStreams: what the node's agent uses)
  1.1.0 new    the same on a new 1.1.0 stream per call (open, one call, close)
  1.0.0 new    the same on a new 1.0.0 stream per call (gbr_node.p2p.service.call_tool
               without streams: what `gbr-node call` and older peers use)
  py echo      bare py-libp2p (`libp2p.new_host`, Noise + Yamux, no gbr-node code on
               either side) echo of 1 KiB, on a new stream each, and on one kept stream.
               py-libp2p runs as shipped: importing gbr_node.p2p.host patches Yamux and
               multistream-select process-wide (yamux_window.py, yamux_guard.py,
               multistream_limit.py), so the library's own methods are put back for it
  js echo      js-libp2p 3.2.0 (tests/interop/js/echo.js, installed by
               .ci/install-interop) echo of 1 KiB between two node processes, on a new
               stream each and on one kept stream
  TCP echo     raw TCP echo of 1 KiB on one socket
  calls/s      CALLS calls, CONCURRENCY at a time over one connection: 1.1.0 all on the
               one kept stream; 1.0.0 and "new" echoes a new stream each; "kept" echoes
               one kept stream per worker
  memory       resident memory (VmRSS) of the `serve` process when idle after start and
               after the load, beside the js-libp2p echo host's when idle

Servers write their stdout (serve: one line per call) to files in the work
folder, as a node's log would go, not to a pipe this process must drain.

Targets: connect median <= 15 ms (issue 3); 1.1.0 kept-stream call median <= 1.0x
js-libp2p's new-stream echo between two processes; 1.1.0 calls/s >= 1.0x js-libp2p's
new-stream echo calls/s (issue 35; js with kept streams is printed beside); serve
idle RSS <= 1.0x the js-libp2p host's (issue 35). The serving profile raises
`max_concurrent_calls_per_peer` to CONCURRENCY (default 16 would answer -32005 "busy"
to the rest). `--serve-echo libp2p|tcp` is the floor servers' own entry point (used by
this script).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import multiaddr
import trio

sys.path.insert(0, str(Path(__file__).parent))
from _table import print_timings  # type: ignore[import-not-found]  # the bench folder's own module

PAYLOAD = b"x" * 1024
ECHO = "/gbr-bench/echo/1.0.0"
JS = Path(__file__).resolve().parents[2] / "tests" / "interop" / "js"
JS_SERVER_SEED, JS_CLIENT_SEED = "33" * 32, "44" * 32
LOOPBACK = "/ip4/127.0.0.1/tcp/0"


# -- floor servers (run as `rpc.py --serve-echo KIND` in their own process) ----------------


async def _serve_libp2p_echo() -> None:
    from libp2p import new_host
    from libp2p.crypto.ed25519 import create_new_key_pair
    from libp2p.crypto.x25519 import create_new_key_pair as x25519
    from libp2p.security.noise.transport import PROTOCOL_ID as NOISE
    from libp2p.security.noise.transport import Transport as NoiseTransport
    from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX
    from libp2p.stream_muxer.yamux.yamux import Yamux

    host = _bare_host(new_host, create_new_key_pair, x25519, NOISE, NoiseTransport, YAMUX, Yamux)

    async def echo(stream) -> None:
        try:
            while data := await stream.read(65536):
                await stream.write(data)
        except Exception:
            pass
        finally:
            await stream.close()

    host.set_stream_handler(ECHO, echo)
    async with host.run([multiaddr.Multiaddr(LOOPBACK)]):
        print(f"{host.get_addrs()[0]}", flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)


def _bare_host(new_host, keys, x25519, noise_id, noise_cls, yamux_id, yamux_cls):
    """py-libp2p's own `new_host()` with Noise and Yamux only (the library as shipped)."""
    keypair = keys()
    return new_host(
        key_pair=keypair,
        sec_opt={noise_id: noise_cls(keypair, noise_privkey=x25519().private_key)},
        muxer_opt={yamux_id: yamux_cls},
    )


async def _serve_tcp_echo() -> None:
    async def echo(stream: trio.SocketStream) -> None:
        try:
            while data := await stream.receive_some(65536):
                await stream.send_all(data)
        except trio.BrokenResourceError:
            pass

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, echo, listeners)
        print(f"127.0.0.1 {port}", flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)
        nursery.cancel_scope.cancel()


# -- processes --------------------------------------------------------------------------


class Server:
    """A child process whose first stdout line matching `ready` is its address.

    Its stdout goes to a file, as a served node's log would: a pipe drained by
    a thread here would put that thread's work into the client's CPU figures.
    """

    def __init__(self, argv: list[str], ready: Callable[[str], bool], log: Path, **kwargs) -> None:
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.DEVNULL,
                text=True,
                **kwargs,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            found = [line for line in log.read_text().splitlines() if ready(line)]
            if found:
                self.addr = found[0].strip()
                return
            time.sleep(0.05)
        raise RuntimeError(f"{argv[:4]} did not start: {log.read_text()[-2000:]}")

    def rss_bytes(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def cpu_s(self) -> float:
        """User + system CPU seconds used so far (/proc/PID/stat)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def _start_serve(work: Path, client_peer_id: str, concurrency: int) -> Server:
    from gbr_node.p2p.identity import load_or_create_identity

    root = work / "served"
    (root / ".gbr_envs").mkdir(parents=True)
    line = "y" * 63 + "\n"
    (root / "kib.txt").write_text(line * 16)  # 1,024 bytes
    (root / ".gbr_envs" / "default.toml").write_text(
        "[node]\n"
        f'listen = ["{LOOPBACK}"]\n'
        f"max_concurrent_calls_per_peer = {concurrency}\n"
        "[peers.bench]\n"
        f'peer_id = "{client_peer_id}"\n'
        'tools = ["read_file"]\n'
    )
    key = work / "server.key"
    load_or_create_identity(key)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(HOME=str(work), XDG_CONFIG_HOME=str(work / ".config"))
    return Server(
        [sys.executable, "-m", "gbr_node", "--identity", str(key), "serve", "--listen", LOOPBACK],
        lambda text: text.strip().startswith("/ip4/127.0.0.1/tcp/"),
        work / "serve.log",
        cwd=root,
        env=env,
    )


# -- measurements -----------------------------------------------------------------------


async def _timed(runs: int, op: Callable[[], Awaitable[object]]) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await op()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def _rate(
    calls: int, concurrency: int, op: Callable[[], Awaitable[object]], server: Server
) -> tuple[float, float, float]:
    """(calls per second, client CPU ms per call, server CPU ms per call) for `calls`
    calls of `op`, `concurrency` in flight at a time. CPU time per call depends far
    less than wall time on other load of the machine."""
    return await _rate_of(calls, concurrency, lambda: _ready(op), server)


async def _ready(op: Callable[[], Awaitable[object]]) -> Callable[[], Awaitable[object]]:
    return op


async def _rate_of(
    calls: int,
    concurrency: int,
    worker_op: Callable[[], Awaitable[Callable[[], Awaitable[object]]]],
    server: Server,
) -> tuple[float, float, float]:
    """As `_rate`, each worker making its own `op` first (say, opening a kept stream)."""
    left = calls
    client_cpu, server_cpu = time.process_time(), server.cpu_s()

    async def worker() -> None:
        nonlocal left
        op = await worker_op()
        while left > 0:
            left -= 1
            await op()

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    elapsed = time.perf_counter() - start
    client_ms = (time.process_time() - client_cpu) * 1000 / calls
    return calls / elapsed, client_ms, (server.cpu_s() - server_cpu) * 1000 / calls


def _js_ready() -> bool:
    """True when node, npm and the pinned js-libp2p (.ci/install-interop) are here."""
    return bool(shutil.which("node")) and (JS / "node_modules" / "libp2p").is_dir()


def _start_js_echo(work: Path) -> Server:
    server = Server(
        ["node", "echo.js", "serve", JS_SERVER_SEED],
        lambda text: text.startswith("{"),
        work / "js-echo.log",
        cwd=JS,
    )
    addrs = json.loads(server.addr)["addrs"]
    server.addr = next(a for a in addrs if a.startswith("/ip4/127.0.0.1/tcp/"))
    return server


def _js_bench(js: Server, args: argparse.Namespace) -> dict:
    """Run the js-libp2p echo client (its own process) against `js`; its figures."""
    argv = ["node", "echo.js", "bench", JS_CLIENT_SEED, js.addr]
    argv += [str(args.runs), str(args.calls), str(args.concurrency)]
    done = subprocess.run(argv, cwd=JS, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"js echo bench failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _as_shipped_context():
    """A context manager putting py-libp2p's own Yamux and multistream-select methods back
    for its duration (the floor's client side runs py-libp2p as shipped)."""
    from libp2p.protocol_muxer import multiselect_communicator
    from libp2p.stream_muxer.yamux.yamux import Yamux, YamuxStream

    patched = [
        (YamuxStream, "_auto_tune_and_send_window_update"),
        (YamuxStream, "reset"),
        (Yamux, "_write_frame"),
        (Yamux, "_read_data_body"),
        (multiselect_communicator, "read_delim"),
    ]
    shipped = [getattr(owner, name) for owner, name in patched]
    import gbr_node.p2p.host  # noqa: F401  # patches them

    ours = [getattr(owner, name) for owner, name in patched]

    @contextlib.contextmanager
    def as_shipped():
        for (owner, name), value in zip(patched, shipped, strict=True):
            setattr(owner, name, value)
        try:
            yield
        finally:
            for (owner, name), value in zip(patched, ours, strict=True):
                setattr(owner, name, value)

    return as_shipped


async def _measure(args: argparse.Namespace, work: Path) -> tuple[dict, dict, dict]:
    from libp2p import new_host
    from libp2p.crypto.ed25519 import create_new_key_pair
    from libp2p.crypto.x25519 import create_new_key_pair as x25519
    from libp2p.custom_types import TProtocol
    from libp2p.peer.peerinfo import info_from_p2p_addr
    from libp2p.security.noise.transport import PROTOCOL_ID as NOISE
    from libp2p.security.noise.transport import Transport as NoiseTransport
    from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX
    from libp2p.stream_muxer.yamux.yamux import Yamux

    as_shipped = _as_shipped_context()
    from gbr_node.p2p.host import open_host
    from gbr_node.p2p.identity import load_or_create_identity, peer_id_of
    from gbr_node.p2p.mcp_streams import MCP_PIPELINED, McpStreams
    from gbr_node.p2p.service import call_tool
    from gbr_node.rpc.limits import Limits
    from gbr_node.rpc.session import CallSession

    me = load_or_create_identity(work / "client.key")
    here = Path(__file__).resolve()
    serve = _start_serve(work, peer_id_of(me), args.concurrency)
    echo = [sys.executable, str(here), "--serve-echo"]
    bare = Server([*echo, "libp2p"], lambda t: "/p2p/" in t, work / "bare.log")
    tcp = Server([*echo, "tcp"], lambda t: "127.0.0.1" in t, work / "tcp.log")
    js = _start_js_echo(work) if _js_ready() else None
    ms: dict[str, list[float]] = {}
    rates: dict[str, tuple[float, float, float]] = {}
    memory: dict[str, int] = {}
    try:
        await trio.sleep(1.0)
        memory["idle"] = serve.rss_bytes()
        if js is not None:
            memory["js"] = js.rss_bytes()
        limits = Limits(call_timeout_s=30)
        client_host = _bare_host(
            new_host, create_new_key_pair, x25519, NOISE, NoiseTransport, YAMUX, Yamux
        )
        read_kib = ("read_file", {"path": "kib.txt"})
        async with (
            open_host(me, [], is_trusted=lambda _: False) as ours,
            client_host.run([]),
        ):
            streams = McpStreams(ours)

            async def call_kept() -> None:
                result = await call_tool(
                    ours, serve.addr, *read_kib, limits=limits, streams=streams
                )
                assert not result["isError"], result

            async def call_new_1_1() -> None:
                stream = await ours.new_stream(serve.addr, MCP_PIPELINED)
                session = CallSession(stream, max_message_bytes=limits.max_message_bytes)
                params = {"name": read_kib[0], "arguments": read_kib[1]}
                result = await session.call("tools/call", params, timeout_s=30)
                await session.aclose()
                assert not result["isError"], result

            async def call_new_1_0() -> None:
                result = await call_tool(ours, serve.addr, *read_kib, limits=limits)
                assert not result["isError"], result

            async def connect() -> None:
                await ours.connect(serve.addr)

            info = info_from_p2p_addr(multiaddr.Multiaddr(bare.addr))
            await client_host.connect(info)

            async def bare_stream():
                stream = await client_host.new_stream(info.peer_id, [TProtocol(ECHO)])

                async def round_trip() -> None:
                    await stream.write(PAYLOAD)
                    got = 0
                    while got < len(PAYLOAD):
                        got += len(await stream.read(len(PAYLOAD) - got))

                return stream, round_trip

            async def bare_new() -> None:
                stream, round_trip = await bare_stream()
                await round_trip()
                await stream.close()

            async def bare_kept_op():
                return (await bare_stream())[1]

            ip, port = tcp.addr.split()
            sock = await trio.open_tcp_stream(ip, int(port))

            async def tcp_echo() -> None:
                await sock.send_all(PAYLOAD)
                got = 0
                while got < len(PAYLOAD):
                    got += len(await sock.receive_some(len(PAYLOAD) - got))

            with trio.fail_after(900):
                connects = []
                for _ in range(args.connects):
                    await ours.disconnect(_pid(serve))
                    connects += await _timed(1, connect)
                ms["connect"] = connects
                with as_shipped():
                    bare_kept = await bare_kept_op()
                ops = {
                    "kept": (call_kept, False),
                    "new 1.1": (call_new_1_1, False),
                    "new 1.0": (call_new_1_0, False),
                    "bare new": (bare_new, True),
                    "bare kept": (bare_kept, True),
                    "tcp": (tcp_echo, False),
                }
                for op, shipped in ops.values():  # warm-up
                    with as_shipped() if shipped else contextlib.nullcontext():
                        for _ in range(50):
                            await op()
                # interleaved, 50 of each in turn, so load hits them alike
                for key in ops:
                    ms[key] = []
                for _ in range(max(args.runs // 50, 1)):
                    for key, (op, shipped) in ops.items():
                        with as_shipped() if shipped else contextlib.nullcontext():
                            ms[key] += await _timed(50, op)
                rates["kept"] = await _rate(args.calls, args.concurrency, call_kept, serve)
                rates["new 1.0"] = await _rate(args.calls, args.concurrency, call_new_1_0, serve)
                with as_shipped():
                    rates["bare new"] = await _rate(args.calls, args.concurrency, bare_new, bare)
                    rates["bare kept"] = await _rate_of(
                        args.calls, args.concurrency, bare_kept_op, bare
                    )
            await streams.aclose()
            await sock.aclose()
        await trio.sleep(1.0)
        memory["after"] = serve.rss_bytes()
        if js is not None:
            found = _js_bench(js, args)
            ms["js new"], ms["js kept"] = found["new_ms"], found["kept_ms"]
            rates["js new"] = (found["new_rate"], float("nan"), float("nan"))
            rates["js kept"] = (found["kept_rate"], float("nan"), float("nan"))
    finally:
        for server in (serve, bare, tcp, js):
            if server is not None:
                server.stop()
    return ms, rates, memory


def _pid(server: Server) -> str:
    return server.addr.rsplit("/p2p/", 1)[1]


TIMINGS = [
    ("connect (dial+Noise+Yamux) to serve", "connect", "median <= 15 ms"),
    ("1.1.0 tools/call read_file 1 KiB, kept stream", "kept", "<= 1.0x js new stream"),
    ("1.1.0 tools/call read_file 1 KiB, new stream", "new 1.1", ""),
    ("1.0.0 tools/call read_file 1 KiB, new stream", "new 1.0", ""),
    ("py-libp2p echo 1 KiB, new stream", "bare new", ""),
    ("py-libp2p echo 1 KiB, kept stream", "bare kept", ""),
    ("js-libp2p echo 1 KiB, new stream", "js new", ""),
    ("js-libp2p echo 1 KiB, kept stream", "js kept", ""),
    ("raw TCP echo 1 KiB", "tcp", ""),
]
RATES = [
    ("1.1.0 tools/call, one kept stream", "kept"),
    ("1.0.0 tools/call, new streams", "new 1.0"),
    ("py-libp2p echo, new streams", "bare new"),
    ("py-libp2p echo, kept streams", "bare kept"),
    ("js-libp2p echo, new streams", "js new"),
    ("js-libp2p echo, kept streams", "js kept"),
]


def _report(args: argparse.Namespace, ms: dict, rates: dict, memory: dict) -> None:
    rows = [(label, ms[key], goal) for label, key, goal in TIMINGS if key in ms]
    print_timings("loopback, 1 KiB payloads", rows)
    if "js new" not in ms:
        print("js-libp2p rows left out: run .ci/install-interop (needs node and npm)")
    median = {key: statistics.median(samples) for key, samples in ms.items()}
    print("ratios of medians:")
    pairs = [
        ("1.1.0 kept / js-libp2p new-stream echo", "kept", "js new", "target <= 1.0x"),
        ("1.1.0 kept / js-libp2p kept-stream echo", "kept", "js kept", ""),
        ("1.1.0 kept / py-libp2p kept-stream echo", "kept", "bare kept", ""),
        ("1.1.0 kept / 1.0.0 new stream", "kept", "new 1.0", ""),
        ("1.0.0 new stream / py-libp2p new-stream echo", "new 1.0", "bare new", "issue 3: <= 1.5x"),
    ]
    for label, ours, theirs, target in pairs:
        if ours in median and theirs in median:
            ratio = median[ours] / median[theirs]
            print(f"  {label:<46}{ratio:>6.2f}x  {target}".rstrip())
    print(f"calls/s, {args.concurrency} concurrent over one connection, {args.calls} calls:")
    for label, key in RATES:
        if key not in rates:
            continue
        rate, client_ms, server_ms = rates[key]
        cpu = (
            ""
            if client_ms != client_ms
            # NaN: measured in another process
            else (f"; CPU per call: client {client_ms:.2f} ms, server {server_ms:.2f} ms")
        )
        print(f"  {label:<36}{rate:>8.0f} calls/s{cpu}")
    for theirs, target in (("js new", "target >= 1.0x"), ("js kept", "")):
        if theirs in rates:
            ratio = rates["kept"][0] / rates[theirs][0]
            name = RATES[[key for _, key in RATES].index(theirs)][0]
            print(f"  1.1.0 calls/s / {name}: {ratio:.2f}x  {target}".rstrip())
    idle, after = memory["idle"], memory["after"]
    print(
        f"serve process RSS: idle {idle / 1e6:.1f} MB = {idle / 2**20:.1f} MiB "
        f"(issue 3: < 100 MB), after the load {after / 1e6:.1f} MB = {after / 2**20:.1f} MiB"
    )
    if "js" in memory:
        js = memory["js"]
        print(
            f"js-libp2p echo host RSS, idle: {js / 1e6:.1f} MB; serve idle / js host: "
            f"{idle / js:.2f}x (target <= 1.0x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="round trips per measure")
    parser.add_argument("--connects", type=int, default=50, help="fresh connections to time")
    parser.add_argument("--calls", type=int, default=3000, help="calls for the calls/s measure")
    parser.add_argument("--concurrency", type=int, default=100, help="calls in flight at once")
    parser.add_argument("--serve-echo", choices=["libp2p", "tcp"], help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="smoke run: a few of each")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.connects, args.calls, args.concurrency = 50, 3, 40, 10
    if args.serve_echo:
        trio.run(_serve_libp2p_echo if args.serve_echo == "libp2p" else _serve_tcp_echo)
        return
    with tempfile.TemporaryDirectory(prefix="gbr-bench-rpc-") as tmp:
        ms, rates, memory = trio.run(_measure, args, Path(tmp))
    _report(args, ms, rates, memory)


if __name__ == "__main__":
    main()
