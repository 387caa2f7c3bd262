"""Hole punching: DCUtR upgrades a relayed connection to a direct one (issue 23).

Spec: https://github.com/libp2p/specs/blob/master/relay/DCUtR.md. py-libp2p's
`DCUtRProtocol` does the exchange (CONNECT with each side's addresses, SYNC,
then both sides dial at once from their listen port, TCP simultaneous open);
`HolePunch` changes three things about how it is driven:

- it is started by this node only, right after a dial that had to go through a
  relay (`P2PHost.connect`), in the background and within `UPGRADE_TIMEOUT_S`:
  a call never waits for it; the library's own loop, which tries every
  relayed connection every 2 s, strangers' included, is not run;
- DCUtR streams are served for trusted peers only (the profile's trust, asked
  per stream); a stranger's is reset;
- the addresses it tells the other side are `[node] announce` when set (what
  this node knows others can dial), else its bound listen addresses, never a
  wildcard such as 0.0.0.0 (the library would send what it is bound to).

Once a direct connection is up, new streams use it (py-libp2p picks direct over
relayed connections) and the relayed one is closed after the library's grace.
Where the NATs allow no direct path the attempt fails quietly and calls keep
going through the relay.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import multiaddr
import trio
from libp2p.abc import INetStream
from libp2p.host.basic_host import BasicHost
from libp2p.peer.id import ID

from gbr_node import lean

lean.allow("libp2p.relay")
from libp2p.relay.circuit_v2.dcutr import PROTOCOL_ID, DCUtRProtocol  # noqa: E402

__all__ = ["UPGRADE_TIMEOUT_S", "HolePunch"]

log = logging.getLogger(__name__)

UPGRADE_TIMEOUT_S = 30.0
"""The longest a hole-punching attempt may run in the background, seconds."""


class HolePunch(DCUtRProtocol):
    """DCUtR for this node (see the module docstring).

    `is_trusted(peer_id)` (base58) is the profile's trust; `announce()` the
    multiaddrs (without `/p2p/`) to tell the other side; `nursery` owns the
    attempts and the closing of relayed connections once upgraded.
    """

    def __init__(
        self,
        host: BasicHost,
        is_trusted: Callable[[str], bool],
        announce: Callable[[], Sequence[str]],
        nursery: trio.Nursery,
    ) -> None:
        super().__init__(host)
        self._is_trusted = is_trusted
        self._announce = announce
        self._nursery = self._attempts = nursery
        host.set_stream_handler(PROTOCOL_ID, self._serve)

    def upgrade_soon(self, peer_id: ID) -> None:
        """Try to upgrade the relayed connection to `peer_id`, in the background."""
        self._attempts.start_soon(self._upgrade, peer_id)

    async def _upgrade(self, peer_id: ID) -> None:
        with trio.move_on_after(UPGRADE_TIMEOUT_S):
            upgraded = await self.initiate_hole_punch(peer_id)
            log.info("hole punching to %s: %s", peer_id, "direct" if upgraded else "relayed")

    async def _serve(self, stream: INetStream) -> None:
        remote = stream.muxed_conn.peer_id
        if not self._is_trusted(remote.to_base58()):
            log.info("refused DCUtR from untrusted peer %s", remote)
            await stream.reset()
            return
        with trio.move_on_after(UPGRADE_TIMEOUT_S):
            await self._handle_dcutr_stream(stream)

    async def _get_observed_addrs(self) -> list[bytes]:
        return [multiaddr.Multiaddr(addr).to_bytes() for addr in self._announce()]

    async def _auto_drive_loop(self) -> None:
        return None

    def _schedule_relay_close(self, peer_id: ID) -> None:
        self._attempts.start_soon(self._close_relayed_conns_after_grace, peer_id)
