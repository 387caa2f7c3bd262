"""Listening addresses, port errors, and py-libp2p's logs kept off the terminal."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import libp2p
import pytest
import trio

from gbr_node.errors import GbrError
from gbr_node.p2p.logs import route_libp2p_logs

from .helpers import LOOPBACK, echo_round_trip, foreign_dial, foreign_host, multiaddr, running_host


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_port_zero_reports_a_bound_dialable_multiaddr_with_peer_id():
    async with running_host() as server, running_host(()) as client:
        (addr,) = server.addrs
        ma = multiaddr.Multiaddr(addr)

        assert ma.value_for_protocol("ip4") == "127.0.0.1"
        assert int(ma.value_for_protocol("tcp")) > 0
        assert addr.endswith(f"/p2p/{server.peer_id}")
        assert await echo_round_trip(client, addr, b"hi") == b"hi"


async def test_wildcard_listen_reports_concrete_interface_addresses():
    async with running_host(("/ip4/0.0.0.0/tcp/0",)) as server, running_host(()) as client:
        addrs = server.addrs

        assert addrs
        assert not any("/ip4/0.0.0.0/" in addr for addr in addrs)
        assert await echo_round_trip(client, addrs[0], b"hi") == b"hi"


async def test_dial_only_host_has_no_addresses():
    async with running_host(()) as client:
        assert client.addrs == ()


async def test_port_held_by_another_socket_is_a_clear_error():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(GbrError, match=f"cannot listen on /ip4/127.0.0.1/tcp/{port}"):
            async with running_host((f"/ip4/127.0.0.1/tcp/{port}",)):
                pass


async def test_port_held_by_another_node_is_a_clear_error():
    # py-libp2p binds with SO_REUSEPORT: without our check both nodes would share the port
    async with running_host() as first:
        port = multiaddr.Multiaddr(first.addrs[0]).value_for_protocol("tcp")
        with pytest.raises(GbrError, match="in use"):
            async with running_host((f"/ip4/127.0.0.1/tcp/{port}",)):
                pass


async def test_fixed_free_port_is_used_as_given():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with running_host((f"/ip4/127.0.0.1/tcp/{port}",)) as server:
        assert server.addrs == (f"/ip4/127.0.0.1/tcp/{port}/p2p/{server.peer_id}",)


@pytest.mark.parametrize(
    ("listen", "message"),
    [
        ("127.0.0.1:4001", "not a valid multiaddr"),
        ("/ip4/127.0.0.1/udp/4001", "not a TCP multiaddr"),
        ("/ip4/127.0.0.1/tcp/4001/ws", "not a TCP multiaddr"),
    ],
)
async def test_unusable_listen_address_is_refused_by_name(listen, message):
    with pytest.raises(GbrError, match=message) as error:
        async with running_host((listen,)):
            pass

    assert listen in str(error.value)


async def test_libp2p_errors_go_to_the_given_handler_not_the_terminal(capfd):
    handler = ListHandler()
    other = foreign_host(muxer="mplex")  # makes our swarm log "fail to upgrade mux" at ERROR
    async with (
        running_host(log_handler=handler) as ours,
        other.run([multiaddr.Multiaddr(LOOPBACK[0])]),
    ):
        with trio.fail_after(10), pytest.raises(Exception, match="unable to connect"):
            await foreign_dial(other, ours.addrs[0])

    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert any(
        r.levelno == logging.ERROR and "fail to upgrade mux" in r.getMessage()
        for r in handler.records
    )


def test_separate_process_keeps_libp2p_logs_in_its_log_file(tmp_path, peer_process):
    log_file = tmp_path / "node.log"
    peer = peer_process(str(log_file))

    async def dial_with_mplex_only() -> None:
        other = foreign_host(muxer="mplex")
        async with other.run([multiaddr.Multiaddr(LOOPBACK[0])]):
            with trio.fail_after(10), pytest.raises(Exception, match="unable to connect"):
                await foreign_dial(other, peer.addr)
            async with running_host(()) as client:
                assert await echo_round_trip(client, peer.addr, b"alive") == b"alive"

    trio.run(dial_with_mplex_only)
    stderr = peer.stop()

    assert stderr == ""
    assert "fail to upgrade mux" in log_file.read_text()


def test_libp2p_records_sent_through_the_root_logger_are_diverted():
    handler, root_handler = ListHandler(), ListHandler()
    root = logging.getLogger()
    root.addHandler(root_handler)
    try:
        route_libp2p_logs(handler)
        libp2p_file = str(Path(libp2p.__file__).parent / "network" / "swarm.py")
        for pathname in (libp2p_file, __file__):
            root.handle(
                logging.LogRecord(
                    "root", logging.WARNING, pathname, 1, "from %s", (pathname,), None
                )
            )
    finally:
        root.removeHandler(root_handler)
        route_libp2p_logs(None)

    assert [r.getMessage() for r in handler.records] == [f"from {libp2p_file}"]
    assert [r.getMessage() for r in root_handler.records] == [f"from {__file__}"]


def test_a_peer_that_reset_its_connection_is_logged_as_info_not_as_an_error():
    """py-libp2p's Yamux logs ERROR when a peer hangs up while we write (issue 13:
    a normal event is not an error); other errors still come through."""
    handler = ListHandler()
    yamux = logging.getLogger("libp2p.stream_muxer.yamux.yamux")
    try:
        route_libp2p_logs(handler, logging.INFO)
        yamux.error(
            "Error in handle_incoming for peer 12D3Koo: ConnectionClosedError: "
            "TCP connection reset by remote peer: [Errno 32] Broken pipe"
        )
        yamux.error("Error in handle_incoming for peer 12D3Koo: ValueError: bad frame")
        route_libp2p_logs(handler)  # at WARNING: the routine one is left out
        yamux.error("Error ...: TCP connection reset by remote peer: [Errno 104]")
    finally:
        route_libp2p_logs(None)

    assert [(r.levelname, r.getMessage()[-16:]) for r in handler.records] == [
        ("INFO", "[Errno 32] Broken pipe"[-16:]),
        ("ERROR", "ValueError: bad frame"[-16:]),
    ]
