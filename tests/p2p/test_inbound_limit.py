"""A serving node never goes deaf: 1,000 sequential inbound connections (issue 3).

Stock py-libp2p 0.8.1 keeps one inbound-limiter slot per connection until the
swarm stops, so connection 251 is refused; gbr_node.p2p.swarm frees it on close.
"""

from __future__ import annotations

import contextlib
import sys

import pytest
import trio

from gbr_node.errors import PeerUnreachable

from .helpers import echo_round_trip, running_host

CYCLES = 1_000
WARMUP = 100
CLIENTS = 8  # closing a py-libp2p connection takes ~0.2 s: overlap the closes
MAX_GROWTH_BYTES = 10 * 1024 * 1024


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc for the server's memory")
def test_thousand_sequential_inbound_connections_all_succeed_in_bounded_memory(peer_process):
    server = peer_process()
    rss: dict[str, int] = {}

    async def cycles() -> tuple[int, str]:
        done, failure = 0, ""
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(running_host(())) for _ in range(CLIENTS)]
            free = [trio.Event() for _ in clients]
            for event in free:
                event.set()

            async def disconnect(slot: int) -> None:
                await clients[slot].disconnect(server.peer_id)
                free[slot].set()

            async with trio.open_nursery() as nursery:
                for cycle in range(CYCLES):
                    slot = cycle % CLIENTS
                    with trio.fail_after(10):
                        await free[slot].wait()
                    payload = f"cycle {cycle}".encode()
                    try:
                        echoed = await echo_round_trip(clients[slot], server.addr, payload)
                    except PeerUnreachable as exc:
                        failure = f"cycle {cycle}: {exc}"
                        break
                    assert echoed == payload
                    done += 1
                    free[slot] = trio.Event()
                    nursery.start_soon(disconnect, slot)
                    if cycle + 1 == WARMUP:
                        rss["warm"] = server.rss_bytes()
        rss["end"] = server.rss_bytes()
        return done, failure

    assert trio.run(cycles) == (CYCLES, "")
    growth = rss["end"] - rss["warm"]
    print(
        f"\nserver RSS after {WARMUP} cycles {rss['warm'] / 2**20:.1f} MiB, "
        f"after {CYCLES}: {rss['end'] / 2**20:.1f} MiB (+{growth / 2**20:.2f} MiB)"
    )
    assert growth < MAX_GROWTH_BYTES
    assert server.stop() == ""
