"""A bound on the bytes a read holds in flight: :class:`ByteWindow`.

A streamed read fetches, decodes and places its pieces (tiles, row groups) as their bytes
arrive. Requests in flight are bounded by the store's ``max_concurrency``; the window bounds
what those requests and their decoded results hold *beside the read's output*: a piece
takes its bytes from the window before its request is issued and gives them back once it
has been placed. When decoding falls behind the download (zstd on a fast link, two cores),
fetched pieces wait for the window instead of piling up in memory.

Pieces are admitted in the order they asked (no large piece starves behind small ones), and
a piece larger than the whole window is admitted alone, so a read always progresses.

>>> import asyncio
>>> async def demo() -> tuple[int, int]:
...     window = ByteWindow(10)
...     await window.acquire(6)
...     waiting = asyncio.ensure_future(window.acquire(6))  # 6 + 6 > 10: waits
...     await asyncio.sleep(0)
...     assert not waiting.done()
...     window.release(6)
...     await waiting
...     window.release(6)
...     return window.held, window.peak
>>> asyncio.run(demo())
(0, 6)
"""

from __future__ import annotations

import asyncio
import collections

from tessera.errors import ConfigError


class ByteWindow:
    """At most ``capacity`` bytes held at once by the pieces of one read (a piece larger
    than ``capacity`` is held alone). ``peak`` is the most bytes held at any moment."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ConfigError(f"a read's window must hold at least 1 byte, got {capacity}")
        self.capacity = capacity
        self.held = 0
        self.peak = 0
        self._waiting: collections.deque[tuple[int, asyncio.Future[None]]] = \
            collections.deque()

    def _fits(self, nbytes: int) -> bool:
        return self.held == 0 or self.held + nbytes <= self.capacity

    def _take(self, nbytes: int) -> None:
        self.held += nbytes
        self.peak = max(self.peak, self.held)

    async def acquire(self, nbytes: int) -> None:
        """Wait until ``nbytes`` fit beside what is held (and every earlier asker is in),
        then hold them until :meth:`release`."""
        if not self._waiting and self._fits(nbytes):
            self._take(nbytes)
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((nbytes, turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release(nbytes)  # admitted as it was cancelled: give the bytes back
            else:
                self._waiting = collections.deque(w for w in self._waiting if w[1] is not turn)
                self._admit()
            raise

    def release(self, nbytes: int) -> None:
        """Give back ``nbytes`` taken by :meth:`acquire`; admits those waiting that now fit."""
        self.held -= nbytes
        self._admit()

    def _admit(self) -> None:
        while self._waiting and self._fits(self._waiting[0][0]):
            nbytes, turn = self._waiting.popleft()
            if turn.done():  # cancelled while waiting
                continue
            self._take(nbytes)
            turn.set_result(None)
