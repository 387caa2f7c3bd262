"""Fixtures for the p2p tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from .helpers import PeerProcess


@pytest.fixture
def peer_process() -> Iterator[Callable[..., PeerProcess]]:
    started: list[PeerProcess] = []

    def start(*args: str) -> PeerProcess:
        started.append(PeerProcess(*args))
        return started[-1]

    yield start
    for peer in started:
        if peer.proc.poll() is None:
            peer.proc.kill()
            peer.proc.wait(timeout=10)
