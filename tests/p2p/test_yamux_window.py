"""Yamux window updates once per half window read (gbr_node/p2p/yamux_window.py).

Frames are observed where the library writes them (`Yamux._write_frame`), on
real hosts over loopback.
"""

from __future__ import annotations

import os
import struct

import pytest
import trio
from libp2p.stream_muxer.yamux import yamux

from .helpers import echo_round_trip, running_host

WINDOW = yamux.DEFAULT_WINDOW_SIZE


@pytest.fixture
def frames(monkeypatch) -> list[tuple[int, int]]:
    """(type, flags) of every Yamux frame either host writes from now on."""
    written: list[tuple[int, int]] = []
    write = yamux.Yamux._write_frame

    async def recording(self, data: bytes) -> None:
        _, kind, flags, _, _ = struct.unpack(yamux.YAMUX_HEADER_FORMAT, data[:12])
        written.append((kind, flags))
        await write(self, data)

    monkeypatch.setattr(yamux.Yamux, "_write_frame", recording)
    return written


def plain_window_updates(frames: list[tuple[int, int]]) -> int:
    """WINDOW_UPDATE frames that only credit the peer (no SYN/ACK/FIN/RST flag)."""
    return sum(1 for kind, flags in frames if kind == yamux.TYPE_WINDOW_UPDATE and flags == 0)


async def test_small_exchanges_send_no_window_updates(frames):
    async with running_host() as server, running_host(()) as client:
        target = server.addrs[0]
        await client.connect(target)
        for _ in range(20):
            assert await echo_round_trip(client, target, b"k" * 1024) == b"k" * 1024
        await trio.sleep(0.2)

    assert sum(1 for kind, _ in frames if kind == yamux.TYPE_DATA) >= 40
    assert plain_window_updates(frames) == 0


async def test_many_windows_of_data_flow_both_ways_at_once(frames):
    payload = os.urandom(12 * WINDOW)  # 3 MiB each way: credit must come back many times
    async with running_host() as server, running_host(()) as client:
        echoed = await echo_round_trip(client, server.addrs[0], payload)

    assert echoed == payload
    # each way the window (auto-tuned: it may double) was refilled at least 3 times
    assert plain_window_updates(frames) >= 6
