"""The netns lab itself (tests/support/netns.py, issue 23): the NATs let the home networks
reach the relay's network and nothing reach them; the lab leaves no namespace behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.netns import Lab, home_networks, leftovers, namespaces_forbidden

ROOT = Path(__file__).resolve().parents[2]

SERVE = """
import socket, sys
server = socket.create_server(("0.0.0.0", 7000))
print("listening", flush=True)
conn, peer = server.accept()
conn.sendall(peer[0].encode())
conn.close()
"""
"""Accepts one TCP connection on port 7000 and sends back the address it came from."""

DIAL = """
import socket, sys
try:
    conn = socket.create_connection((sys.argv[1], 7000), timeout=3)
except OSError as exc:
    print("refused:", exc)
else:
    print("seen as", conn.recv(100).decode())
"""
"""Connects to argv[1]:7000 and prints the address the other side saw, or why it could not."""


def dial(lab: Lab, client: str, server: str) -> str:
    """What `client` gets connecting to `server`'s port 7000: "seen as IP" or "refused: ..."."""
    listener = lab.popen(server, [sys.executable, "-c", SERVE], stdout=subprocess.PIPE)
    try:
        assert listener.stdout is not None and listener.stdout.readline() == "listening\n"
        return lab.run(client, [sys.executable, "-c", DIAL, lab.addr[server]]).stdout.strip()
    finally:
        listener.kill()
        listener.wait(timeout=10)


def test_each_home_network_reaches_the_relay_through_its_own_nat() -> None:
    with home_networks() as lab:
        assert dial(lab, "a", "r") == f"seen as {lab.addr['router_a']}"
        assert dial(lab, "b", "r") == f"seen as {lab.addr['router_b']}"


def test_nothing_opens_a_connection_into_a_home_network() -> None:
    with home_networks() as lab:
        assert dial(lab, "r", "a").startswith("refused:")
        assert dial(lab, "a", "b").startswith("refused:")
        assert dial(lab, "b", "a").startswith("refused:")


def test_the_lab_removes_its_namespaces_also_when_the_test_fails() -> None:
    kept: list[Lab] = []
    with pytest.raises(RuntimeError, match="the body failed"), home_networks() as lab:
        kept.append(lab)
        assert leftovers(lab) == sorted(lab.ns.values())
        raise RuntimeError("the body failed")
    assert leftovers(kept[0]) == []


def test_where_namespaces_are_forbidden_the_tests_fail_and_say_why() -> None:
    assert namespaces_forbidden() is None
    # A user namespace without a uid map: this process is not root there.
    done = subprocess.run(
        ["unshare", "--user", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        + [f"{__file__}::test_nothing_opens_a_connection_into_a_home_network"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=120,
    )
    assert "1 failed" in done.stdout and "skipped" not in done.stdout
    assert "network namespaces are forbidden here" in done.stdout
    assert "need root" in done.stdout
