"""JSON-RPC 2.0 over length-prefixed frames: the `/gbr/mcp` plane, transport-free.

Pure cores (no trio, no I/O): `codes` (error codes and the errors a caller
sees), `messages` (the codec and MCP shapes), `framing` (unsigned-varint
frames). Over any `stream.ByteStream`: for `/gbr/mcp/1.0.0`, one request per
stream, `server` (`RpcServer`, `ToolHost`, `Limits`) and `client` (`call`,
`notify`, `list_tools`, `call_tool`); for `/gbr/mcp/1.1.0`, many requests in
flight on one stream, `pipelined` (`serve_pipelined`) and `session`
(`CallSession`), both writing through `writer` (`FrameWriter`). Only `p2p/`
knows that the stream is a libp2p stream. The wire contracts are
protocols/gbr-mcp-1.0.0.md and protocols/gbr-mcp-1.1.0.md.
"""
