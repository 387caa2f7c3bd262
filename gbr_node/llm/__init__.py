"""The model side: OpenAI-compatible chat completions, streamed.

Pure parts: `sse` (bytes to SSE events), `deltas` (chunks to text, reasoning
and tool calls), `events` (what the client yields), `settings` (endpoint
settings and the retry rule), `choice` (which endpoint: profile, environment,
flags). I/O parts: `client` (`ModelClient`), the only importer of httpx in
gbr-node; `local` (the embedded llama.cpp server, issue 8) and
`local_server` (the child process it runs). Nothing is re-exported here, so
importing a pure part never loads httpx or trio.
"""
