"""Benchmark: `/gbr/mcp/1.0.0` remote tool calls against a real `gbr-node serve` process.

Usage: python scripts/bench/rpc.py [--runs N] [--connects N] [--calls N] [--concurrency N] [--quick]

In one run on loopback (127.0.0.1 only), with every server in its own process
and the clients in this one:

  connect      dial + TCP + Noise + Yamux to the `serve` process, a fresh
               connection each run (gbr_node.p2p.host.P2PHost.connect)
  call         `tools/call read_file` of a 1 KiB file, a new stream per call on
               a warm connection (gbr_node.p2p.service.call_tool)
  calls/s      CALLS calls, CONCURRENCY at a time over one connection
  floors       bare py-libp2p (`libp2p.new_host`, Noise + Yamux, no gbr-node
               code on either side) echo of 1 KiB on a new stream, single and
               CONCURRENCY at a time; raw TCP echo of 1 KiB on one socket.
               The floor runs py-libp2p as shipped: importing gbr_node.p2p.host
               patches Yamux and multistream-select process-wide
               (yamux_window.py, yamux_guard.py, multistream_limit.py), so this
               script puts the library's own methods back for the floor's phases.
  memory       resident memory (VmRSS) of the `serve` process when idle after
               start, and after the load

Servers write their stdout (serve: one line per call) to files in the work
folder, as a node's log would go, not to a pipe this process must drain.

Targets (issue 3): connect median <= 15 ms; call median within 1.5x of the
bare py-libp2p new-stream echo; >= 500 calls/s with 100 concurrent; idle
serving node < 100 MB resident. The serving profile raises
`max_concurrent_calls_per_peer` to CONCURRENCY (default 16 would answer
-32005 "busy" to the rest). `--serve-echo libp2p|tcp` is the floor servers'
own entry point (used by this script).
"""

from __future__ import annotations

import argparse
import contextlib
import os
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
    left = calls
    client_cpu, server_cpu = time.process_time(), server.cpu_s()

    async def worker() -> None:
        nonlocal left
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


async def _measure(args: argparse.Namespace, work: Path) -> tuple[dict, dict, dict]:
    from libp2p import new_host
    from libp2p.crypto.ed25519 import create_new_key_pair
    from libp2p.crypto.x25519 import create_new_key_pair as x25519
    from libp2p.custom_types import TProtocol
    from libp2p.peer.peerinfo import info_from_p2p_addr
    from libp2p.protocol_muxer import multiselect_communicator
    from libp2p.security.noise.transport import PROTOCOL_ID as NOISE
    from libp2p.security.noise.transport import Transport as NoiseTransport
    from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX
    from libp2p.stream_muxer.yamux.yamux import Yamux, YamuxStream

    patched = [
        (YamuxStream, "_auto_tune_and_send_window_update"),
        (YamuxStream, "reset"),
        (Yamux, "_write_frame"),
        (Yamux, "_read_data_body"),
        (multiselect_communicator, "read_delim"),
    ]
    shipped = [getattr(owner, name) for owner, name in patched]
    # patches Yamux and multistream-select (yamux_window.py, yamux_guard.py, multistream_limit.py)
    from gbr_node.p2p.host import open_host

    our_patches = [getattr(owner, name) for owner, name in patched]

    @contextlib.contextmanager
    def as_shipped():
        """The floor's client side runs py-libp2p as shipped, as its server process does."""
        for (owner, name), value in zip(patched, shipped, strict=True):
            setattr(owner, name, value)
        try:
            yield
        finally:
            for (owner, name), value in zip(patched, our_patches, strict=True):
                setattr(owner, name, value)

    from gbr_node.p2p.identity import load_or_create_identity, peer_id_of
    from gbr_node.p2p.service import call_tool
    from gbr_node.rpc.server import Limits

    me = load_or_create_identity(work / "client.key")
    here = Path(__file__).resolve()
    serve = _start_serve(work, peer_id_of(me), args.concurrency)
    echo = [sys.executable, str(here), "--serve-echo"]
    bare = Server([*echo, "libp2p"], lambda t: "/p2p/" in t, work / "bare.log")
    tcp = Server([*echo, "tcp"], lambda t: "127.0.0.1" in t, work / "tcp.log")
    ms: dict[str, list[float]] = {}
    rates: dict[str, tuple[float, float, float]] = {}
    memory: dict[str, int] = {}
    try:
        await trio.sleep(1.0)
        memory["idle"] = serve.rss_bytes()
        limits = Limits(call_timeout_s=30)
        client_host = _bare_host(
            new_host, create_new_key_pair, x25519, NOISE, NoiseTransport, YAMUX, Yamux
        )
        async with (
            open_host(me, [], is_trusted=lambda _: False) as ours,
            client_host.run([]),
        ):

            async def call() -> None:
                result = await call_tool(
                    ours, serve.addr, "read_file", {"path": "kib.txt"}, limits=limits
                )
                assert not result["isError"], result

            async def connect() -> None:
                await ours.connect(serve.addr)

            info = info_from_p2p_addr(multiaddr.Multiaddr(bare.addr))
            await client_host.connect(info)

            async def bare_echo() -> None:
                stream = await client_host.new_stream(info.peer_id, [TProtocol(ECHO)])
                await stream.write(PAYLOAD)
                got = 0
                while got < len(PAYLOAD):
                    got += len(await stream.read(len(PAYLOAD) - got))
                await stream.close()

            ip, port = tcp.addr.split()
            sock = await trio.open_tcp_stream(ip, int(port))

            async def tcp_echo() -> None:
                await sock.send_all(PAYLOAD)
                got = 0
                while got < len(PAYLOAD):
                    got += len(await sock.receive_some(len(PAYLOAD) - got))

            with trio.fail_after(600):
                connects = []
                for _ in range(args.connects):
                    await ours.disconnect(_pid(serve))
                    connects += await _timed(1, connect)
                ms["connect"] = connects
                for op in (call, bare_echo, tcp_echo):  # warm-up
                    with as_shipped() if op is bare_echo else contextlib.nullcontext():
                        for _ in range(50):
                            await op()
                # interleave our call and the bare floor so load hits both alike
                ms["call"], ms["bare"], ms["tcp"] = [], [], []
                for _ in range(args.runs // 50):
                    ms["call"] += await _timed(50, call)
                    with as_shipped():
                        ms["bare"] += await _timed(50, bare_echo)
                    ms["tcp"] += await _timed(50, tcp_echo)
                rates["call"] = await _rate(args.calls, args.concurrency, call, serve)
                with as_shipped():
                    rates["bare"] = await _rate(args.calls, args.concurrency, bare_echo, bare)
            await sock.aclose()
        await trio.sleep(1.0)
        memory["after"] = serve.rss_bytes()
    finally:
        for server in (serve, bare, tcp):
            server.stop()
    return ms, rates, memory


def _pid(server: Server) -> str:
    return server.addr.rsplit("/p2p/", 1)[1]


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
        args.runs, args.connects, args.calls, args.concurrency = 100, 3, 40, 10
    if args.serve_echo:
        trio.run(_serve_libp2p_echo if args.serve_echo == "libp2p" else _serve_tcp_echo)
        return
    with tempfile.TemporaryDirectory(prefix="gbr-bench-rpc-") as tmp:
        ms, rates, memory = trio.run(_measure, args, Path(tmp))
    rows = [
        ("connect (dial+Noise+Yamux) to serve", "connect", "median <= 15 ms"),
        ("tools/call read_file 1 KiB, new stream", "call", "<= 1.5x bare echo"),
        ("floor: bare py-libp2p echo, new stream", "bare", ""),
        ("floor: raw TCP echo", "tcp", ""),
    ]
    print_timings("loopback, 1 KiB payloads", [(label, ms[key], goal) for label, key, goal in rows])
    ratio = statistics.median(ms["call"]) / statistics.median(ms["bare"])
    print(f"call median / bare echo median: {ratio:.2f}x (target <= 1.5x)")
    print(f"{args.concurrency} concurrent over one connection, {args.calls} calls:")
    for key, label in (("call", "tools/call read_file"), ("bare", "bare py-libp2p echo")):
        rate, client_ms, server_ms = rates[key]
        target = " (target >= 500)" if key == "call" else ""
        print(
            f"  {label:<22}{rate:>6.0f} calls/s{target}; CPU per call: "
            f"client {client_ms:.2f} ms, server {server_ms:.2f} ms"
        )
    idle, after = memory["idle"], memory["after"]
    print(
        f"serve process RSS: idle {idle / 1e6:.1f} MB = {idle / 2**20:.1f} MiB (target < 100 MB), "
        f"after the load {after / 1e6:.1f} MB = {after / 2**20:.1f} MiB"
    )


if __name__ == "__main__":
    main()
