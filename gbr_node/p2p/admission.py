"""What inbound connections may make a node hold, and who gives way when it is full (GBR-DOS-01).

Pure: numbers and tables, no sockets, no trio, no libp2p. `GbrSwarm`
(swarm.py) drives them for every inbound TCP connection:

0. Before accept: a TCP connection that has sent nothing waits in the
   kernel (TCP_DEFER_ACCEPT, up to `defer_accept_s`, in a listen backlog of
   `listen_backlog`); the node holds no descriptor, task or slot for it. A
   libp2p dialer speaks first (multistream-select), so it is accepted at once.
1. Handshake: from TCP accept until Noise and Yamux are done, the connection
   has a slot in `Handshakes`, at most `max_handshakes_per_address` per
   remote IP address and `max_handshakes` in all, and at most
   `handshake_timeout_s` seconds. When a new connection finds no room, an
   older one in its handshake gives way (`Handshakes.admit`): first one that
   has sent nothing yet, then one from the address holding the most slots,
   then the oldest. Sockets that never send a byte are the cheapest flood
   there is; they are also the first to go, so a peer that speaks gets in.
2. Established, untrusted (its Noise-authenticated peer ID is not in the
   profile): at most `max_untrusted` at once, each closed
   `untrusted_grace_s` after its handshake, whatever it does, with at most
   `max_streams_untrusted` streams and `untrusted_receive_bytes` of unread
   data (past that it is no longer read; its TCP receive buffer is fixed at
   `untrusted_socket_receive_bytes` once it is known untrusted, which Linux
   doubles, so the kernel holds little more for it). It exists only to be
   told "unauthorized".
3. Established, trusted: never counted against the above (room is always
   left for them); closed after `idle_timeout_s` without a stream. One peer
   ID keeps up to `max_connections_per_peer` connections (the processes that
   share an identity), the idlest and oldest trimmed beyond that.
4. Backoff: an address whose untrusted peers found no room (`max_untrusted`
   reached) three times, each within `max_backoff_s` of the one before, is
   refused at accept, before any handshake work, for `backoff_s`, doubled at
   each new refusal for room up to `max_backoff_s` (`Backoff`). An address a
   trusted peer was connected from within `idle_timeout_s` is never refused:
   on an address shared with an attacker (same host, same NAT), the node pays
   the strangers' handshakes rather than lock its trusted peer out. Both
   tables are bounded (`max_backoff_addresses`).

Outbound connections (this node dialed them) are not limited here.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

__all__ = ["Backoff", "ConnectionLimits", "Handshakes", "PendingHandshake"]

YAMUX_WINDOW_BYTES = 256 * 1024
"""The Yamux receive window a stream starts with (py-libp2p DEFAULT_WINDOW_SIZE): what a
peer that follows flow control can send on a stream this node never reads."""


@dataclass(frozen=True)
class ConnectionLimits:
    """Bounds on inbound connections (sizes in bytes, times in seconds); see the module docstring.

    Defaults: an untrusted peer costs at most ~1 MiB while it lasts, so
    `max_untrusted` of them stay within ~20 MiB; handshakes cost a few KiB each.
    `defer_accept_s` is whole seconds (Linux counts it in SYN-ACK retransmissions,
    sent after 1, 3, 7, 15 s: 3 s is two); `listen_backlog` is capped by the
    kernel's `net.core.somaxconn`, and silent connections past it are accepted
    as they arrive (SYN cookies) and handled by the handshake limits.
    """

    defer_accept_s: int = 3
    listen_backlog: int = 1024
    handshake_timeout_s: float = 5.0
    max_handshakes: int = 64
    max_handshakes_per_address: int = 8
    max_untrusted: int = 32
    untrusted_grace_s: float = 3.0
    max_streams_untrusted: int = 2
    untrusted_receive_bytes: int = 2 * YAMUX_WINDOW_BYTES + 128 * 1024
    untrusted_socket_receive_bytes: int = 64 * 1024
    max_streams_trusted: int = 256
    trusted_receive_bytes: int = 64 * 1024 * 1024
    idle_timeout_s: float = 300.0
    max_connections_per_peer: int = 8
    backoff_s: float = 1.0
    max_backoff_s: float = 16.0
    max_backoff_addresses: int = 4096

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if value < 0 or (value == 0 and name != "untrusted_grace_s"):
                raise ValueError(f"ConnectionLimits.{name} must be > 0, got {value!r}")
        if self.max_handshakes_per_address > self.max_handshakes:
            raise ValueError("ConnectionLimits.max_handshakes_per_address exceeds max_handshakes")
        if self.backoff_s > self.max_backoff_s:
            raise ValueError("ConnectionLimits.backoff_s exceeds max_backoff_s")


class PendingHandshake(Protocol):
    """What `Handshakes` needs to know of a connection in its handshake."""

    @property
    def address(self) -> str:
        """The remote IP address."""
        ...

    @property
    def has_spoken(self) -> bool:
        """True once any byte arrived from the remote end."""
        ...


EntryT = TypeVar("EntryT", bound=PendingHandshake)


class Handshakes(Generic[EntryT]):
    """The connections in their handshake, by remote address, oldest first.

    `admit(entry)` always takes the newcomer in and names who must give way
    to keep within the limits; `release(entry)` forgets an entry whose
    handshake ended (done, failed, timed out or given way).
    """

    def __init__(self, max_total: int, max_per_address: int) -> None:
        if not 0 < max_per_address <= max_total:
            raise ValueError(f"need 0 < max_per_address <= max_total, got {max_per_address}")
        self.max_total = max_total
        self.max_per_address = max_per_address
        self._by_address: dict[str, list[tuple[int, EntryT]]] = {}
        self._count = 0
        self._admitted = 0  # serial number of the next entry: its age

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[EntryT]:
        for entries in self._by_address.values():
            for _serial, entry in entries:
                yield entry

    def count(self, address: str) -> int:
        """Entries from `address` right now."""
        return len(self._by_address.get(address, ()))

    def admit(self, entry: EntryT) -> EntryT | None:
        """Add `entry`; return the entry that must give way (already removed), or None.

        From the newcomer's own address when that address is at its limit,
        else from everyone when the table is full: one that has not spoken
        before one that has, then one of the address holding the most, then
        the oldest.
        """
        if self.count(entry.address) >= self.max_per_address:
            candidates = list(self._by_address[entry.address])
        elif self._count >= self.max_total:
            candidates = [item for entries in self._by_address.values() for item in entries]
        else:
            candidates = []
        victim = None
        if candidates:
            _serial, victim = min(
                candidates,
                key=lambda item: (item[1].has_spoken, -self.count(item[1].address), item[0]),
            )
            self.release(victim)
        self._by_address.setdefault(entry.address, []).append((self._admitted, entry))
        self._admitted += 1
        self._count += 1
        return victim

    def release(self, entry: EntryT) -> None:
        """Forget `entry`; a no-op when it is not in the table (already given way)."""
        entries = self._by_address.get(entry.address)
        if entries is None or not any(e is entry for _serial, e in entries):
            return
        entries[:] = [item for item in entries if item[1] is not entry]
        self._count -= 1
        if not entries:
            del self._by_address[entry.address]


@dataclass
class _Offences:
    strikes: int = 0
    last_at: float = 0.0
    until: float = 0.0  # refused before this
    delay: float = 0.0  # of the last refusal


class Backoff:
    """Remote addresses refused at accept for a while, and addresses vouched for (point 4).

    Times are seconds on any monotonic clock, passed in as `now`. Each
    `offend` is a strike; from the `strikes`-th within `max_s` seconds of the
    one before, the address is refused: for `first_s`, then twice as long at
    each strike after a refusal ended, up to `max_s`. Strikes while refused
    change nothing (the connections of one burst count once), and an address
    `max_s` seconds past its last strike and refusal starts afresh. `vouch`
    exempts an address for `vouch_s` seconds. Each table keeps at most
    `max_addresses` addresses, forgetting the least recently touched first:
    more addresses than that cost an attacker nothing but their refusal, and
    cost the node no more memory.
    """

    def __init__(
        self, first_s: float, max_s: float, vouch_s: float, max_addresses: int, strikes: int = 3
    ) -> None:
        if not 0 < first_s <= max_s or vouch_s <= 0 or max_addresses <= 0 or strikes <= 0:
            raise ValueError(
                "need 0 < first_s <= max_s and vouch_s, max_addresses, strikes > 0, got "
                f"{first_s}, {max_s}, {vouch_s}, {max_addresses}, {strikes}"
            )
        self.first_s = first_s
        self.max_s = max_s
        self.vouch_s = vouch_s
        self.max_addresses = max_addresses
        self.strikes = strikes
        self._offences: OrderedDict[str, _Offences] = OrderedDict()
        self._vouched: OrderedDict[str, float] = OrderedDict()  # address -> until

    def __len__(self) -> int:
        """Addresses held in both tables."""
        return len(self._offences) + len(self._vouched)

    def offend(self, address: str, now: float) -> float:
        """A strike against `address`; how long it is now refused (seconds; 0: not refused)."""
        record = self._current(address, now) or _Offences()
        if now < record.until:
            return record.until - now
        record.strikes += 1
        record.last_at = now
        if record.strikes >= self.strikes:
            record.delay = min(2 * record.delay, self.max_s) if record.delay else self.first_s
            record.until = now + record.delay
        _touch(self._offences, address, record, self.max_addresses)
        return record.until - now if now < record.until else 0.0

    def vouch(self, address: str, now: float) -> None:
        """A trusted peer authenticated from `address` at `now`: never refuse it for a while."""
        _touch(self._vouched, address, now + self.vouch_s, self.max_addresses)
        self._offences.pop(address, None)

    def refuses(self, address: str, now: float) -> bool:
        """True when a new connection from `address` must be refused at `now`."""
        vouched = self._vouched.get(address)
        if vouched is not None:
            if now < vouched:
                return False
            del self._vouched[address]
        record = self._current(address, now)
        return record is not None and now < record.until

    def _current(self, address: str, now: float) -> _Offences | None:
        """The record of `address`, forgotten (None) once it is `max_s` old."""
        record = self._offences.get(address)
        if record is not None and now >= max(record.last_at, record.until) + self.max_s:
            del self._offences[address]
            return None
        return record


ValueT = TypeVar("ValueT")


def _touch(table: OrderedDict[str, ValueT], key: str, value: ValueT, max_size: int) -> None:
    """Set `table[key]` as the most recent entry, dropping the oldest beyond `max_size`."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > max_size:
        table.popitem(last=False)
