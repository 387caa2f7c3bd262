"""py-libp2p 0.8.1's Swarm with three isolated fixes, each a candidate for upstream.

`GbrSwarm` subclasses `libp2p.network.swarm.Swarm` and changes only what the
notes below describe; everything else is the library's behaviour.

1. Inbound slots are released when the connection closes (upstream note).
   `Swarm._do_handle_inbound_connection` keeps every upgraded inbound
   connection's handler task parked on `self.manager.wait_finished()`, i.e.
   until the swarm stops. The task holds one token of `_inbound_limiter`
   (capacity `max_connections - min_connections`, 250 by default) and ~5 KB of
   connection objects, so a listener accepts only ~250 inbound connections in
   its whole lifetime. Measured here: with the stock swarm the 251st sequential
   connect-stream-close cycle fails; with this fix 1,000 cycles succeed. Fix:
   park on the `SwarmConn.event_closed` of the connection just registered.
   The task must still outlive the upgrade, because trio's `serve_listeners`
   closes the socket as soon as the handler returns.
   Suggested upstream change: in `_do_handle_inbound_connection`, wait on the
   registered SwarmConn's `event_closed` instead of `manager.wait_finished()`.

2. No auto-connector. The stock `AutoConnector` re-dials, every
   `auto_connect_interval` and after every disconnect, any peer with addresses
   in the peerstore until `low_watermark` connections exist, dead peers
   included. A gbr-node dials only the peers it is asked to dial or that the
   profile trusts (DESIGN.md, security model), so `_NoAutoConnector` never dials.

3. No negative dial cache. After a failed dial the stock swarm refuses to dial
   that peer again for 60 s without trying. Every dial here is an explicit
   request (a user's call, a trusted peer), so it always tries the network.
"""

from __future__ import annotations

from typing import Any

import trio
from libp2p.network.auto_connector import AutoConnector
from libp2p.network.connection.raw_connection import RawConnection
from libp2p.network.swarm import Swarm
from multiaddr import Multiaddr

__all__ = ["GbrSwarm"]


class _NoAutoConnector(AutoConnector):
    """An AutoConnector that never dials (fix 2 in the module docstring)."""

    async def run_background_task(self, nursery: trio.Nursery) -> None:
        return None

    async def maybe_connect(self) -> None:
        return None


class _NoNegativeCache:
    """Stands in for `libp2p.network.swarm._NegativePeerCache` (fix 3)."""

    def mark_failed(self, peer_id: str) -> None:
        return None

    def is_blocked(self, peer_id: str) -> bool:
        return False

    def evict(self, peer_id: str) -> None:
        return None

    def clear(self) -> None:
        return None


class GbrSwarm(Swarm):
    """`Swarm` whose inbound connections end cleanly, that never auto-dials
    and never refuses a dial from a cache of past failures.

    Takes the same arguments as `libp2p.network.swarm.Swarm`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_peer_cache = _NoNegativeCache()  # type: ignore[assignment]

    def _init_connection_management(self) -> None:
        super()._init_connection_management()
        self.auto_connector = _NoAutoConnector(swarm=self)

    def _schedule_auto_connect(self) -> None:
        return None

    async def _do_handle_inbound_connection(
        self, read_write_closer: Any, maddr: Multiaddr, failure_event: Any
    ) -> None:
        """Upgrade one inbound TCP connection; return when it closes (fix 1).

        Runs inside the stock `_handle_inbound_connection`, which holds one
        inbound-limiter token for exactly as long as this coroutine runs. Only
        the TCP path is kept: the host builds no pre-multiplexed transport (QUIC).
        """
        remote_maddr = self._build_remote_multiaddr(read_write_closer)
        if remote_maddr is not None and not await self.connection_gate.is_allowed(remote_maddr):
            await _close_quietly(read_write_closer)
            return
        raw_conn = RawConnection(read_write_closer, False)
        try:
            muxed_conn = await self.upgrade_inbound_raw_conn(raw_conn, maddr)
        except Exception:  # failed handshakes are routine; the swarm logged why
            await _close_quietly(raw_conn)
            return
        for swarm_conn in list(self.connections.get(muxed_conn.peer_id, ())):
            if swarm_conn.muxed_conn is muxed_conn:
                await swarm_conn.event_closed.wait()
                return


async def _close_quietly(closer: Any) -> None:
    try:
        await closer.close()
    except Exception:  # already broken: nothing left to release
        return
