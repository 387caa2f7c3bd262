"""JSON-RPC 2.0 over length-prefixed frames: the `/gbr/mcp/1.0.0` plane, transport-free.

Pure cores (no trio, no I/O): `codes` (error codes and the errors a caller
sees), `messages` (the codec and MCP shapes), `framing` (unsigned-varint
frames). Over any `stream.ByteStream`: `server` (`RpcServer`, `ToolHost`,
`Limits`) and `client` (`call`, `notify`, `list_tools`, `call_tool`).
Only `p2p/` knows that the stream is a libp2p stream. The wire contract is
protocols/gbr-mcp-1.0.0.md.
"""
