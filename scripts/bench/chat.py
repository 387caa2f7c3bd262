"""Benchmark: `/gbr/chat/1.0.0` messages to a real `gbr-node serve` process (issue 19).

Usage: python scripts/bench/chat.py [--runs N] [--dials N] [--messages N] [--concurrency N]
       [--quick]

The receiver is a `gbr-node serve` process on 127.0.0.1 whose profile trusts this
process with `chat = "show"`; the sender is `gbr_node.p2p.chat.send_chat` here. The
receiver commits each message to its SQLite inbox and prints it (what its person sees)
before it writes the acknowledgement, so the time from `send` to the ack is the time
until the message is shown there, plus the ack's way back.

  open         send -> ack on a warm connection, on the stream kept open for the peer
               (`ChatStreams`, /gbr/chat/stream/1.0.0: what the node's outbox does)
  new stream   the same with a new stream + multistream-select per message (what a
               /gbr/chat/1.0.0-only peer gets; the way every message went before)
  dial         the same after `disconnect`: dial + TCP + Noise + Yamux + send -> ack
  baseline     `tools/list` -> response on the same warm connection (the RPC plane's
               cheapest round trip, a new stream per call, measured in the same run)
  msgs/s       MESSAGES messages one way, CONCURRENCY in flight, one connection

The three warm measures are interleaved, so load hits them alike. Target: open median
< 5 ms. Prints the load average with the table (a shared machine): compare the ratios
and medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).parent))
from _table import print_timings  # type: ignore[import-not-found]  # the bench folder's own module
from rpc import (  # type: ignore[import-not-found]  # the bench folder's own module, on sys.path at run time
    LOOPBACK,
    Server,
)


def _start_serve(work: Path, sender_peer_id: str, concurrency: int) -> Server:
    from gbr_node.p2p.identity import load_or_create_identity

    root = work / "served"
    (root / ".gbr_envs").mkdir(parents=True)
    (root / ".gbr_envs" / "default.toml").write_text(
        "[node]\n"
        f'listen = ["{LOOPBACK}"]\n'
        f"max_concurrent_calls_per_peer = {concurrency}\n"
        "[chat]\n"
        "messages_per_minute = 100000\n"
        "inbox_max_per_peer = 10000000\n"
        "[peers.bench]\n"
        f'peer_id = "{sender_peer_id}"\n'
        'tools = ["read_file"]\n'
        'chat = "show"\n'
    )
    key = work / "server.key"
    load_or_create_identity(key)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(HOME=str(work), XDG_CONFIG_HOME=str(work / ".config"), NO_COLOR="1")
    return Server(
        [sys.executable, "-m", "gbr_node", "--identity", str(key), "serve", "--listen", LOOPBACK],
        lambda text: text.strip().startswith("/ip4/127.0.0.1/tcp/"),
        work / "serve.log",
        cwd=root,
        env=env,
    )


async def _measure(args: argparse.Namespace, work: Path) -> tuple[dict[str, list[float]], float]:
    from libp2p.crypto.ed25519 import create_new_key_pair

    from gbr_node.chat.messages import new_message
    from gbr_node.p2p.chat import ChatStreams, send_chat
    from gbr_node.p2p.host import open_host
    from gbr_node.p2p.identity import peer_id_of
    from gbr_node.p2p.service import list_tools
    from gbr_node.rpc.limits import Limits

    keypair = create_new_key_pair()
    server = _start_serve(work, peer_id_of(keypair), args.concurrency)
    target = server.addr
    peer_id = target.rsplit("/p2p/", 1)[1]
    limits = Limits()
    ms: dict[str, list[float]] = {"open": [], "new": [], "dial": [], "baseline": []}
    streams = ChatStreams()
    try:
        async with open_host(keypair, [], is_trusted=lambda _: True) as host:

            async def send(kept: ChatStreams | None = streams) -> None:
                message = new_message("benchmark message, about sixty bytes of text", role="agent")
                ack = await send_chat(
                    host, target, message, max_message_bytes=65536, timeout_s=30, streams=kept
                )
                assert ack.status == "accepted", ack

            async def new_stream() -> None:
                await send(None)

            async def baseline() -> None:
                await list_tools(host, target, limits=limits)

            warm = (("open", send), ("new", new_stream), ("baseline", baseline))
            for _ in range(20):  # warm up: connection, imports, the receiver's caches
                for _key, op in warm:
                    await op()
            for _ in range(args.runs):
                for key, op in warm:
                    start = time.perf_counter()
                    await op()
                    ms[key].append((time.perf_counter() - start) * 1000)
            for _ in range(args.dials):
                await host.disconnect(peer_id)
                await trio.sleep(0.3)  # the receiver lets the old connection go
                start = time.perf_counter()
                await send()
                ms["dial"].append((time.perf_counter() - start) * 1000)
            sent = 0
            start = time.perf_counter()

            async def worker() -> None:
                nonlocal sent
                while sent < args.messages:
                    sent += 1
                    await send()

            async with trio.open_nursery() as nursery:
                for _ in range(args.concurrency):
                    nursery.start_soon(worker)
            rate = args.messages / (time.perf_counter() - start)
    finally:
        server.stop()
    return ms, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=500, help="messages timed on an open connection"
    )
    parser.add_argument("--dials", type=int, default=30, help="messages timed with a fresh dial")
    parser.add_argument("--messages", type=int, default=2000, help="messages for msgs/s")
    parser.add_argument("--concurrency", type=int, default=16, help="messages in flight at once")
    parser.add_argument("--quick", action="store_true", help="smoke run: a few messages each")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.dials, args.messages = 20, 3, 50
    with tempfile.TemporaryDirectory(prefix="gbr-bench-chat-") as tmp:
        ms, rate = trio.run(_measure, args, Path(tmp))
    rows = [
        ("message/send -> ack (shown there), open connection", "open", "median < 5 ms"),
        ("  the same, a new stream + negotiation per message", "new", ""),
        ("message/send -> ack, with dial + Noise + Yamux", "dial", ""),
        ("baseline: tools/list, open connection", "baseline", ""),
    ]
    print_timings("loopback", [(label, ms[key], goal) for label, key, goal in rows])
    median = {key: statistics.median(samples) for key, samples in ms.items()}
    print(
        f"open-connection message median / new-stream message median: "
        f"{median['open'] / median['new']:.2f}x; / tools/list median: "
        f"{median['open'] / median['baseline']:.2f}x"
    )
    print(f"one way, {args.concurrency} in flight, {args.messages} messages: {rate:.0f} msgs/s")


if __name__ == "__main__":
    main()
