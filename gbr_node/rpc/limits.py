"""`Limits`: the bounds of `/gbr/mcp/1.0.0` and `/gbr/chat/1.0.0` exchanges, both sides.

Apart from `rpc.server` so that a process that only calls (`gbr-node call`)
does not load the serving side (issue 35, tests/test_startup.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from gbr_node.config.network import NodeConfig

_NODE_DEFAULTS = NodeConfig()


@dataclass(frozen=True)
class Limits:
    """Limits of one exchange; defaults are `NodeConfig`'s (the profile's `[node]` table).

    Attributes:
        max_message_bytes: cap on a request body and a response body (bytes).
        max_concurrent_calls_per_peer: streams served at once per peer ID;
            more get BUSY at once, before their request is read.
        call_timeout_s: time limit of one method call (seconds) -> CALL_TIMEOUT.
        read_timeout_s: time to receive the whole request frame, and again to
            write the response (seconds) -> CALL_TIMEOUT / stream closed.
    """

    max_message_bytes: int = _NODE_DEFAULTS.max_message_bytes
    max_concurrent_calls_per_peer: int = _NODE_DEFAULTS.max_concurrent_calls_per_peer
    call_timeout_s: float = _NODE_DEFAULTS.call_timeout_s
    read_timeout_s: float = _NODE_DEFAULTS.read_timeout_s

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be > 0, got {getattr(self, name)!r}")

    @classmethod
    def from_config(cls, node: NodeConfig) -> Limits:
        """The limits of a profile's `[node]` table."""
        return cls(
            max_message_bytes=node.max_message_bytes,
            max_concurrent_calls_per_peer=node.max_concurrent_calls_per_peer,
            call_timeout_s=node.call_timeout_s,
            read_timeout_s=node.read_timeout_s,
        )
