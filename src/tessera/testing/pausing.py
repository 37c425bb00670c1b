"""A store wrapper that holds chosen requests until a test lets them go: races made
deterministic, without sleeps.

:func:`pause_requests` patches one :class:`~tessera.storage.store.AsyncStore` (the store of
one handle: every ``open_*`` makes its own) so that the first request matching a predicate
waits at a :class:`Gate` before it is sent. The test waits for :meth:`Gate.wait_reached`,
does what should happen while the request is in flight (another writer commits, a
consolidation runs, a vacuum deletes), then calls :meth:`Gate.release`.

>>> import threading, numpy as np, tessera
>>> arr = tessera.from_numpy("memory://doc-pausing", np.zeros(4, np.int32))
>>> gate = pause_requests(arr._store.aio, lambda kind, key: kind == "put"
...                       and key.startswith("__commits/"))
>>> t = threading.Thread(target=arr.write, args=(np.ones(2, np.int32),))
>>> t.start(); gate.wait_reached()
True
>>> gate.release(); t.join()
>>> arr[:].tolist()
[1, 1, 0, 0]
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tessera.storage.store import AsyncStore

T = TypeVar("T")
Predicate = Callable[[str, str], bool]


@dataclasses.dataclass
class Gate:
    """One paused request: ``reached`` is set when the request arrives at the gate,
    ``released`` lets it go on. ``key`` is the key of the request that was held."""

    reached: threading.Event = dataclasses.field(default_factory=threading.Event)
    released: threading.Event = dataclasses.field(default_factory=threading.Event)
    key: str | None = None
    times: int = 1

    def wait_reached(self, timeout: float = 30.0) -> bool:
        """Wait until the request is held (``False`` if it did not come in ``timeout``)."""
        return self.reached.wait(timeout)

    def release(self) -> None:
        """Let the held request (and any later one) go on."""
        self.released.set()


def pause_requests(store: AsyncStore, when: Predicate, *, times: int = 1) -> Gate:
    """Hold the first ``times`` requests of ``store`` for which ``when(kind, key)`` is true
    (``kind``: ``get``, ``put``, ``delete``, ``list``, ...; ``key`` relative to the store's
    root) until the returned gate is released. Requests the store makes on the calling
    thread (small reads of memory and folder stores) are not held; writes and listings
    always pass here."""
    gate = Gate(times=times)
    original = store._call

    async def held(kind: str, key: str, send: Callable[[], Awaitable[T]],
                   **kwargs: Any) -> T:
        if gate.times > 0 and when(kind, key):
            gate.times -= 1
            gate.key = key
            gate.reached.set()
            await _released(gate)
        return await original(kind, key, send, **kwargs)

    store._call = held  # type: ignore[method-assign]
    return gate


def after_doom_mark() -> Predicate:
    """A predicate that holds a vacuum's second listing of the commit markers: the one it
    makes after marking an orphan doomed (:mod:`tessera.array.commits`)."""
    doomed: list[str] = []

    def when(kind: str, key: str) -> bool:
        if kind == "put" and key.startswith("__doomed/"):
            doomed.append(key)
        return kind == "list" and key == "__commits" and bool(doomed)

    return when


async def _released(gate: Gate) -> None:
    """Wait for ``gate.release()`` without holding a thread of the event loop's executor
    (many held requests would fill it, and the store's own work on it, such as a folder
    listing, would then wait behind them forever): a thread of its own wakes the loop."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def finish() -> None:
        if not done.done():
            done.set_result(None)

    def wait() -> None:
        gate.released.wait()
        loop.call_soon_threadsafe(finish)

    threading.Thread(target=wait, name="pausing-gate", daemon=True).start()
    await done


__all__ = ["Gate", "after_doom_mark", "pause_requests"]
