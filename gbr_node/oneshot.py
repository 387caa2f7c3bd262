"""One-shot commands that need no running node: `gbr-node call` and `gbr-node id`.

They live apart from `node.py` (the composition root of `run`, `serve`, `mcp`
and `send`) so that a process that only dials a peer, or only prints its
peer ID, imports only what it uses: no agent, REPL, model client, tools or
chat store (issue 35; tests/test_startup.py holds the list). `NodeSettings`
(what the command line asked for) is here for the same reason: `cli.py` builds
it for every command. Only `cli.py` and `node.py` import this module.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # each command imports what it uses when it runs
    from libp2p.crypto.keys import KeyPair

    from gbr_node.config.network import TrustedPeer
    from gbr_node.errors import GbrError
    from gbr_node.p2p.host import P2PHost

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
MDNS_CALL_WAIT_S = 5.0
"""How long `gbr-node call` browses the LAN for a peer with no address, seconds."""


@dataclass(frozen=True)
class NodeSettings:
    """What the command line asked for. `listen` None means the profile's `[node] listen`."""

    project_dir: Path
    env: str
    identity: Path | None = None
    listen: tuple[str, ...] | None = None
    resume: bool = False
    base_url: str | None = None
    model: str | None = None


def load_identity(settings: NodeSettings) -> KeyPair:
    """This node's key pair (`--identity` or the default file); says so on stderr when
    it was just created, since a mistyped `--identity PATH` means another peer ID."""
    from gbr_node.p2p.identity import default_identity_path, load_or_create_identity, peer_id_of

    path = settings.identity or default_identity_path()
    existed = path.exists()
    keypair = load_or_create_identity(path)
    if not existed:
        print(f"gbr-node: new identity {path} (peer ID {peer_id_of(keypair)})", file=sys.stderr)
    return keypair


async def call_once(
    settings: NodeSettings, target: str, tool: str | None, arguments: dict[str, Any]
) -> int:
    """`gbr-node call TARGET TOOL ARGS` (or `--list` when `tool` is None); prints the result.

    `target` is a `/p2p/` multiaddr, a peer ID, or an alias of the active
    profile's `[peers]` (if the project has profiles). Exit status: 0 ok,
    1 tool error or refused call, 2 a target that is none of those, 3
    unreachable or unauthorized.

    Of the profile, only `[node]` and `[peers]` are read and validated
    (`loader.load_network`): a call applies none of its other rules (the
    sandbox, tools, model, checks are the serving side's and the agent's), so a
    mistake there does not stop it, while one in these two sections does, with
    the error `serve` would give. Building the whole profile's models would
    also cost every call ~10 ms of start-up (issue 35).

    Raises ProfileError (the profile exists but does not read, or these
    sections are invalid).
    """
    from gbr_node.config.loader import load_network, profile_path
    from gbr_node.errors import GbrError
    from gbr_node.p2p.host import open_host, parse_target

    peer_addrs: tuple[str, ...] = ()
    peers: Mapping[str, TrustedPeer] = {}
    mdns = browse = False
    if profile_path(settings.project_dir, settings.env).exists():
        sections = load_network(settings.project_dir, settings.env)
        peers, mdns = sections.peers, sections.node.mdns
    if target in peers:
        target, peer_addrs = peers[target].peer_id, peers[target].addrs
        browse = mdns and not peer_addrs  # where mDNS finds it (issue 23)
    else:
        try:
            parse_target(target)
        except GbrError as exc:
            print(f"gbr-node: {_bad_target(target, exc, peers, settings.env)}", file=sys.stderr)
            return EXIT_USAGE
    keypair = load_identity(settings)
    async with open_host(keypair, [], is_trusted=lambda _: False) as host:
        if browse:
            await _find_on_lan(host, target)
        # Errors are handled inside the host's context: leaving it wraps them
        # in the library's exception groups.
        return await _call_and_print(host, target, tool, arguments, peer_addrs)


async def _find_on_lan(host: P2PHost, peer_id: str) -> None:
    """Browse the LAN with mDNS (announcing nothing) until `peer_id` is seen or
    `MDNS_CALL_WAIT_S` is up; the dial that follows says when it was not found."""
    import trio

    lan = await host.find_on_lan()
    with trio.move_on_after(MDNS_CALL_WAIT_S):
        while not lan.addrs(peer_id):
            await trio.sleep(0.1)


def _bad_target(target: str, exc: GbrError, peers: Mapping[str, TrustedPeer], env: str) -> str:
    """Why `target` is no call target, in the words of the command line: a word that
    looks like neither a peer ID nor a multiaddr is taken for a mistyped alias."""
    known = ", ".join(peers) or f"none: profile {env} has no [peers]"
    kinds = "TARGET is a [peers] alias, a peer ID (12D3KooW...) or a multiaddr ending in /p2p/ID"
    if target.startswith(("/", "12D3KooW", "Qm")):  # a multiaddr, a peer ID mistyped
        return f"{exc}\n  {kinds}"
    return f"{target!r} is not an alias of profile {env} (aliases: {known})\n  {kinds}"


async def _call_and_print(
    host: P2PHost,
    target: str,
    tool: str | None,
    arguments: dict[str, Any],
    peer_addrs: Sequence[str] = (),
) -> int:
    from gbr_node.errors import GbrError, PeerUnreachable
    from gbr_node.p2p.mcp_streams import call_tool, list_tools
    from gbr_node.rpc.codes import UnauthorizedPeer
    from gbr_node.rpc.limits import Limits

    limits = Limits()
    try:
        if peer_addrs:
            host.add_addrs(target, peer_addrs)
        if tool is None:
            from gbr_node.textcells import one_line

            tools = await list_tools(host, target, limits=limits)
            width = max((len(one_line(t.name, 64)) for t in tools), default=0)
            for info in tools:  # a peer's names and words are data (GBR-PRIV-01)
                summary = one_line(info.description.split("\n", 1)[0], 200)
                print(f"{one_line(info.name, 64):<{width}}  {summary}".rstrip())
            return EXIT_OK
        result = await call_tool(host, target, tool, arguments, limits=limits)
    except (PeerUnreachable, UnauthorizedPeer) as exc:
        print(f"gbr-node: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except GbrError as exc:
        print(f"gbr-node: refused: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for item in result["content"]:
        print(item.get("text", ""))
    return EXIT_FAILED if result.get("isError") else EXIT_OK


def identity(settings: NodeSettings) -> int:
    """`gbr-node id`: print the peer ID and the multiaddrs peers would dial: the profile's
    `[node] announce` when it has any, else its listen addresses or `--listen`, then
    one `/p2p-circuit` address per relay in `[node] relays` (issue 23). A profile that
    does not load is reported (exit 1) after the peer ID."""
    from gbr_node.config.loader import load_profile, profile_path
    from gbr_node.errors import GbrError
    from gbr_node.p2p.identity import peer_id_of

    peer_id = peer_id_of(load_identity(settings))
    print(peer_id)
    listen: Sequence[str] = settings.listen or ()
    announce: Sequence[str] = ()
    relays: Sequence[str] = ()
    if profile_path(settings.project_dir, settings.env).exists():
        try:
            node = load_profile(settings.project_dir, settings.env).profile.node
        except GbrError as exc:  # the addresses it would give are unknown: say why
            print(f"gbr-node: {exc}", file=sys.stderr)
            return EXIT_FAILED
        listen, announce, relays = settings.listen or node.listen, node.announce, node.relays
    for addr in announce or listen:
        print(f"  {addr}/p2p/{peer_id}")
    for relay in relays:
        print(f"  {relay}/p2p-circuit/p2p/{peer_id}")
    return EXIT_OK
