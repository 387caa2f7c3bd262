"""What a relay may hold for others, and who gives way when it is full (issue 23, GBR-DOS-01).

Pure: peer IDs are strings, times are seconds on any clock the caller passes
in as `now`; no sockets, no trio, no libp2p. `RelayService` (relay.py) asks it
before doing any work for a circuit relay v2 request
(https://github.com/libp2p/specs/blob/master/relay/circuit-v2.md):

- RESERVE: a peer the relay serves (`[node] relay_for`: "trusted", the
  profile's peers, or "any") gets a reservation for `reservation_s` seconds;
  one it already holds is renewed. At most `max_reservations` are held; when
  full, a trusted newcomer takes the place of the oldest untrusted holder, an
  untrusted one is refused (RESOURCE_LIMIT_EXCEEDED).
- CONNECT: the source must be served as above and the target must hold a
  reservation (NO_RESERVATION otherwise). At most `max_circuits` circuits are
  open at once, `circuits_per_peer` of them from one source; when full, a
  trusted source's circuit takes the place of the oldest untrusted one.

The refusals are the spec's status names; relay.py sends their codes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = ["Decision", "HopLimits", "RelayBook"]

PERMISSION_DENIED = "PERMISSION_DENIED"
RESOURCE_LIMIT_EXCEEDED = "RESOURCE_LIMIT_EXCEEDED"
NO_RESERVATION = "NO_RESERVATION"


@dataclass(frozen=True)
class HopLimits:
    """A relay's bounds (`[node] relay_*` keys; bytes and seconds)."""

    max_reservations: int = 16
    max_circuits: int = 8
    circuits_per_peer: int = 4
    circuit_bytes: int = 128 * 1024 * 1024
    circuit_s: float = 3600.0
    reservation_s: float = 3600.0

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if getattr(self, name) <= 0:
                raise ValueError(f"HopLimits.{name} must be > 0, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class Decision:
    """The answer to a request: `refused` is None (accepted) or a spec status name;
    `evict` names the reservation (a peer ID) or circuit (its key) that must give way."""

    refused: str | None = None
    evict: Hashable | None = None


@dataclass
class _Reservation:
    expires_at: float
    trusted: bool
    since: float


@dataclass
class _Circuit:
    source: str
    target: str
    trusted: bool
    since: float


@dataclass
class RelayBook:
    """The reservations and circuits a relay holds (see the module docstring).

    `serves_any` is `[node] relay_for = "any"`; otherwise only peers the caller
    says are trusted are served.
    """

    limits: HopLimits
    serves_any: bool = False
    _reservations: dict[str, _Reservation] = field(default_factory=dict)
    _circuits: dict[Hashable, _Circuit] = field(default_factory=dict)

    def reserve(self, peer: str, trusted: bool, now: float) -> Decision:
        """A RESERVE from `peer` (its Noise-authenticated peer ID); on acceptance the
        reservation is held until `expires_at(peer)`."""
        if not (trusted or self.serves_any):
            return Decision(PERMISSION_DENIED)
        self._expire(now)
        evict = None
        held = self._reservations.get(peer)
        if held is None and len(self._reservations) >= self.limits.max_reservations:
            evict = _oldest_untrusted(self._reservations) if trusted else None
            if evict is None:
                return Decision(RESOURCE_LIMIT_EXCEEDED)
            del self._reservations[evict]
        since = held.since if held else now
        self._reservations[peer] = _Reservation(now + self.limits.reservation_s, trusted, since)
        return Decision(evict=evict)

    def expires_at(self, peer: str) -> float | None:
        """When `peer`'s reservation ends (the caller's clock), or None without one."""
        held = self._reservations.get(peer)
        return held.expires_at if held else None

    def open_circuit(
        self, key: Hashable, source: str, target: str, trusted: bool, now: float
    ) -> Decision:
        """A CONNECT from `source` (`trusted`: the profile trusts it) to `target`; on
        acceptance the circuit is held under `key` until `close_circuit(key)`."""
        if not (trusted or self.serves_any):
            return Decision(PERMISSION_DENIED)
        self._expire(now)
        if target not in self._reservations:
            return Decision(NO_RESERVATION)
        mine = sum(1 for c in self._circuits.values() if c.source == source)
        if mine >= min(self.limits.circuits_per_peer, self.limits.max_circuits):
            return Decision(RESOURCE_LIMIT_EXCEEDED)
        evict = None
        if len(self._circuits) >= self.limits.max_circuits:
            evict = _oldest_untrusted(self._circuits) if trusted else None
            if evict is None:
                return Decision(RESOURCE_LIMIT_EXCEEDED)
            del self._circuits[evict]
        self._circuits[key] = _Circuit(source, target, trusted, now)
        return Decision(evict=evict)

    def close_circuit(self, key: Hashable) -> None:
        """Forget a circuit (it ended, or gave way); a no-op for an unknown key."""
        self._circuits.pop(key, None)

    def holds(self, peer: str, now: float) -> bool:
        """True while `peer` has a reservation or is an end of an open circuit: the
        relay keeps its connection open (no idle close, no untrusted grace)."""
        held = self._reservations.get(peer)
        if held is not None and now < held.expires_at:
            return True
        return any(peer in (c.source, c.target) for c in self._circuits.values())

    def statistics(self) -> tuple[int, int]:
        """(reservations held, circuits open)."""
        return len(self._reservations), len(self._circuits)

    def _expire(self, now: float) -> None:
        for peer in [p for p, r in self._reservations.items() if now >= r.expires_at]:
            del self._reservations[peer]


KeyT = TypeVar("KeyT", bound=Hashable)


def _oldest_untrusted(table: Mapping[KeyT, _Reservation | _Circuit]) -> KeyT | None:
    candidates = [(entry.since, key) for key, entry in table.items() if not entry.trusted]
    return min(candidates, key=lambda item: item[0])[1] if candidates else None
