"""A network lab in Linux network namespaces for the tests of issue 23 ("Peers beyond
one network"): two home networks, each behind its own NAT router, and a public
network between the routers on which a relay can sit.

    A (192.168.1.2) -- lan|router_a (nft masquerade)|wan --+
                                                           |-- bridge in `wan` -- R (10.23.0.2)
    B (192.168.2.2) -- lan|router_b (nft masquerade)|wan --+

Every router masquerades what its home network sends out (source NAT to its WAN
address, 10.23.0.11 / .12) and, like a home router, forwards from the WAN only
what answers a connection made from inside: nothing on the WAN can open a
connection to A or B, and A and B have no route to each other's network.

The lab makes every namespace under a name unique to it (`gbr<token>-<role>`) and
removes them all when it closes, also when the body raised. Where namespaces are
forbidden (not root, or the kernel refuses), `require_namespaces` fails the test
with a plain message: these tests never skip (issue 23, "What must hold").
Needs `ip` (iproute2) and `nft` (nftables), which `.ci/run` installs from apt.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import pytest

T = TypeVar("T")

WAN_PREFIX = "10.23.0"
"""The public network between the routers and the relay, /24."""
ROLES = ("wan", "r", "router_a", "router_b", "a", "b")
"""The namespaces of one lab, by role."""

ROUTER_RULES = """\
table ip gbr_nat {
  chain masq {
    type nat hook postrouting priority srcnat; policy accept;
    oifname "wan" MASQUERADE
  }
  chain home_router {
    type filter hook forward priority filter; policy drop;
    iifname "lan" oifname "wan" accept
    iifname "wan" oifname "lan" ct state established,related accept
    iifname "wan" oifname "lan" ct status dnat accept
  }
  chain stealth {
    type filter hook input priority filter; policy accept;
    iifname "wan" ct state established,related accept
    iifname "wan" drop
  }
}
"""
"""A home router's nftables ruleset: masquerade out, only answers back in (and what a port
forward the person set up lets in: none by default), and, as home routers do, no answer
at all (not even a reset) to a connection its WAN side did not ask for. MASQUERADE is
one of `NATS`."""

NATS = {
    "port-preserving": "masquerade",
    "random-port": "masquerade random",
}
"""How a router maps its home network's connections: "port-preserving" keeps the source
port when it is free (Linux's default; TCP hole punching can get through two of them),
"random-port" picks a new one for each connection (hole punching cannot guess it)."""


def _run(argv: Sequence[str], *, stdin: str | None = None) -> None:
    """Runs `argv`, raising RuntimeError with its stderr when it fails."""
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")


def namespaces_forbidden() -> str | None:
    """Why this process cannot make network namespaces, or None when it can.

    Tries what the lab needs: root, `ip` and `nft` on PATH, and making and
    removing one namespace.
    """
    if os.geteuid() != 0:
        return "the netns tests need root (they make network namespaces with `ip netns`)"
    missing = [tool for tool in ("ip", "nft") if shutil.which(tool) is None]
    if missing:
        return f"the netns tests need {' and '.join(missing)} (apt-get install iproute2 nftables)"
    probe = f"gbr{secrets.token_hex(3)}-probe"
    try:
        _run(["ip", "netns", "add", probe])
    except RuntimeError as exc:
        return f"the kernel refuses network namespaces here: {exc}"
    _run(["ip", "netns", "del", probe])
    return None


def require_namespaces() -> None:
    """Fails the calling test (never skips) when namespaces cannot be made here."""
    reason = namespaces_forbidden()
    if reason is not None:
        pytest.fail(f"network namespaces are forbidden here, so this test cannot run: {reason}")


@dataclass
class Lab:
    """The namespaces of one lab: `ns[role]` is the namespace name of a role in
    `ROLES`; `addr[role]` the IPv4 address others use for a host (a router's is
    its WAN address)."""

    token: str
    ns: dict[str, str] = field(default_factory=dict)
    addr: dict[str, str] = field(default_factory=dict)
    nat: str = "port-preserving"

    def argv(self, role: str, argv: Sequence[str]) -> list[str]:
        """`argv` as run inside role's namespace (`ip netns exec NS ...`)."""
        return ["ip", "netns", "exec", self.ns[role], *argv]

    def popen(self, role: str, argv: Sequence[str], **kwargs: object) -> subprocess.Popen[str]:
        """Starts `argv` inside role's namespace; kwargs go to subprocess.Popen."""
        return subprocess.Popen(self.argv(role, argv), text=True, **kwargs)  # type: ignore[call-overload]

    def run(
        self, role: str, argv: Sequence[str], timeout: float = 60, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Runs `argv` inside role's namespace to its end (seconds of `timeout`), `stdin`
        as its input."""
        return subprocess.run(
            self.argv(role, argv),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _veth(lab: Lab, one: str, one_name: str, other: str, other_name: str) -> None:
    """A veth pair from role `one` (named one_name there) to `other` (other_name)."""
    _run(
        ["ip", "-n", lab.ns[one], "link", "add", one_name, "type", "veth", "peer", "name"]
        + [other_name, "netns", lab.ns[other]]
    )


def _up(lab: Lab, role: str, dev: str, cidr: str | None = None) -> None:
    if cidr is not None:
        _run(["ip", "-n", lab.ns[role], "addr", "add", cidr, "dev", dev])
    _run(["ip", "-n", lab.ns[role], "link", "set", dev, "up"])


def _build(lab: Lab) -> None:
    for role in ROLES:
        _run(["ip", "netns", "add", lab.ns[role]])
        _up(lab, role, "lo")
    _run(["ip", "-n", lab.ns["wan"], "link", "add", "br0", "type", "bridge"])
    _up(lab, "wan", "br0")
    lab.addr["r"] = f"{WAN_PREFIX}.2"
    _veth(lab, "wan", "to_r", "r", "wan")
    _run(["ip", "-n", lab.ns["wan"], "link", "set", "to_r", "master", "br0"])
    _up(lab, "wan", "to_r")
    _up(lab, "r", "wan", f"{WAN_PREFIX}.2/24")
    for index, side in enumerate(("a", "b"), start=1):
        router = f"router_{side}"
        lab.addr[router] = f"{WAN_PREFIX}.{10 + index}"
        lab.addr[side] = f"192.168.{index}.2"
        _veth(lab, "wan", f"to_{router}", router, "wan")
        _run(["ip", "-n", lab.ns["wan"], "link", "set", f"to_{router}", "master", "br0"])
        _up(lab, "wan", f"to_{router}")
        _up(lab, router, "wan", f"{lab.addr[router]}/24")
        _veth(lab, router, "lan", side, "eth0")
        _up(lab, router, "lan", f"192.168.{index}.1/24")
        _up(lab, side, "eth0", f"{lab.addr[side]}/24")
        _run(["ip", "-n", lab.ns[side], "route", "add", "default", "via", f"192.168.{index}.1"])
        _run(lab.argv(router, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]))
        rules = ROUTER_RULES.replace("MASQUERADE", NATS[lab.nat])
        _run(lab.argv(router, ["nft", "-f", "-"]), stdin=rules)


@contextmanager
def home_networks(nat: str = "port-preserving") -> Iterator[Lab]:
    """Yields a built `Lab` (see the module docstring) whose routers map connections as
    `nat` (one of `NATS`) says, and removes all its namespaces afterwards, whatever
    happened. Fails the test when namespaces are forbidden."""
    require_namespaces()
    token = secrets.token_hex(3)
    lab = Lab(token, ns={role: f"gbr{token}-{role}" for role in ROLES}, nat=nat)
    try:
        _build(lab)
        yield lab
    finally:
        remove(lab)


LAN_PREFIX = "192.168.50"
"""The one LAN of `one_lan()`, /24."""


@contextmanager
def one_lan(roles: Sequence[str]) -> Iterator[Lab]:
    """Yields a `Lab` of one LAN: a namespace per role in `roles`, each with one
    interface on a bridge (in a namespace `switch`) at 192.168.50.2, .3, ... in
    order, as machines on one home network; mDNS multicast reaches all of them.
    Removed afterwards, whatever happened; fails the test where namespaces are
    forbidden."""
    require_namespaces()
    token = secrets.token_hex(3)
    lab = Lab(token, ns={role: f"gbr{token}-{role}" for role in ("switch", *roles)})
    try:
        for role in lab.ns:
            _run(["ip", "netns", "add", lab.ns[role]])
            _up(lab, role, "lo")
        _run(["ip", "-n", lab.ns["switch"], "link", "add", "br0", "type", "bridge"])
        _up(lab, "switch", "br0")
        for index, role in enumerate(roles, start=2):
            lab.addr[role] = f"{LAN_PREFIX}.{index}"
            _veth(lab, "switch", f"to_{index}", role, "eth0")
            _run(["ip", "-n", lab.ns["switch"], "link", "set", f"to_{index}", "master", "br0"])
            _up(lab, "switch", f"to_{index}")
            _up(lab, role, "eth0", f"{lab.addr[role]}/24")
        yield lab
    finally:
        remove(lab)


def made_inside(lab: Lab, role: str, make: Callable[[], T]) -> T:
    """`make()` run on a short-lived thread that joined role's network namespace
    (setns(2); a thread's namespace is its own): the sockets it creates, such as a
    scripted model server's listening socket, belong to that namespace for good, and
    the rest of the test process stays where it was."""
    result: list[T] = []
    failure: list[BaseException] = []

    def enter_and_make() -> None:
        try:
            with open(f"/run/netns/{lab.ns[role]}") as handle:
                if _libc.setns(handle.fileno(), CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns failed")
            result.append(make())
        except BaseException as exc:  # re-raised in the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=enter_and_make)
    thread.start()
    thread.join(timeout=30)
    if failure:
        raise failure[0]
    return result[0]


CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def remove(lab: Lab) -> None:
    """Deletes every namespace of `lab` that exists (their veths and bridge go with them)."""
    existing = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    for name in lab.ns.values():
        if name in existing:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def leftovers(lab: Lab) -> list[str]:
    """The namespaces of `lab` that still exist (empty once it is removed)."""
    existing = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    return sorted(name for name in lab.ns.values() if name in existing)
