"""Keep py-libp2p's log records off the user's terminal (issue 3, py-libp2p pitfalls).

py-libp2p 0.8.1 logs harmless races at ERROR level. Importing it leaves the
`libp2p` logger with no handler and `propagate = False`, so Python's
last-resort handler prints every WARNING and above to stderr. A few modules
(`libp2p.network.connection.swarm_connection`) also log through the root
logger with `logging.warning(...)`. `route_libp2p_logs` sends both kinds of
record to one handler the caller chooses, typically the node's log file.
An ERROR that only says a peer reset its TCP connection while we wrote to it
(`ROUTINE_ERRORS`; Yamux's `handle_incoming` logs it when a peer hangs up
with data of ours unread) is a routine event: it is lowered to INFO.
"""

from __future__ import annotations

import logging
import os

import libp2p

__all__ = ["route_libp2p_logs"]

_LIBP2P_DIR = os.path.dirname(os.path.abspath(libp2p.__file__)) + os.sep

ROUTINE_ERRORS = ("TCP connection reset by remote peer",)
"""Texts (py-libp2p 0.8.1's `ConnectionClosedError` of libp2p/io/trio.py) marking an
ERROR record that reports a routine event."""


class _Routed(logging.Handler):
    """Hands libp2p's records at `level` and above to `target`, routine ERRORs as INFO."""

    def __init__(self, target: logging.Handler, level: int) -> None:
        super().__init__()
        self.target = target
        self.min_level = level

    def handle(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and any(
            text in record.getMessage() for text in ROUTINE_ERRORS
        ):
            record.levelno, record.levelname = logging.INFO, "INFO"
        if record.levelno >= max(self.min_level, self.target.level):
            self.target.handle(record)
        return True


class _DivertLibp2pRecords(logging.Filter):
    """Root-logger filter: hands records emitted from libp2p's files to `handler` instead."""

    def __init__(self, handler: _Routed) -> None:
        super().__init__("gbr_node.p2p.logs")
        self.handler = handler

    def filter(self, record: logging.LogRecord) -> bool:
        if record.pathname.startswith(_LIBP2P_DIR):
            self.handler.handle(record)
            return False
        return True


def route_libp2p_logs(handler: logging.Handler | None, level: int = logging.WARNING) -> None:
    """Send py-libp2p's log records at `level` and above to `handler` only.

    `handler=None` discards them (a `logging.NullHandler`). The `libp2p`
    logger gets `handler` as its only handler and stops propagating, and its
    child loggers lose the stderr handlers `LIBP2P_DEBUG` may have given them;
    records that libp2p modules send through the root logger are diverted by
    a filter on the root logger. Calling again replaces the previous routing, so the
    setting is process-wide and the last call wins. Records of other loggers
    are not touched.
    """
    target = _Routed(handler if handler is not None else logging.NullHandler(), level)
    for name, child in logging.root.manager.loggerDict.items():
        if name.startswith("libp2p.") and isinstance(child, logging.Logger):
            child.handlers.clear()  # set up by LIBP2P_DEBUG, printing to stderr
            child.propagate = True
    lib_logger = logging.getLogger("libp2p")
    lib_logger.handlers.clear()
    lib_logger.addHandler(target)
    lib_logger.setLevel(level)
    lib_logger.propagate = False
    root = logging.getLogger()
    for old in [f for f in root.filters if isinstance(f, _DivertLibp2pRecords)]:
        root.removeFilter(old)
    root.addFilter(_DivertLibp2pRecords(target))
