"""rpc/writer.py: frames written whole and in order, together when they come together,
with what waits behind a write bounded."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from gbr_node.errors import CallTimeout, StreamBroken
from gbr_node.rpc.framing import FrameDecoder
from gbr_node.rpc.writer import FrameWriter


class GatedStream:
    """Records each `send_all`; blocks each one until the test opens the gate."""

    def __init__(self) -> None:
        self.sends: list[bytes] = []
        self.gate = trio.Event()
        self.fail_with: BaseException | None = None

    async def receive_some(self, max_bytes: int) -> bytes:
        raise AssertionError("not read")

    async def send_all(self, data: bytes) -> None:
        await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        self.sends.append(data)

    async def aclose(self) -> None:
        pass


def bodies(stream: GatedStream) -> list[list[bytes]]:
    return [FrameDecoder(1 << 20).feed(sent) for sent in stream.sends]


async def test_frames_queued_during_a_write_go_out_together_and_in_order() -> None:
    stream = GatedStream()
    writer = FrameWriter(stream, max_queued_bytes=1 << 20)
    queued: list[int] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.write, b"first", 5)
            await trio.testing.wait_all_tasks_blocked()
            for n in range(5):
                nursery.start_soon(writer.write, f"m{n}".encode(), 5, lambda n=n: queued.append(n))
                await trio.testing.wait_all_tasks_blocked()
            assert queued == [0, 1, 2, 3, 4], "queued before anything of them is sent"
            stream.gate.set()
    assert bodies(stream) == [[b"first"], [b"m0", b"m1", b"m2", b"m3", b"m4"]]


async def test_a_frame_alone_goes_out_at_once() -> None:
    stream = GatedStream()
    stream.gate.set()
    writer = FrameWriter(stream, max_queued_bytes=1 << 20)
    with trio.fail_after(5):
        await writer.write(b"alone", 5)
        await writer.write(b"again", 5)
    assert bodies(stream) == [[b"alone"], [b"again"]]


async def test_what_waits_behind_a_write_is_bounded() -> None:
    stream = GatedStream()
    writer = FrameWriter(stream, max_queued_bytes=10)
    queued: list[int] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.write, b"under way", 5)
            await trio.testing.wait_all_tasks_blocked()
            for n in range(3):
                nursery.start_soon(writer.write, b"x" * 8, 5, lambda n=n: queued.append(n))
                await trio.testing.wait_all_tasks_blocked()
            assert queued == [0, 1], "the third waits for room"
            stream.gate.set()
    assert sum(len(batch) for batch in bodies(stream)) == 4


@pytest.mark.parametrize(
    "failure, error",
    [(trio.BrokenResourceError("reset"), StreamBroken), (None, CallTimeout)],
    ids=["broken", "too slow"],
)
async def test_a_failed_write_fails_every_frame_queued_and_every_later_one(
    failure: BaseException | None, error: type[Exception], autojump_clock: trio.abc.Clock
) -> None:
    stream = GatedStream()
    stream.fail_with = failure
    writer = FrameWriter(stream, max_queued_bytes=1 << 20)
    raised: list[BaseException] = []

    async def write(body: bytes) -> None:
        try:
            await writer.write(body, 3)
        except Exception as exc:
            raised.append(exc)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for n in range(3):
                nursery.start_soon(write, b"%d" % n)
                await trio.testing.wait_all_tasks_blocked()
            if failure is not None:
                stream.gate.set()
        with pytest.raises(error):
            await writer.write(b"later", 3)
    assert len(raised) == 3 and all(isinstance(exc, error) for exc in raised)
