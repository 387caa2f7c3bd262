"""Plain-words reasons for py-libp2p dial and stream-opening failures.

py-libp2p wraps the real cause several layers deep (SwarmException around
OpenConnectionError around an ExceptionGroup around ConnectionRefusedError;
SecurityUpgradeFailure around PeerIDMismatchesPubkey; StreamFailure around
MultiselectClientError). `explain_dial_failure` walks that chain and names the
one cause a user can act on; `PeerUnreachable` messages are built from it.
"""

from __future__ import annotations

import errno

from libp2p.host.exceptions import StreamFailure
from libp2p.protocol_muxer.exceptions import MultiselectClientError, MultiselectError
from libp2p.security.noise.exceptions import PeerIDMismatchesPubkey
from libp2p.transport.exceptions import MuxerUpgradeFailure, SecurityUpgradeFailure

from gbr_node.errors import GbrError

__all__ = ["explain_dial_failure"]


def explain_dial_failure(exc: BaseException, *, protocol_id: str | None = None) -> str:
    """Return a short reason for a failed dial or stream negotiation.

    Reasons, first match in the exception chain wins: our own error (a relay's
    refusal, circuit.py, already in plain words), connection refused,
    other socket errors (with the OS's words), a different peer ID answered,
    the peer does not offer Noise, the Noise handshake failed, the peer does
    not offer Yamux, the peer does not support `protocol_id`, the connection
    closed during negotiation; otherwise the outermost exception's text.
    """
    chain = _causes(exc)
    for cause in chain:
        if isinstance(cause, GbrError) and cause is not exc:
            return str(cause)
    for cause in chain:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused (nothing listens on that port)"
    for cause in chain:
        if isinstance(cause, OSError) and cause.errno is not None:
            return f"network error: {cause.strerror or errno.errorcode.get(cause.errno)}"
    if any(isinstance(c, PeerIDMismatchesPubkey) for c in chain) or any(
        "Peer ID mismatch" in str(c) for c in chain if isinstance(c, SecurityUpgradeFailure)
    ):
        return "a different peer answered at that address (Noise proved another peer ID)"
    for cause in chain:
        if isinstance(cause, SecurityUpgradeFailure):
            if any(isinstance(c, (MultiselectError, MultiselectClientError)) for c in chain):
                return "the peer does not offer Noise (/noise) security"
            return "the Noise handshake failed"
        if isinstance(cause, MuxerUpgradeFailure):
            return "the peer does not offer Yamux (/yamux/1.0.0) multiplexing"
    if any(isinstance(c, StreamFailure) for c in chain):
        if any("not supported" in str(c) for c in chain):
            return f"the peer does not support protocol {protocol_id}"
        return f"the connection closed while negotiating {protocol_id}"
    return f"{type(exc).__name__}: {exc}"


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and every exception it wraps: causes, contexts, group and MultiError members."""
    seen: list[BaseException] = []
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop(0)
        if current is None or any(current is known for known in seen):
            continue
        seen.append(current)
        pending.extend([current.__cause__, current.__context__])
        pending.extend(getattr(current, "exceptions", None) or ())  # ExceptionGroup
        pending.extend(getattr(current, "errors", None) or ())  # libp2p MultiError
    return seen
