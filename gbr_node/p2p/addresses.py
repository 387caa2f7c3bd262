"""Multiaddr and peer-ID checks at the p2p layer's public edge (STYLE.md: name the argument).

Listen addresses are plain TCP (`/ip4/A/tcp/P`, `/ip6/A/tcp/P`; DESIGN.md wire
contracts); dial targets end in `/p2p/<peer ID>` (libp2p addressing spec).
"""

from __future__ import annotations

import socket

import multiaddr
import multihash
from libp2p.peer.id import ID
from libp2p.utils.address_validation import expand_wildcard_address

from gbr_node.errors import GbrError

_UNSPECIFIED = ("0.0.0.0", "::")


def dialable(bound: multiaddr.Multiaddr) -> list[multiaddr.Multiaddr]:
    """Concrete addresses for a bound listen address: a wildcard host (0.0.0.0, ::)
    becomes one address per network interface, others are returned as they are."""
    host = bound.value_for_protocol(bound.protocols()[0].name)
    return expand_wildcard_address(bound) if host in _UNSPECIFIED else [bound]


def listen_multiaddr(text: str) -> multiaddr.Multiaddr:
    """Parse a listen address; raise GbrError naming `listen` unless it is `/ip4|ip6/A/tcp/P`."""
    addr = parse_multiaddr(text, "listen")
    names = [p.name for p in addr.protocols()]
    if len(names) != 2 or names[0] not in ("ip4", "ip6") or names[1] != "tcp":
        raise GbrError(f"listen: {text!r} is not a TCP multiaddr like /ip4/127.0.0.1/tcp/4001")
    return addr


def check_port_free(addr: multiaddr.Multiaddr) -> None:
    """Raise GbrError if another socket listens on `addr` (py-libp2p binds with
    SO_REUSEPORT, so without this check two nodes would silently share a port)."""
    port = int(addr.value_for_protocol("tcp"))
    if port == 0:
        return
    is_ip6 = addr.protocols()[0].name == "ip6"
    ip = addr.value_for_protocol("ip6" if is_ip6 else "ip4")
    with socket.socket(socket.AF_INET6 if is_ip6 else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((ip, port))
        except OSError as exc:
            raise GbrError(f"cannot listen on {addr}: {exc.strerror}") from exc


def parse_multiaddr(text: str, argument: str) -> multiaddr.Multiaddr:
    """Parse `text`; raise GbrError naming `argument` if it is not a multiaddr."""
    try:
        return multiaddr.Multiaddr(text)
    except Exception as exc:
        raise GbrError(f"{argument}: {text!r} is not a valid multiaddr ({exc})") from exc


def without_p2p(addr: multiaddr.Multiaddr) -> multiaddr.Multiaddr:
    """`addr` without its trailing `/p2p/<peer ID>`, if any."""
    named = addr.get_peer_id()
    return addr if named is None else addr.decapsulate(multiaddr.Multiaddr(f"/p2p/{named}"))


def parse_peer_id(text: str, argument: str) -> ID:
    """Parse a base58 peer ID (a multihash, per the libp2p peer-ID spec); raise
    GbrError naming `argument` if `text` is not one."""
    try:
        peer_id = ID.from_base58(text)
        multihash.decode(peer_id.to_bytes())
        return peer_id
    except Exception as exc:
        raise GbrError(f"{argument}: {text!r} is not a base58 peer ID ({exc})") from exc
