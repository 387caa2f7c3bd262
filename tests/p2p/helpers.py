"""Helpers for the p2p tests: real hosts on 127.0.0.1, an echo protocol, a peer process."""

from __future__ import annotations

import select
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import multiaddr
import trio
from libp2p import new_host
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.crypto.x25519 import create_new_key_pair as x25519
from libp2p.peer.peerinfo import info_from_p2p_addr
from libp2p.security.insecure.transport import PLAINTEXT_PROTOCOL_ID, InsecureTransport
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.stream_muxer.mplex.mplex import MPLEX_PROTOCOL_ID, Mplex
from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX_PROTOCOL_ID
from libp2p.stream_muxer.yamux.yamux import Yamux

from gbr_node.p2p.host import P2PHost, open_host
from gbr_node.p2p.stream import Libp2pByteStream

ECHO = "/gbr-test/echo/1.0.0"
LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)
PEER_PROCESS = Path(__file__).with_name("peer_process.py")


def trust_everyone(_peer_id: str) -> bool:
    return True


async def echo_handler(stream: Libp2pByteStream, _remote: str) -> None:
    """Send back every byte received, until the caller closes its side."""
    while data := await stream.receive_some():
        await stream.send_all(data)


@asynccontextmanager
async def running_host(
    listen: tuple[str, ...] = LOOPBACK,
    *,
    is_trusted: Callable[[str], bool] = trust_everyone,
    **kwargs: Any,
) -> AsyncIterator[P2PHost]:
    """A host with a fresh identity and the echo protocol served to trusted peers."""
    async with open_host(create_new_key_pair(), listen, is_trusted=is_trusted, **kwargs) as host:
        host.set_stream_handler(ECHO, echo_handler)
        yield host


async def receive_exactly(stream: Libp2pByteStream, size: int) -> bytes:
    """Read `size` bytes, however the stream splits them; fails on early EOF."""
    chunks = bytearray()
    while len(chunks) < size:
        data = await stream.receive_some(size - len(chunks))
        assert data, f"end of stream after {len(chunks)} of {size} bytes"
        chunks += data
    return bytes(chunks)


async def echo_round_trip(host: P2PHost, target: str, payload: bytes) -> bytes:
    """Send `payload` on a new ECHO stream while reading the echo back (as with a
    socket, sending more than the Yamux windows hold before reading would stall)."""
    with trio.fail_after(10):
        stream = await host.new_stream(target, ECHO, timeout_s=5)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stream.send_all, payload)
                return await receive_exactly(stream, len(payload))
        finally:
            await stream.aclose()


class PeerProcess:
    """tests/p2p/peer_process.py running in its own Python process."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(PEER_PROCESS), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline().split() if ready else []
        if not line:
            self.proc.kill()
            raise AssertionError(f"peer process failed: {self.proc.communicate()[1]}")
        self.addr = line[0]
        self.peer_id = self.addr.rsplit("/p2p/", 1)[1]

    def rss_bytes(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def stop(self) -> str:
        """Close stdin (the process exits), return what it wrote to stderr."""
        _out, err = self.proc.communicate(input="", timeout=20)
        return err


def foreign_host(*, security: str = "noise", muxer: str = "yamux") -> Any:
    """A py-libp2p host built by `new_host()` with one chosen security and muxer
    ("default" keeps the library's full default list), to play a peer we must refuse."""
    keypair = create_new_key_pair()
    sec_opt: Any = {
        "noise": {NOISE_PROTOCOL_ID: NoiseTransport(keypair, noise_privkey=x25519().private_key)},
        "plaintext": {PLAINTEXT_PROTOCOL_ID: InsecureTransport(keypair)},
        "default": None,
    }[security]
    muxer_opt: Any = {
        "yamux": {YAMUX_PROTOCOL_ID: Yamux},
        "mplex": {MPLEX_PROTOCOL_ID: Mplex},
        "default": None,
    }[muxer]
    return new_host(key_pair=keypair, sec_opt=sec_opt, muxer_opt=muxer_opt)


def foreign_addr(host: Any) -> str:
    return str(host.get_addrs()[0])


async def foreign_dial(host: Any, target: str) -> None:
    """Have a foreign host connect to `target` (a /p2p/ multiaddr); raises on failure."""
    await host.connect(info_from_p2p_addr(multiaddr.Multiaddr(target)))
