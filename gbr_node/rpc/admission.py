"""Admission of inbound streams, for any protocol served one stream at a time (GBR-DOS-01).

Two pieces that a server of `/gbr/mcp/1.0.0` uses, and that a server of
another protocol over a `ByteStream` (`/gbr/chat/1.0.0`) can use the same way:

- `PeerSlots`: how many streams each peer ID has being served, with a limit
  checked before anything of the stream is read; a stream over the limit is
  refused at once.
- `unless_abandoned(stream, work)`: runs the work a request asked for while
  watching its stream; when the stream breaks (the caller was killed, reset
  the stream, or its connection dropped), the work is cancelled at once
  instead of holding its slot, and its programs, until it ends by itself.
  A stream that signals its own break (`cancel_on_break`) costs no task.

Trust comes first: a server asks whether the peer is trusted before it takes
a slot and before it reads a byte, so a stranger can make it hold nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from gbr_node.errors import GbrError, StreamBroken
from gbr_node.rpc.stream import RECEIVE_CHUNK, ByteStream

__all__ = ["PeerSlots", "unless_abandoned"]

ResultT = TypeVar("ResultT")


class PeerSlots:
    """Per-peer counts of streams being served, each peer capped separately.

    `take_nowait` a slot before reading a stream; `give_back` it (in a
    `finally`) once the stream is answered or given up.
    """

    def __init__(self) -> None:
        self._held: dict[str, int] = {}

    def held(self, peer_id: str) -> int:
        """Slots `peer_id` holds right now."""
        return self._held.get(peer_id, 0)

    def take_nowait(self, peer_id: str, limit: int) -> bool:
        """Take one slot of `peer_id` if it holds fewer than `limit`; False (nothing
        taken) when it is at its limit. Never waits."""
        held = self._held.get(peer_id, 0)
        if held >= limit:
            return False
        self._held[peer_id] = held + 1
        return True

    def give_back(self, peer_id: str) -> None:
        """Give back a slot taken by `take_nowait`."""
        held = self._held[peer_id] - 1
        if held:
            self._held[peer_id] = held
        else:
            del self._held[peer_id]


async def unless_abandoned(stream: ByteStream, work: Callable[[], Awaitable[ResultT]]) -> ResultT:
    """Return `await work()`, cancelling it if `stream` breaks meanwhile.

    Call once the request has been read. End of stream is not abandonment (a
    caller may close its sending side and wait for the answer); a reset or a
    dropped connection is. Cancelling `work` is how a running command learns
    to stop (its process group is killed, tools/process.py).

    A stream with `cancel_on_break(scope)` (the libp2p adapter) says itself
    when it breaks; any other stream is read meanwhile by a second task, and
    whatever more the caller sends is discarded.

    Raises:
        StreamBroken: the stream broke before `work` finished; `work` was
            cancelled and its result, if any, is lost.
    """
    cancel_on_break = getattr(stream, "cancel_on_break", None)
    if cancel_on_break is None:
        return await _reading_meanwhile(stream, work)
    with trio.CancelScope() as scope:
        cancel_on_break(scope)
        return await work()
    raise StreamBroken("the caller went away: its stream was reset")


async def _reading_meanwhile(stream: ByteStream, work: Callable[[], Awaitable[ResultT]]) -> ResultT:
    broken: BaseException | None = None

    async def watch(scope: trio.CancelScope) -> None:
        nonlocal broken
        try:
            while await stream.receive_some(RECEIVE_CHUNK):
                pass
        except (GbrError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            broken = exc
            scope.cancel()

    failure: Exception | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch, nursery.cancel_scope)
        try:
            result = await work()
        except Exception as exc:  # raised as is below, not inside an ExceptionGroup
            failure = exc
        nursery.cancel_scope.cancel()
    if broken is not None:
        raise StreamBroken(f"the caller went away: {broken}") from broken
    if failure is not None:
        raise failure
    return result
