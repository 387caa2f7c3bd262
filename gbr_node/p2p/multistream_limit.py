"""multistream-select messages of at most 1024 bytes, as go-libp2p and js-libp2p read them.

py-libp2p 0.8.1 reads a multistream-select message (`read_delim`) with no
upper bound on its varint length, before any handshake: a stranger can
announce a gigabyte-long protocol name and send it, and the node buffers it
all (for up to the handshake time limit, at the speed of the link).
go-multistream and js-libp2p (`MAX_PROTOCOL_LENGTH`) refuse messages over
1024 bytes; `install()` makes py-libp2p's `MultiselectCommunicator` do the
same, for security, muxer and stream protocol negotiation alike. A longer
message fails the negotiation like any malformed one.
Suggested upstream change: `read_delim` reading with
`read_varint_prefixed_bytes_limited(reader, 1024)`.
"""

from __future__ import annotations

from libp2p.exceptions import ParseError
from libp2p.io.abc import Reader
from libp2p.protocol_muxer import multiselect_communicator
from libp2p.utils.varint import read_varint_prefixed_bytes_limited

__all__ = ["MAX_MESSAGE_BYTES", "install"]

MAX_MESSAGE_BYTES = 1024


async def _read_delim_bounded(reader: Reader) -> bytes:
    """`libp2p.utils.read_delim`, refusing a message longer than `MAX_MESSAGE_BYTES`."""
    message = await read_varint_prefixed_bytes_limited(reader, MAX_MESSAGE_BYTES)
    if not message.endswith(b"\n"):
        raise ParseError(f"multistream message not ending in a newline: {message[:64]!r}")
    return message[:-1]


def install() -> None:
    """Patch `MultiselectCommunicator.read` process-wide (idempotent)."""
    multiselect_communicator.read_delim = _read_delim_bounded  # type: ignore[attr-defined]  # the patch itself: the module imports read_delim, so it is not re-exported
