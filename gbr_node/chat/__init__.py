"""Agents that talk to each other: `/gbr/chat/1.0.0` (EVD-AI-02, issue 19).

`messages` (the wire, pure), `records` and `limits` and `present` (pure),
`store` (the SQLite inbox and outbox), `server` (receiving, on the shared
`rpc.server.StreamServer` admission), `outbox` (durable delivery), `replies`
(our agent answering a peer on "reply"), `desk` (the node's chat, tying them),
`cli` (`gbr-node inbox`). The libp2p side is `p2p/chat.py`.
"""
