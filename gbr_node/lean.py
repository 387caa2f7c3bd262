"""Keep parts of our dependencies that gbr-node never uses out of the process.

An idle `gbr-node serve` must stay under 100 MB resident (issue 3), and a
one-shot command such as `gbr-node call` must start in a blink (issue 35).
`import libp2p` (py-libp2p 0.8.1, pinned) runs `libp2p/__init__.py`, which
loads every subsystem the library has (QUIC and TLS with aioquic, RSA keys with
pycryptodome, secio, mplex, the persistent peer stores, ...), whatever the
host is built with; ~0.6 s and ~300 modules that a Noise + Yamux + TCP host
never runs. `install()` puts a finder first on `sys.meta_path` that answers
three kinds of module:

- **Bare packages** (`BARE_PACKAGES`) are made without running their
  `__init__.py` (their submodules are the library's own, from their own
  folder); the package's names are there on first use: the file runs then,
  in the package, so every name is the real one. `libp2p` (its `new_host`,
  ...): what its `__init__.py` does that matters is done here: import the
  transports first (the order its own import cycle `abc -> custom_types ->
  transport -> manager -> abc` needs) and `setup_logging()`.
  `cryptography.x509` (certificates; ~7 ms): py-libp2p's host imports it for
  AutoTLS, which gbr-node never runs, and `x509.oid` from it, which needs
  only its own file.
- **Stand-ins** (`UNUSED_PACKAGES`): subsystems gbr-node never runs. Any name
  taken from one is a class that raises `UnusedSubsystem` when called, so
  code that only imports them works, and code that would use one fails
  loudly instead of misbehaving:

    libp2p.discovery.mdns     mDNS discovery (loaded by `allow` when a profile asks)
    libp2p.security.tls       the `/tls/1.0.0` transport and AutoTLS (ACME)
    libp2p.relay              circuit relay v2 (loaded by `allow` when a profile asks)
    libp2p.kad_dht            the Kademlia DHT
    libp2p.transport.quic     QUIC (aioquic, service_identity, x509)
    libp2p.transport.websocket  WebSocket (trio-websocket, wsproto)
    libp2p.discovery.bootstrap  bootstrap discovery (makes a DNS resolver on import)
    libp2p.security.pnet      private networks (pre-shared key, pycryptodome)
    prometheus_client         metrics (py-libp2p's are off unless asked for)

- **Deferred modules** (`DEFERRED`): parts used only in some cases, loaded
  for real on first use. A class taken from one is a stand-in whose
  attributes (`RSAPublicKey.from_bytes`) and calls load the real module and
  forward to it; an object of a class in `LAZY_OBJECTS` (the `DNSResolver`
  every swarm makes) is made for real on its first use:

    multiaddr.resolvers       DNS (dnspython: only to dial a /dns4/ address)
    libp2p.crypto.rsa         RSA keys (pycryptodome: only a peer with an RSA key)
    libp2p.crypto.secp256k1   secp256k1 keys (coincurve: likewise)
    libp2p.rcmgr.manager      the resource manager (psutil; gbr-node sets none: ADR 0007)

- **Lazy modules** (`LAZY_MODULES`) run on their first use: `psutil` (~6 ms),
  which multiaddr's utilities import for `psutil.net_if_addrs()` (only to
  listen on 0.0.0.0 or ::); and protobuf's `internal.python_message` (~5 ms
  with `text_format`, `decoder`, `pickle`, ...), protobuf's pure-Python message
  classes, which `descriptor_pool` and `internal.builder` import whatever the
  implementation, while the installed wheel runs the upb one
  (`api_implementation.Type() == "upb"`), which never uses it (it would run
  on the first use of one of its names).

`libp2p.utils.version` (identify's agent version, `py-libp2p/0.8.1`, asked
for when identify is imported) reads the version from the name of the
`libp2p-VERSION.dist-info` folder beside the package, as pip writes it, not
with `importlib.metadata` (~10 ms of imports); the real module when there is
no such folder.

pydantic's plugin loader (`pydantic.plugin._loader`) is replaced by one that
finds no plugins: the real one imports `importlib.metadata` (email, zipfile,
csv, ...) and reads the entry points of every installed distribution the
first time a model is built (~15 ms); gbr-node installs and uses no pydantic
plugin.

httpx's own command-line client (`httpx._main`: click, rich.console,
pygments, ~5 MB) is kept out the way httpx allows: it falls back to a stub
`main` on ImportError.

`install()` must run before the first `import libp2p` / `import httpx`; the
`gbr-node` entry point calls it first thing, so every node process (`run`,
`serve`, `call`, ...) has it. In-process tests do not: they also build
py-libp2p's default host, TLS and all, as a foreign peer. A note for upstream:
lazy imports of optional subsystems in `libp2p/__init__.py`, `custom_types.py`
and `basic_host.py` would make this unnecessary. tests/p2p/test_lean.py holds
the behaviour; ADR 0007 the decision.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

UNUSED_PACKAGES = (
    "libp2p.discovery.mdns",
    "libp2p.security.tls",
    "libp2p.relay",
    "libp2p.kad_dht",
    "libp2p.transport.quic",
    "libp2p.transport.websocket",
    "libp2p.discovery.bootstrap",
    "libp2p.security.pnet",
    "prometheus_client",
)
DEFERRED = (
    "multiaddr.resolvers",
    "libp2p.crypto.rsa",
    "libp2p.crypto.secp256k1",
    "libp2p.rcmgr.manager",
)
LAZY_MODULES = ("psutil", "google.protobuf.internal.python_message")
"""Modules imported (found, made) at once but run on their first attribute use
(`importlib.util.LazyLoader`), so every name is the real one."""
PYDANTIC_PLUGINS = "pydantic.plugin._loader"
BARE_PACKAGES = ("libp2p", "cryptography.x509")
LAZY_OBJECTS = {"multiaddr.resolvers.DNSResolver"}
"""Deferred classes whose objects are made when first used, not when constructed."""


class UnusedSubsystem(RuntimeError):
    """Raised on any use of a stand-in from `UNUSED_PACKAGES`."""


class _StandIn(Exception):  # noqa: N818 (a stand-in, named after what it replaces)
    """A name of an unused subsystem: never made (making one raises `UnusedSubsystem`).
    An Exception, because py-libp2p names some of them in `except` clauses (its
    net_stream catches `QUICStreamClosedError` on every read): a plain class there
    turned every stream reset into "catching classes that do not inherit from
    BaseException is not allowed"."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        cls = type(self)
        raise UnusedSubsystem(
            f"{cls.__module__}.{cls.__qualname__} is not loaded: gbr-node leaves py-libp2p's "
            "mDNS, TLS/AutoTLS, QUIC, WebSocket, circuit relay, DHT, private networks and "
            "metrics out (see gbr_node/lean.py)"
        )


class _StandInModule(types.ModuleType):
    """A package whose every public attribute is a `_StandIn` subclass, made on first use."""

    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        stand_in = type(name, (_StandIn,), {"__module__": self.__name__, "__qualname__": name})
        setattr(self, name, stand_in)
        return stand_in


class _Deferred(type):
    """A class of a deferred module; the real module is imported on first real use."""

    def real(cls) -> Any:
        """The real object of this name (its module is imported now if it was not)."""
        return getattr(_load(cls.__module__), cls.__qualname__)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if f"{cls.__module__}.{cls.__qualname__}" in LAZY_OBJECTS:
            return _LazyObject(cls, args, kwargs)
        return cls.real()(*args, **kwargs)

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return lambda *args, **kwargs: getattr(cls.real(), attr)(*args, **kwargs)

    def __instancecheck__(cls, obj: object) -> bool:
        # No object of the real class exists before its module is loaded.
        real = getattr(sys.modules.get(cls.__module__), cls.__qualname__, None)
        return isinstance(real, type) and not isinstance(real, _Deferred) and isinstance(obj, real)


class _LazyObject:
    """`cls(*args, **kwargs)` of a deferred class, made on its first attribute use."""

    def __init__(self, cls: _Deferred, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._lazy = (cls, args, kwargs)
        self._made: Any = None

    def __getattr__(self, attr: str) -> Any:  # only names the proxy itself lacks
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._made is None:
            cls, args, kwargs = self._lazy
            self._made = cls.real()(*args, **kwargs)
        return getattr(self._made, attr)


class _DeferredModule(types.ModuleType):
    """A deferred module: each public attribute is a `_Deferred` class, made on first use."""

    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        stand_in = _Deferred(name, (), {"__module__": self.__name__, "__qualname__": name})
        setattr(self, name, stand_in)
        return stand_in


class _NoPlugins(types.ModuleType):
    """pydantic's plugin loader, in a process that runs no pydantic plugin."""

    @staticmethod
    def get_plugins() -> tuple[()]:
        return ()


class _BarePackage(types.ModuleType):
    """A package of `BARE_PACKAGES`, its `__init__.py` run only when one of its names is used."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name not in ("__all__", "__version__"):
            raise AttributeError(name)
        if not self.__dict__.get("_gbr_completed"):
            self._gbr_completed = True
            _complete(self)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None


def _complete(package: types.ModuleType) -> None:
    """Run the package's `__init__.py` in `package`. For libp2p, keep how its logger was
    set up since (the file calls `setup_logging()`, which drops the handlers
    `p2p/logs.py` added)."""
    import logging

    logger = logging.getLogger("libp2p")
    kept = logger.handlers[:], logger.level, logger.propagate
    name = package.__name__
    code = importlib.machinery.SourceFileLoader(name, package.__file__ or "").get_code(name)
    if code is None:  # a source file always has code; typeshed allows None
        raise ImportError(f"{name}/__init__.py has no code")
    exec(code, package.__dict__)  # noqa: S102 (the library's own file)
    if name == "libp2p":
        logger.handlers[:], logger.level, logger.propagate = kept


class _Finder:
    """The `sys.meta_path` finder and loader of the three kinds (module docstring)."""

    def find_spec(
        self, name: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name.partition(".")[0] not in _TOP_LEVEL:  # asked for every import of the process
            return None
        if name in BARE_PACKAGES:
            real = importlib.machinery.PathFinder.find_spec(name, path)  # type: ignore[arg-type]  # the parent's __path__
            if real is None or real.origin is None:
                return None
            spec = importlib.machinery.ModuleSpec(name, self, origin=real.origin, is_package=True)  # type: ignore[arg-type]  # a loader by protocol: importlib.abc alone costs ~10 ms of imports
            spec.submodule_search_locations = real.submodule_search_locations
            spec.has_location = True
            return spec
        if name in LAZY_MODULES:
            real = importlib.machinery.PathFinder.find_spec(name, path)  # type: ignore[arg-type]  # as above
            if real is not None and real.loader is not None:
                real.loader = importlib.util.LazyLoader(real.loader)
            return real
        if name == PYDANTIC_PLUGINS:
            return importlib.machinery.ModuleSpec(name, self)  # type: ignore[arg-type]  # as above
        if name == "libp2p.utils.version" and _installed_version("libp2p") is not None:
            return importlib.machinery.ModuleSpec(name, self)  # type: ignore[arg-type]  # as above
        if any(_under(name, p) for p in UNUSED_PACKAGES + DEFERRED if p not in _allowed):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)  # type: ignore[arg-type]  # as above
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name == PYDANTIC_PLUGINS:
            return _NoPlugins(spec.name)
        if spec.name == "libp2p.utils.version":
            module = types.ModuleType(spec.name, "py-libp2p's version (gbr_node.lean)")
            agent = f"py-libp2p/{_installed_version('libp2p')}"
            module.get_agent_version = lambda: agent  # type: ignore[attr-defined]  # its one name
            return module
        if spec.name in BARE_PACKAGES:
            return _BarePackage(spec.name)
        if any(_under(spec.name, p) for p in DEFERRED):
            return _DeferredModule(spec.name)
        return _StandInModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        if isinstance(module, _BarePackage) and module.__name__ == "libp2p":
            importlib.import_module("libp2p.transport")
            from libp2p.utils.logging import setup_logging

            setup_logging()


def install() -> None:
    """Install the finder (idempotent). Has no effect on modules already imported."""
    # None in sys.modules makes that import fail (importlib docs)
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # typeshed: modules only
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def allow(package: str) -> None:
    """Load the real `package` (one of `UNUSED_PACKAGES` or `DEFERRED`) from now on: a
    profile asked for it (issue 23: `libp2p.relay` for relays and hole punching,
    `libp2p.discovery.mdns` for LAN discovery). Its stand-in modules are dropped
    from `sys.modules`, so the next import of any of them loads the library's
    own; names already taken from a stand-in (by `libp2p/__init__.py`) stay
    stand-ins. Idempotent; a no-op without `install()`.

    Raises:
        ValueError: `package` is not in `UNUSED_PACKAGES` or `DEFERRED`.
    """
    if package not in UNUSED_PACKAGES + DEFERRED:
        raise ValueError(f"lean.allow: {package!r} is not one of {UNUSED_PACKAGES + DEFERRED}")
    _allowed.add(package)
    for name, module in list(sys.modules.items()):
        # type(), not isinstance(): that reads `__class__`, which runs a lazy module
        if issubclass(type(module), _StandInModule | _DeferredModule) and _under(name, package):
            del sys.modules[name]


def _load(module: str) -> types.ModuleType:
    """The real `module` of a deferred package, imported now if it was not."""
    allow(next(p for p in DEFERRED if _under(module, p)))
    return importlib.import_module(module)


_allowed: set[str] = set()
_TOP_LEVEL = frozenset(
    name.partition(".")[0]
    for name in (*BARE_PACKAGES, *LAZY_MODULES, PYDANTIC_PLUGINS, *UNUSED_PACKAGES, *DEFERRED)
)
"""The top-level packages of every module the finder answers."""


def _installed_version(distribution: str) -> str | None:
    """The version in the name of the one `DISTRIBUTION-VERSION.dist-info` folder beside
    the package `distribution` (imported), or None when there is not exactly one."""
    import os

    package = sys.modules.get(distribution)
    files = getattr(package, "__file__", None)
    if files is None:
        return None
    folder = os.path.dirname(os.path.dirname(files))
    prefix = f"{distribution}-"
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    found = [
        n[len(prefix) : -len(".dist-info")]
        for n in names
        if n.startswith(prefix) and n.endswith(".dist-info")
    ]
    return found[0] if len(found) == 1 else None


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")
