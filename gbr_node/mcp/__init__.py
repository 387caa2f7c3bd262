"""MCP both ways (GBR-MCP-01): `gbr-node mcp` serves the node's and its peers' tools to MCP
clients over stdio, and `[mcp_servers.NAME]` mounts MCP servers as the node's tools.

The official `mcp` SDK speaks the protocol; it is imported only by `client.py` and
`server.py`, and only when a server is mounted or `gbr-node mcp` runs (it costs ~20 MB).
"""
