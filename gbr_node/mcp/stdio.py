"""stdin/stdout pipes for the SDK's `stdio_server`, read and written on the event loop.

`mcp.server.stdio.stdio_server()` reads stdin and writes stdout through
`anyio.wrap_file`: every line costs a hand-off to a worker thread and back,
which on a loaded machine is most of an MCP round trip (scripts/bench/mcp.py
measured the SDK's own stdio floor at 5-8 ms with threads and 3-4 ms without,
load average 10 on 2 cores). The SDK takes explicit streams instead; this
module gives it trio `FdStream`s, and then does what the SDK does for its own
streams: the wire moves to private descriptors, fd 0 reads /dev/null and fd 1
points at stderr, so nothing but the server can read the client's requests or
write to the client (a stray `print` lands on stderr).

Only pipes and sockets get this (what an MCP client connects); a terminal or a
file keeps the SDK's own streams, since `FdStream` makes its descriptor
non-blocking and a terminal's would stay so for the shell after us.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

import trio

_CHUNK = 65536


class _Lines:
    """The part of `anyio.AsyncFile[str]` that `stdio_server` uses: async iteration
    over lines (stdin) and `write` / `flush` (stdout), on one descriptor."""

    def __init__(self, fd: int) -> None:
        self._stream = trio.lowlevel.FdStream(fd)
        self._pending = b""

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while (end := self._pending.find(b"\n")) < 0:
            chunk = await self._stream.receive_some(_CHUNK)
            if not chunk:
                if self._pending:
                    line, self._pending = self._pending, b""
                    return line.decode("utf-8", "replace")
                raise StopAsyncIteration
            self._pending += chunk
        line, self._pending = self._pending[: end + 1], self._pending[end + 1 :]
        return line.decode("utf-8", "replace")

    async def write(self, text: str) -> None:
        await self._stream.send_all(text.encode("utf-8"))

    async def flush(self) -> None:
        """Nothing is buffered: `write` has handed every byte to the pipe."""

    def close(self) -> None:
        """Close the descriptor."""
        self._stream.close()  # type: ignore[attr-defined]  # stale trio-typing stubs (see pyproject)


def _is_pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextmanager
def claimed_stdio() -> Iterator[tuple[_Lines, _Lines] | None]:
    """Yield (stdin, stdout) streams for `stdio_server`, or None when stdin or stdout
    is not a pipe or socket (then use the SDK's own). While inside, fd 0 reads
    /dev/null and fd 1 writes to stderr; both are put back on exit."""
    if os.name != "posix" or not (_is_pipe_or_socket(0) and _is_pipe_or_socket(1)):
        yield None
        return
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    streams = _Lines(wire_in), _Lines(wire_out)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        yield streams
    finally:
        for stream in streams:
            stream.close()
        os.close(null)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
