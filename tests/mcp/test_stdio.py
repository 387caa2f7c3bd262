"""The stdio pipes `gbr-node mcp` hands to the SDK's `stdio_server` (GBR-MCP-01)."""

from __future__ import annotations

import os

import trio

from gbr_node.mcp.stdio import _Lines


async def test_lines_are_read_whole_across_chunks_and_a_last_partial_line_is_kept():
    read_fd, write_fd = os.pipe()
    lines = _Lines(read_fd)
    got = []

    async def reader():
        async for line in lines:
            got.append(line)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        for chunk in (b'{"a"', b': 1}\n{"b": "\xc3', b'\xa9"}\n\n', b'{"tail": 1}'):
            os.write(write_fd, chunk)
            await trio.sleep(0.01)
        os.close(write_fd)
    lines.close()
    assert got == ['{"a": 1}\n', '{"b": "é"}\n', "\n", '{"tail": 1}']


async def test_writes_reach_the_pipe_whole():
    read_fd, write_fd = os.pipe()
    out = _Lines(write_fd)
    await out.write('{"jsonrpc": "2.0"}\n' * 1000)
    await out.flush()
    out.close()
    data = b""
    while chunk := os.read(read_fd, 65536):
        data += chunk
    os.close(read_fd)
    assert data.decode().splitlines() == ['{"jsonrpc": "2.0"}'] * 1000
