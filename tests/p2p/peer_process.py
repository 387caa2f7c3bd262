"""A gbr-node p2p host in its own process, for tests that need a real separate peer.

Usage: python peer_process.py [LOG_FILE]
Prints its first dialable multiaddr on stdout, serves the tests' echo protocol
to everyone, and exits when its stdin closes. py-libp2p's log records go to
LOG_FILE (or are discarded), never to stderr.
"""

from __future__ import annotations

import logging
import sys

import trio
from libp2p.crypto.ed25519 import create_new_key_pair

from gbr_node.p2p.host import open_host

ECHO = "/gbr-test/echo/1.0.0"


async def _echo(stream, _remote):
    while data := await stream.receive_some():
        await stream.send_all(data)


async def main() -> None:
    handler = logging.FileHandler(sys.argv[1]) if len(sys.argv) > 1 else None
    async with open_host(
        create_new_key_pair(),
        ["/ip4/127.0.0.1/tcp/0"],
        is_trusted=lambda _peer_id: True,
        log_handler=handler,
    ) as host:
        host.set_stream_handler(ECHO, _echo)
        print(host.addrs[0], flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)


if __name__ == "__main__":
    trio.run(main)
