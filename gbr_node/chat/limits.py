"""Limits on what a trusted peer may make us hold, pure: the per-peer rate window, backoff.

`RateWindow` counts a peer's accepted messages in the last 60 seconds
(`[chat] messages_per_minute`); `backoff_s` is the outbox's wait before the
next attempt. Both take the time as an argument (seconds, any monotonic or
wall clock), so tests drive them without sleeping.
"""

from __future__ import annotations

from collections import deque

WINDOW_S = 60.0
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0


class RateWindow:
    """Sliding 60 s windows of accepted messages, one per peer ID.

    Only trusted peers reach it (the stream is refused before that otherwise),
    so it holds at most `limit` times per trusted peer.
    """

    def __init__(self) -> None:
        self._times: dict[str, deque[float]] = {}

    def allow(self, peer_id: str, limit: int, now: float) -> float | None:
        """None when `peer_id` may send one more message now (it is counted), else the
        seconds until it may (nothing counted)."""
        times = self._times.setdefault(peer_id, deque())
        while times and times[0] <= now - WINDOW_S:
            times.popleft()
        if len(times) >= limit:
            return max(0.0, times[0] + WINDOW_S - now)
        times.append(now)
        return None

    def forget(self, peer_id: str) -> None:
        """Take back the last message counted for `peer_id` (it was not kept after all)."""
        times = self._times.get(peer_id)
        if times:
            times.pop()


def backoff_s(attempts: int, *, hint_s: float | None = None) -> float:
    """The wait before attempt `attempts + 1` of a message: 1, 2, 4, ... 30 s, or the
    peer's own `retry_after_s` hint when it gave one (never less than 1 s, never more than 30 s)."""
    if hint_s is not None:
        return min(BACKOFF_MAX_S, max(BACKOFF_FIRST_S, hint_s))
    return min(BACKOFF_MAX_S, BACKOFF_FIRST_S * float(2 ** min(attempts, 10)))
