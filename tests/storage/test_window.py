"""ByteWindow: the bound on the bytes a read holds in flight (admission order, a piece
larger than the window alone, cancellation gives the bytes back, peak)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.errors import ConfigError
from tessera.storage.window import ByteWindow


def test_refuses_an_empty_window() -> None:
    with pytest.raises(ConfigError, match="at least 1 byte"):
        ByteWindow(0)


def test_pieces_are_admitted_in_the_order_they_asked() -> None:
    async def run() -> list[str]:
        window, order = ByteWindow(10), []
        await window.acquire(8)

        async def ask(name: str, nbytes: int) -> None:
            await window.acquire(nbytes)
            order.append(name)

        big = asyncio.ensure_future(ask("big", 9))
        await asyncio.sleep(0)
        small = asyncio.ensure_future(ask("small", 2))  # fits now, but big asked first
        await asyncio.sleep(0)
        assert order == []
        window.release(8)
        await big
        assert order == ["big"] and not small.done()
        window.release(9)
        await small
        return order

    assert asyncio.run(run()) == ["big", "small"]


def test_a_piece_larger_than_the_window_is_held_alone() -> None:
    async def run() -> tuple[int, int]:
        window = ByteWindow(4)
        await window.acquire(100)  # alone: admitted
        later = asyncio.ensure_future(window.acquire(1))
        await asyncio.sleep(0)
        assert not later.done()
        window.release(100)
        await later
        return window.held, window.peak

    assert asyncio.run(run()) == (1, 100)


def test_a_cancelled_waiter_takes_nothing_and_lets_the_next_in() -> None:
    async def run() -> int:
        window = ByteWindow(10)
        await window.acquire(10)
        first = asyncio.ensure_future(window.acquire(10))
        second = asyncio.ensure_future(window.acquire(3))
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        window.release(10)
        await second
        return window.held

    assert asyncio.run(run()) == 3


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 64), st.lists(st.integers(1, 40), min_size=1, max_size=30))
def test_never_holds_more_than_the_window_unless_one_piece_does(capacity: int,
                                                                 sizes: list[int]) -> None:
    async def run() -> ByteWindow:
        window = ByteWindow(capacity)

        async def piece(nbytes: int) -> None:
            await window.acquire(nbytes)
            assert window.held <= max(capacity, nbytes)
            await asyncio.sleep(0)
            window.release(nbytes)

        await asyncio.gather(*(piece(n) for n in sizes))
        return window

    window = asyncio.run(run())
    assert window.held == 0
    assert window.peak <= max(capacity, *sizes)
