"""Peers on the same LAN, found by mDNS (issue 23, `[node] mdns = true`).

py-libp2p's `MDNSDiscovery` (zeroconf; spec:
https://github.com/libp2p/specs/blob/master/discovery/mdns.md) announces this
node's addresses and browses for others. What it finds is written into
`LanPeers`, never into the swarm's peerstore, and bounded: at most
`MAX_PEERS` peers (the least recently seen forgotten first) with at most
`MAX_ADDRS` plain TCP addresses each; anything else a LAN host announces is
dropped. Zeroconf calls in from its own thread, hence the lock.

Discovery never grants trust: a peer found here is only listed (`/peers`),
and dialed when the profile trusts its peer ID and names no address for it.
Whoever announces a peer ID at an address cannot be that peer unless the Noise
handshake proves it, and an untrusted peer is refused as any stranger is.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import multiaddr
import trio
from libp2p.peer.id import ID

from gbr_node import lean

lean.allow("libp2p.discovery.mdns")
from libp2p.discovery.mdns.mdns import MDNSDiscovery  # noqa: E402

__all__ = ["MAX_ADDRS", "MAX_PEERS", "LanPeers"]

log = logging.getLogger(__name__)

MAX_PEERS = 256
MAX_ADDRS = 8
STALE_S = 240
"""A peer not announced again within this many seconds is forgotten (twice the TTL)."""
STALE_CHECK_S = 60


class LanPeers:
    """The peers mDNS found on the LAN: `found()` maps peer ID (base58) to addresses.

    `start(peer_id, addrs)` announces this node (`addrs`: full multiaddrs ending
    in `/p2p/<peer ID>`; none: it only browses) and starts browsing; `stop()`
    withdraws it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._discovery: MDNSDiscovery | None = None

    def found(self) -> dict[str, tuple[str, ...]]:
        """A copy of the table: peer ID -> `/ip4|ip6/A/tcp/P` multiaddrs."""
        with self._lock:
            return dict(self._found)

    def addrs(self, peer_id: str) -> tuple[str, ...]:
        """Where `peer_id` was seen (empty when it was not)."""
        with self._lock:
            return self._found.get(peer_id, ())

    def start(self, peer_id: str, addrs: Sequence[str]) -> None:
        """Announce and browse (blocking for zeroconf's announcement, about a second:
        call it on a worker thread)."""
        port = int(multiaddr.Multiaddr(addrs[0]).value_for_protocol("tcp")) if addrs else 0
        book: Any = _Book(peer_id, self)  # the two parts of a swarm MDNSDiscovery uses
        self._discovery = MDNSDiscovery(book, port=port, listen_addrs=list(addrs))
        if addrs:  # a node that listens nowhere only browses
            self._discovery.broadcaster.register()  # MDNSDiscovery.start() without its task
            log.info("mDNS: announcing %s", ", ".join(addrs))

    async def forget_stale(self) -> None:
        """Forget, every `STALE_CHECK_S`, peers not heard of for `STALE_S` seconds, and
        the library's own record of announcements beyond `MAX_PEERS`; until cancelled."""
        while True:
            await trio.sleep(STALE_CHECK_S)
            if self._discovery is None:
                continue
            listener = self._discovery.listener
            listener.cleanup_stale_entries(max_age=STALE_S)
            names = listener.discovered_services
            for name in sorted(names, key=lambda n: names[n][1])[: max(len(names) - MAX_PEERS, 0)]:
                listener.remove_service(self._discovery.zeroconf, listener.service_type, name)

    def stop(self) -> None:
        """Withdraw this node's announcement and stop browsing."""
        if self._discovery is not None:
            self._discovery.stop()
            self._discovery = None

    def add(self, peer: ID, addrs: Sequence[multiaddr.Multiaddr]) -> None:
        """Record `peer` at the plain TCP ones of `addrs` (called from zeroconf's thread)."""
        kept = tuple(dict.fromkeys(str(a) for a in addrs if _plain_tcp(a)))[:MAX_ADDRS]
        if not kept:
            return
        key = peer.to_base58()
        with self._lock:
            self._found[key] = kept
            self._found.move_to_end(key)
            while len(self._found) > MAX_PEERS:
                self._found.popitem(last=False)
        log.info("mDNS: found %s at %s", key, ", ".join(kept))

    def remove(self, peer: ID) -> None:
        with self._lock:
            self._found.pop(peer.to_base58(), None)


class _Book:
    """What `MDNSDiscovery` takes for a swarm: this node's peer ID and a "peerstore"
    that is `LanPeers`."""

    def __init__(self, peer_id: str, peers: LanPeers) -> None:
        self._peer_id = ID.from_base58(peer_id)
        self.peerstore = self
        self._peers = peers

    def get_peer_id(self) -> ID:
        return self._peer_id

    def add_addrs(self, peer: ID, addrs: Sequence[multiaddr.Multiaddr], ttl: Any) -> None:
        if peer != self._peer_id:
            self._peers.add(peer, addrs)

    def clear_addrs(self, peer: ID) -> None:
        self._peers.remove(peer)


def _plain_tcp(addr: multiaddr.Multiaddr) -> bool:
    names = [p.name for p in addr.protocols()]
    return len(names) == 2 and names[0] in ("ip4", "ip6") and names[1] == "tcp"
