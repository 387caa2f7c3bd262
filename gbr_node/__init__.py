"""gbr-node: a peer-to-peer AI agent node (libp2p Noise + Yamux, sandboxed tools)."""

__version__ = "0.1.0"
