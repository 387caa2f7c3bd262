"""Only Noise and only Yamux, both ways, and dial failures named plainly (DESIGN.md, issue 3)."""

from __future__ import annotations

import socket

import pytest
import trio

from gbr_node.errors import GbrError, PeerUnreachable
from gbr_node.p2p.identity import peer_id_of

from .helpers import (
    ECHO,
    LOOPBACK,
    create_new_key_pair,
    echo_round_trip,
    foreign_addr,
    foreign_dial,
    foreign_host,
    multiaddr,
    running_host,
)

MULTISTREAM = "/multistream/1.0.0"


def _frame(line: str) -> bytes:
    body = (line + "\n").encode()
    assert len(body) < 128  # one-byte unsigned varint
    return bytes([len(body)]) + body


async def _read_frame(stream: trio.SocketStream) -> str:
    size = (await stream.receive_some(1))[0]
    body = b""
    while len(body) < size:
        body += await stream.receive_some(size - len(body))
    return body.decode().rstrip("\n")


async def _security_answer(addr: str, protocol_id: str) -> str:
    """Propose `protocol_id` over multistream-select 1.0.0 on a raw TCP socket; return the reply."""
    ma = multiaddr.Multiaddr(addr)
    stream = await trio.open_tcp_stream(
        ma.value_for_protocol("ip4"), int(ma.value_for_protocol("tcp"))
    )
    async with stream:
        await stream.send_all(_frame(MULTISTREAM) + _frame(protocol_id))
        assert await _read_frame(stream) == MULTISTREAM
        return await _read_frame(stream)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_upgrader_offers_exactly_noise_and_yamux():
    async with running_host() as host:
        assert host.security_protocols == ("/noise",)
        assert host.muxer_protocols == ("/yamux/1.0.0",)


@pytest.mark.parametrize("weak", ["/plaintext/2.0.0", "/secio/1.0.0", "/tls/1.0.0"])
async def test_listener_answers_na_to_every_security_but_noise_on_the_wire(weak):
    async with running_host() as host:
        with trio.fail_after(10):
            assert await _security_answer(host.addrs[0], weak) == "na"
            assert await _security_answer(host.addrs[0], "/noise") == "/noise"


@pytest.mark.parametrize(("security", "muxer"), [("plaintext", "yamux"), ("noise", "mplex")])
async def test_peer_without_noise_or_yamux_cannot_connect_in_either_direction(security, muxer):
    other = foreign_host(security=security, muxer=muxer)
    async with running_host() as ours, other.run([multiaddr.Multiaddr(LOOPBACK[0])]):
        with trio.fail_after(10), pytest.raises(PeerUnreachable, match="does not offer") as out:
            await ours.new_stream(foreign_addr(other), ECHO)
        with trio.fail_after(10), pytest.raises(Exception, match="unable to connect"):
            await foreign_dial(other, ours.addrs[0])

        assert ours.connected_peers() == ()
    expected = "Noise" if security == "plaintext" else "Yamux"
    assert expected in str(out.value)


async def test_library_default_host_connects_to_us_over_noise_and_yamux():
    other = foreign_host(security="default", muxer="default")
    async with running_host() as ours, other.run([multiaddr.Multiaddr(LOOPBACK[0])]):
        with trio.fail_after(10):
            await foreign_dial(other, ours.addrs[0])
        (conn,) = other.get_network().get_connections()

        assert conn.get_negotiated_security_protocol() == "/noise"
        assert conn.get_negotiated_muxer_protocol() == "/yamux/1.0.0"


async def test_dialing_a_closed_port_is_refused_at_once():
    async with running_host(()) as client:
        target = f"/ip4/127.0.0.1/tcp/{_closed_port()}/p2p/{client.peer_id}"
        with trio.fail_after(2), pytest.raises(PeerUnreachable, match="connection refused"):
            await client.new_stream(target, ECHO)


async def test_another_peer_id_at_the_address_is_detected_by_noise():
    impostor_id = peer_id_of(create_new_key_pair())
    async with running_host() as server, running_host(()) as client:
        address = server.addrs[0].rsplit("/p2p/", 1)[0]
        with trio.fail_after(2), pytest.raises(PeerUnreachable, match="different peer answered"):
            await client.new_stream(f"{address}/p2p/{impostor_id}", ECHO)

        assert client.connected_peers() == ()


async def test_silent_listener_gives_peer_unreachable_after_the_timeout():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        target = (
            f"/ip4/127.0.0.1/tcp/{silent.getsockname()[1]}/p2p/{peer_id_of(create_new_key_pair())}"
        )
        async with running_host(()) as client:
            with (
                trio.fail_after(5),
                pytest.raises(PeerUnreachable, match="no connection within 0.3 s"),
            ):
                await client.new_stream(target, ECHO, timeout_s=0.3)


async def test_unsupported_protocol_is_named():
    async with running_host() as server, running_host(()) as client:
        with (
            trio.fail_after(10),
            pytest.raises(PeerUnreachable, match="does not support protocol /nope/1"),
        ):
            await client.new_stream(server.addrs[0], "/nope/1")


async def test_bare_peer_id_without_known_address_is_unreachable():
    async with running_host(()) as client:
        with trio.fail_after(2), pytest.raises(PeerUnreachable, match="no known address"):
            await client.new_stream(peer_id_of(create_new_key_pair()), ECHO)


async def test_peer_id_dials_its_added_addresses_in_order_past_a_dead_one():
    async with running_host() as server, running_host(()) as client:
        dead = f"/ip4/127.0.0.1/tcp/{_closed_port()}"
        client.add_addrs(server.peer_id, [dead, server.addrs[0]])

        assert await echo_round_trip(client, server.peer_id, b"ping") == b"ping"


async def test_failed_dial_does_not_block_the_next_one():
    async with running_host() as server, running_host(()) as client:
        dead = f"/ip4/127.0.0.1/tcp/{_closed_port()}/p2p/{server.peer_id}"
        with trio.fail_after(2), pytest.raises(PeerUnreachable):
            await client.connect(dead)

        assert await echo_round_trip(client, server.addrs[0], b"again") == b"again"


async def test_connect_returns_the_peer_id_and_reuses_the_connection():
    async with running_host() as server, running_host(()) as client:
        with trio.fail_after(10):
            first = await client.connect(server.addrs[0])
            second = await client.connect(server.peer_id)

        assert first == second == server.peer_id
        assert client.connected_peers() == (server.peer_id,)


async def test_same_peer_reconnecting_while_its_old_connection_closes_is_served():
    async with (
        running_host() as server,
        running_host(()) as client,
        trio.open_nursery() as nursery,
    ):
        for cycle in range(20):
            payload = f"burst {cycle}".encode()
            assert await echo_round_trip(client, server.addrs[0], payload) == payload
            nursery.start_soon(client.disconnect, server.peer_id)
            await trio.sleep(0)  # the close has begun; reconnect at once


@pytest.mark.parametrize(
    "target",
    ["not-a-peer-id", "abc", "/ip4/127.0.0.1/tcp/4001", "/ip4/127.0.0.1/tcp/notaport/p2p/x"],
)
async def test_malformed_target_is_a_usage_error_not_unreachable(target):
    async with running_host(()) as client:
        with pytest.raises(GbrError) as error:
            await client.new_stream(target, ECHO)

    assert not isinstance(error.value, PeerUnreachable)
    assert "target" in str(error.value)


async def test_add_addrs_rejects_an_address_of_another_peer():
    other = peer_id_of(create_new_key_pair())
    async with running_host(()) as client:
        with pytest.raises(GbrError, match="names peer"):
            client.add_addrs(client.peer_id, [f"/ip4/127.0.0.1/tcp/4001/p2p/{other}"])
