"""The text patterns of profile values (`Field(pattern=...)` of the models) [pure].

They live apart from the models so that `config.validate` can say each in
words (its `_PATTERN_WORDS`) without building every model of `config.profile`:
a one-shot `gbr-node call` validates only `[node]` and `[peers]`
(`config.network`) and must not pay for the rest (issue 35).
"""

from __future__ import annotations

_ID = "[1-9A-HJ-NP-Za-km-z]{40,128}"
_HOST_TCP = r"/(ip4|ip6|dns|dns4|dns6)/[^/]+/tcp/\d{1,5}"
TCP_MULTIADDR = f"^{_HOST_TCP}$"
"""A plain TCP listen multiaddr, e.g. /ip4/127.0.0.1/tcp/4001 (no /p2p/ part)."""
DIAL_MULTIADDR = f"^{_HOST_TCP}(/p2p/{_ID})?$"
"""A TCP multiaddr to dial a peer at, with or without its /p2p/<peer ID> ending."""
RELAY_MULTIADDR = f"^{_HOST_TCP}/p2p/{_ID}$"
"""A relay to reserve a slot on: a TCP multiaddr ending in the relay's /p2p/<peer ID>."""
CIRCUIT_MULTIADDR = f"^{_HOST_TCP}/p2p/{_ID}/p2p-circuit(/p2p/{_ID})?$"
"""A peer reached through a relay (circuit relay v2): RELAY/p2p-circuit[/p2p/<peer ID>]."""
PEER_ADDR = f"({DIAL_MULTIADDR})|({CIRCUIT_MULTIADDR})"
"""Where to dial a trusted peer: a direct TCP multiaddr or a /p2p-circuit one."""
PEER_ID = f"^{_ID}$"
"""A base58btc libp2p peer ID as `gbr-node id` prints it, e.g. 12D3KooW..."""
TABLE_NAME = r"^[A-Za-z0-9_-]+$"
"""A `[peers.ALIAS]` or `[checks.NAME]` name."""
ABSOLUTE_PATH = r"^(/|~/|~$)[^\x00]*$"
"""An absolute path, or one from the home folder (`~/...`), without NUL bytes."""
MCP_SERVER_NAME = r"^[A-Za-z0-9]+([_-][A-Za-z0-9]+)*$"
"""An `[mcp_servers.NAME]` name (at most `profile.MCP_SERVER_NAME_MAX` characters): letters
and digits, single '_' or '-' between them (never "__", which separates NAME from TOOL, and
which a tool name shortened to 64 characters must keep: grants tell mounted tools by it)."""
LOOPBACK_URL = r"^http://(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost|\[::1\])(:\d{1,5})?(/\S*)?$"
"""A streamable-HTTP MCP endpoint on this machine, e.g. http://127.0.0.1:8000/mcp."""
