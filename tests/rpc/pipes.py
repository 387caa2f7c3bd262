"""Helpers for the `/gbr/mcp/1.1.0` tests: a host whose calls wait for the test, and one
served stream driven frame by frame."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from gbr_node.rpc.framing import FrameDecoder, encode_frame
from gbr_node.rpc.pipelined import serve_pipelined
from gbr_node.rpc.server import StreamServer

PEER = "12D3KooWPipelinedPeer"


def frame(message: object) -> bytes:
    """One frame holding `message` as JSON."""
    return encode_frame(json.dumps(message).encode())


def call(request_id: object, text: str, *, held: bool = False) -> bytes:
    """A `tools/call` of the `GatedHost`'s echo (`held`: it waits for `release(text)`)."""
    arguments = {"text": text, "held": held}
    params = {"name": "echo", "arguments": arguments}
    return frame({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


def cancel(request_id: object) -> bytes:
    """MCP's `notifications/cancelled` of `request_id`."""
    params = {"requestId": request_id, "reason": "test"}
    return frame({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})


class GatedHost:
    """Trusts `trusted` peers; `echo {text, held}` answers `text`, after `release(text)` when held.

    Records what started, what finished and what was cancelled, by text.
    """

    def __init__(self, trusted: set[str] | None = None) -> None:
        self.trusted = {PEER} if trusted is None else trusted
        self.started: list[str] = []
        self.finished: list[str] = []
        self.cancelled: list[str] = []
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        self._gates: dict[str, trio.Event] = {}

    def release(self, text: str) -> None:
        self._gates.setdefault(text, trio.Event()).set()

    def authorize(self, peer_id: str) -> str | None:
        return peer_id if peer_id in self.trusted else None

    def list_tools(self, grant: str) -> list[dict[str, Any]]:
        return []

    async def call_tool(self, grant: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        text = str(arguments.get("text"))
        self.started.append(text)
        try:
            if arguments.get("held"):
                await self._gates.setdefault(text, trio.Event()).wait()
        except trio.Cancelled:
            self.cancelled.append(text)
            raise
        self.finished.append(text)
        return {"content": [{"type": "text", "text": text}], "isError": False}

    async def notify(self, grant: str, method: str, params: dict[str, Any]) -> None:
        self.notifications.append((method, params))


class CountingStream:
    """A served stream end that counts its reads and can be broken (reset) by the test:
    reads and writes then raise `trio.BrokenResourceError`, as the p2p adapter's do."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.reads = 0
        self.was_reset = False
        self._broken = False
        self._waiting: set[trio.CancelScope] = set()

    def break_(self) -> None:
        self._broken = True
        for scope in self._waiting:
            scope.cancel()

    async def receive_some(self, max_bytes: int) -> bytes:
        self.reads += 1
        with trio.CancelScope() as scope:
            self._waiting.add(scope)
            try:
                if not self._broken:
                    return bytes(await self.inner.receive_some(max_bytes))
            finally:
                self._waiting.discard(scope)
        raise trio.BrokenResourceError("stream reset by the caller")

    async def send_all(self, data: bytes) -> None:
        if self._broken:
            raise trio.BrokenResourceError("stream reset by the caller")
        await self.inner.send_all(data)

    async def reset(self) -> None:
        self.was_reset = True
        await self.inner.aclose()

    async def aclose(self) -> None:
        await self.inner.aclose()


class CallerEnd:
    """The caller's end of a stream whose served end is `served`: an end of stream that
    `served.reset()` caused reads as a reset (`trio.BrokenResourceError`), as over libp2p."""

    def __init__(self, inner: trio.abc.Stream, served: CountingStream) -> None:
        self.inner = inner
        self.served = served

    async def receive_some(self, max_bytes: int = 65536) -> bytes:
        data = bytes(await self.inner.receive_some(max_bytes))
        if not data and self.served.was_reset:
            raise trio.BrokenResourceError("stream reset by the peer")
        return data

    async def send_all(self, data: bytes) -> None:
        await self.inner.send_all(data)

    async def aclose(self) -> None:
        await self.inner.aclose()


def stream_pair() -> tuple[CallerEnd, CountingStream]:
    """(caller's end, served end) of one in-memory stream that the served end can reset."""
    client, inner = trio.testing.memory_stream_pair()
    served = CountingStream(inner)
    return CallerEnd(client, served), served


class Pipe:
    """One stream served by `serve_pipelined(server, ..., peer)` in `nursery`; the test is
    the caller. `served` is the server's end (a `CountingStream`). With `lockstep`, a
    write waits until the other end reads it (no buffer in between)."""

    def __init__(
        self,
        nursery: trio.Nursery,
        server: StreamServer[Any],
        peer: str = PEER,
        *,
        lockstep: bool = False,
    ) -> None:
        pair = trio.testing.lockstep_stream_pair if lockstep else trio.testing.memory_stream_pair
        self.client, inner = pair()
        self.served = CountingStream(inner)
        self.done = trio.Event()
        self._decoder = FrameDecoder(1 << 30)
        self._frames: list[bytes] = []
        nursery.start_soon(self._serve, server, peer)

    async def _serve(self, server: StreamServer[Any], peer: str) -> None:
        try:
            await serve_pipelined(server, self.served, peer)
        finally:
            self.done.set()

    async def send(self, *frames: bytes) -> None:
        await self.client.send_all(b"".join(frames))

    async def end(self) -> None:
        """End our side (EOF): not giving up, the server still answers."""
        await self.client.send_stream.aclose()

    async def next(self) -> dict[str, Any]:
        """The next answer."""
        while not self._frames:
            chunk = await self.client.receive_some()
            assert chunk, "the server closed the stream"
            self._frames += self._decoder.feed(chunk)
        answer: dict[str, Any] = json.loads(self._frames.pop(0))
        return answer

    async def rest(self) -> list[dict[str, Any]]:
        """Every answer until the server closes the stream."""
        while chunk := await self.client.receive_some():
            self._frames += self._decoder.feed(chunk)
        frames, self._frames = self._frames, []
        return [json.loads(body) for body in frames]


def by_id(answers: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """Answers keyed by id (an id-null refusal under None)."""
    return {answer["id"]: answer for answer in answers}
