"""Keep parts of our dependencies that gbr-node never uses out of the process.

An idle `gbr-node serve` must stay under 100 MB resident (issue 3). `import
libp2p` (py-libp2p 0.8.1, pinned) loads every subsystem it has, whatever the
host is built with; four of them, which a Noise + Yamux + TCP host with no
discovery never runs, pull in ~15 MB of modules and libraries (zeroconf,
requests, cbor2, netaddr, ...):

  libp2p.discovery.mdns   mDNS discovery (only with `enable_mDNS=True`)
  libp2p.security.tls     the `/tls/1.0.0` transport and AutoTLS (ACME)
  libp2p.relay            circuit relay v2 (basic_host uses one helper of it
                          for AutoTLS only)
  libp2p.kad_dht          the Kademlia DHT

`install()` puts a finder first on `sys.meta_path` that answers every module
under those packages with a stand-in: any name taken from it is a class that
raises `UnusedSubsystem` when called, so code that only imports them (as
`libp2p/__init__.py` and `libp2p.host.basic_host` do) works, and code that
would really use one fails loudly instead of misbehaving. httpx's own
command-line client (`httpx._main`: click, rich.console, pygments, ~5 MB) is
kept out the way httpx allows: it falls back to a stub `main` on ImportError.

`install()` must run before the first `import libp2p` / `import httpx`; the
`gbr-node` entry point calls it first thing, so every node process (`run`,
`serve`, `call`, ...) has it. In-process tests do not: they also build
py-libp2p's default host, TLS and all, as a foreign peer. A note for upstream:
lazy imports of optional subsystems in `libp2p/__init__.py` and
`basic_host.py` would make this unnecessary.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

UNUSED_PACKAGES = (
    "libp2p.discovery.mdns",
    "libp2p.security.tls",
    "libp2p.relay",
    "libp2p.kad_dht",
)


class UnusedSubsystem(RuntimeError):
    """Raised on any use of a stand-in from `UNUSED_PACKAGES`."""


class _StandIn:
    def __init__(self, *args: object, **kwargs: object) -> None:
        cls = type(self)
        raise UnusedSubsystem(
            f"{cls.__module__}.{cls.__qualname__} is not loaded: gbr-node leaves py-libp2p's "
            "mDNS, TLS/AutoTLS, circuit relay and DHT out (see gbr_node/lean.py)"
        )


class _StandInModule(types.ModuleType):
    """A package whose every public attribute is a `_StandIn` subclass, made on first use."""

    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        stand_in = type(name, (_StandIn,), {"__module__": self.__name__, "__qualname__": name})
        setattr(self, name, stand_in)
        return stand_in


class _UnusedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, name: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if any(_under(name, p) for p in UNUSED_PACKAGES if p not in _allowed):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _StandInModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []


def install() -> None:
    """Install the stand-ins (idempotent). Has no effect on modules already imported."""
    # None in sys.modules makes that import fail (importlib docs)
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # typeshed: modules only
    if not any(isinstance(finder, _UnusedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _UnusedFinder())


def allow(package: str) -> None:
    """Load the real `package` (one of `UNUSED_PACKAGES`) from now on: a profile asked
    for it (issue 23: `libp2p.relay` for relays and hole punching,
    `libp2p.discovery.mdns` for LAN discovery). Its stand-in modules are dropped
    from `sys.modules`, so the next import of any of them loads the library's
    own; names already taken from a stand-in (by `libp2p/__init__.py`) stay
    stand-ins. Idempotent; a no-op without `install()`.

    Raises:
        ValueError: `package` is not in `UNUSED_PACKAGES`.
    """
    if package not in UNUSED_PACKAGES:
        raise ValueError(f"lean.allow: {package!r} is not one of {UNUSED_PACKAGES}")
    _allowed.add(package)
    for name, module in list(sys.modules.items()):
        if isinstance(module, _StandInModule) and _under(name, package):
            del sys.modules[name]


_allowed: set[str] = set()


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")
