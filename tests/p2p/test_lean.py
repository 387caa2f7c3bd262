"""gbr_node.lean: py-libp2p's unused subsystems stay out of node processes (issue 3 memory)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

LEFT_OUT = ("zeroconf", "requests", "cbor2", "netaddr", "httpx._main", "click")


def _in_fresh_interpreter(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


def test_a_node_process_builds_its_host_without_the_left_out_subsystems():
    done = _in_fresh_interpreter(
        f"""
        import sys
        from gbr_node import lean
        lean.install()
        import gbr_node.node, gbr_node.p2p.host, gbr_node.p2p.service, httpx, libp2p
        print(sorted(m for m in {LEFT_OUT!r} if sys.modules.get(m) is not None))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_using_a_left_out_subsystem_fails_loudly_with_the_reason():
    done = _in_fresh_interpreter(
        """
        from gbr_node import lean
        lean.install()
        from libp2p.discovery.mdns.mdns import MDNSDiscovery
        MDNSDiscovery(None)
        """
    )
    assert done.returncode != 0
    assert "UnusedSubsystem: libp2p.discovery.mdns.mdns.MDNSDiscovery is not loaded" in done.stderr


def test_without_install_the_library_is_whole():
    done = _in_fresh_interpreter(
        """
        import sys, libp2p
        print(type(sys.modules["libp2p.discovery.mdns.mdns"]).__name__, "zeroconf" in sys.modules)
        """
    )
    assert done.stdout.split() == ["module", "True"], done.stderr


def test_relays_and_mdns_load_only_when_a_profile_asks_for_them():
    """Issue 23: a node without relays or mDNS keeps their modules out (idle memory as
    before); `lean.allow` loads the real ones for a node whose profile enables them,
    and the other left-out subsystems stay stand-ins."""
    done = _in_fresh_interpreter(
        """
        import sys
        from gbr_node import lean
        lean.install()
        import gbr_node.node, gbr_node.p2p.host
        real = lambda name: type(sys.modules.get(name)).__name__ == "module"
        print(real("libp2p.relay.circuit_v2.dcutr"), "zeroconf" in sys.modules)
        import gbr_node.p2p.holepunch, gbr_node.p2p.relay, gbr_node.p2p.lan
        print(real("libp2p.relay.circuit_v2.dcutr"), "zeroconf" in sys.modules)
        from libp2p.kad_dht.kad_dht import KadDHT
        try:
            KadDHT(None, None)
        except lean.UnusedSubsystem:
            print("dht still left out")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["False False", "True True", "dht still left out"]


def test_libp2p_init_is_not_run_and_its_names_come_on_first_use():
    """Issue 35: `import libp2p` in a node process runs none of `libp2p/__init__.py`
    (QUIC, TLS, RSA, secio, mplex, ...); `from libp2p import new_host` still works, and
    runs the file then without undoing how the libp2p logger was routed since."""
    done = _in_fresh_interpreter(
        """
        import logging, sys
        from gbr_node import lean
        lean.install()
        import gbr_node.p2p.host
        print("new_host" in vars(sys.modules["libp2p"]), "aioquic" in sys.modules)
        marker = logging.NullHandler()
        logging.getLogger("libp2p").addHandler(marker)
        from libp2p import new_host
        print(callable(new_host), marker in logging.getLogger("libp2p").handlers)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["False False", "True True"]


def test_quic_and_websocket_fail_loudly():
    done = _in_fresh_interpreter(
        """
        from gbr_node import lean
        lean.install()
        from libp2p.transport.quic.transport import QUICTransport
        QUICTransport(None, None)
        """
    )
    assert done.returncode != 0
    assert "UnusedSubsystem: libp2p.transport.quic.transport.QUICTransport" in done.stderr


def test_deferred_modules_load_on_first_use():
    """An RSA key (pycryptodome) or a DNS name (dnspython) loads its module when one
    comes; a swarm's resolver made meanwhile is made for real when first used."""
    done = _in_fresh_interpreter(
        """
        import sys
        from gbr_node import lean
        lean.install()
        import gbr_node.p2p.host
        from libp2p.crypto.serialization import deserialize_public_key
        from multiaddr.resolvers import DNSResolver
        resolver = DNSResolver()
        print("Crypto" in sys.modules, "dns" in sys.modules)
        from Crypto.PublicKey import RSA
        from libp2p.crypto.pb.crypto_pb2 import PublicKey
        from libp2p.crypto.rsa import RSAPublicKey  # still the stand-in here
        der = RSA.generate(1024).publickey().export_key("DER")
        key = deserialize_public_key(PublicKey(key_type=0, data=der).SerializeToString())
        print(type(key).__name__, isinstance(key, RSAPublicKey))
        print(type(resolver.resolve).__name__, "dns" in sys.modules)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["False False", "RSAPublicKey True", "method True"]


def test_a_stand_in_named_in_an_except_clause_lets_other_errors_through():
    """py-libp2p's `NetStream.read` names QUIC's errors in its `except` tuple: a stream
    reset must still come out as `StreamReset`, not a TypeError (seen through
    `gbr-node mcp` calling a peer whose call failed)."""
    done = _in_fresh_interpreter(
        """
        from gbr_node import lean
        lean.install()
        from libp2p.network.stream import net_stream
        try:
            try:
                raise KeyError("reset")
            except (net_stream.QUICStreamClosedError, net_stream.QUICStreamResetError):
                print("caught as QUIC")
        except KeyError:
            print("passed through")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "passed through"


def test_lazily_run_parts_are_the_real_ones_on_first_use():
    """psutil runs on its first use, cryptography.x509's package file when one of its
    names is used (py-libp2p's host takes only `x509.oid` at import), identify's agent
    version is py-libp2p's installed one, pydantic finds no plugins without
    importlib.metadata, and protobuf's messages work (upb) without its pure-Python
    implementation, which runs when a name of it is used (issue 35: what `gbr-node
    call` no longer runs)."""
    done = _in_fresh_interpreter(
        """
        import sys
        from gbr_node import lean
        lean.install()
        import gbr_node.p2p.host, pydantic
        from libp2p.identity.identify.identify import AGENT_VERSION

        class Model(pydantic.BaseModel):
            x: int

        Model(x=1)
        kind = lambda name: type(sys.modules.get(name)).__name__
        print(kind("psutil"), kind("cryptography.x509"), "cryptography.x509.base" in sys.modules)
        print("importlib.metadata" in sys.modules, AGENT_VERSION.split("/")[0])
        import psutil
        from cryptography import x509
        print(isinstance(psutil.net_if_addrs(), dict), kind("psutil"))
        print(x509.DNSName.__module__, "cryptography.x509.base" in sys.modules)
        from importlib.metadata import version
        print(AGENT_VERSION == f"py-libp2p/{version('libp2p')}")
        from libp2p.crypto.pb.crypto_pb2 import PublicKey
        sent = PublicKey(key_type=1, data=b"key").SerializeToString()
        pure = "google.protobuf.internal.python_message"
        print(PublicKey.FromString(sent).data == b"key", kind(pure))
        print(sys.modules[pure].GeneratedProtocolMessageType.__name__, kind(pure))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "_LazyModule _BarePackage False",
        "False py-libp2p",
        "True module",
        "cryptography.x509.general_name True",
        "True",
        "True _LazyModule",
        "GeneratedProtocolMessageType module",
    ]
