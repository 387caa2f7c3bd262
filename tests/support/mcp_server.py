"""A small MCP server for tests, written with the official SDK's `MCPServer` (GBR-MCP-01).

The third-party servers the tests mount (mcp-server-time, mcp-server-git) cannot
show what a test must see from the server's side: that a call was cancelled,
that a crash is survived. This one can. Tools:

- `wait(seconds)`: writes `MARKS/started`, sleeps; when cancelled it writes
  `MARKS/cancelled` (the time, `time.time()`) before giving up;
- `crash()`: prints a line to stderr and exits with status 3 at once;
- `big(chars)`: returns `chars` characters of text, on numbered lines;
- `echo(text)`: returns `text`;
- `env(name)`: returns the environment variable `name` ("" when unset).

At start it writes its process ID to `MARKS/pid`.

    python -m tests.support.mcp_server MARKS            # stdio
    python -m tests.support.mcp_server MARKS --http     # streamable HTTP on 127.0.0.1,
                                                        # the URL written to MARKS/url
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

MARKS = Path(sys.argv[1])
server = MCPServer("gbr-test-server")


@server.tool()
async def wait(seconds: float) -> str:
    """Sleep `seconds` seconds, noting the start and any cancellation in MARKS."""
    (MARKS / "started").write_text(str(time.time()))
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        (MARKS / "cancelled").write_text(str(time.time()))
        raise
    return f"waited {seconds} s"


@server.tool()
def crash() -> str:
    """Exit the server process at once, with status 3."""
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def big(chars: int) -> str:
    """`chars` characters of text on numbered lines of 80."""
    lines, left, n = [], chars, 0
    while left > 0:
        n += 1
        line = f"{n:08d} " + "x" * 70 + "\n"
        lines.append(line[:left])
        left -= len(line)
    return "".join(lines)


@server.tool()
def echo(text: str) -> str:
    """Return `text`."""
    return text


@server.tool()
def env(name: str) -> str:
    """The value of environment variable `name`, "" when unset."""
    return os.environ.get(name, "")


async def _serve_http() -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning")
    (MARKS / "url").write_text(f"http://127.0.0.1:{port}/mcp")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    MARKS.mkdir(parents=True, exist_ok=True)
    (MARKS / "pid").write_text(str(os.getpid()))
    if "--http" in sys.argv:
        anyio.run(_serve_http)
    else:
        server.run()
