"""Is the server's root readable? The check ``tessera serve`` makes before it starts, and the
readiness behind ``GET /v1/health/ready``.

A server whose store cannot be read (a plain-HTTP endpoint without ``allow_http``, wrong
credentials, a bucket or folder that is not there) would otherwise answer every tile with an
item error, and its clients would quietly fetch every tile themselves. So ``tessera serve``
probes the root once before it binds and exits with the reason when the probe fails, and
``/v1/health/ready`` repeats the probe (at most once per ``cache_s``) for load balancers,
while ``/v1/health/live`` only says the process answers.

>>> import asyncio, tessera
>>> store = tessera.open_store("memory://doc-health")
>>> asyncio.run(probe_root(store.aio)) is None
True
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

from tessera.errors import ConfigError, TesseraError
from tessera.storage.store import AsyncStore

#: Seconds a readiness answer is reused, so that probes from load balancers (which need no
#: token) cost the store at most one listing request per interval.
READY_CACHE_S = 5.0
#: Seconds one readiness probe may take before it counts as failed.
READY_TIMEOUT_S = 10.0


async def probe_root(store: AsyncStore) -> None:
    """Read the first page of the root's listing (one request), raising what the store
    raises when it cannot; a folder root that does not exist raises
    :class:`~tessera.errors.ConfigError`."""
    if store.url.scheme == "file" and not await asyncio.to_thread(Path(store.url.path).is_dir):
        raise ConfigError(f"the served root {store.url} is not a folder that exists; create "
                          "it or correct the URL")
    pages = store.iter_list("")
    try:
        async for _ in pages:
            break
    finally:
        await pages.aclose()


@dataclasses.dataclass
class Readiness:
    """The outcome of the latest probe of a store's root, refreshed when older than
    ``cache_s``.

    Attributes:
        store: the served store.
        cache_s: seconds an answer is reused.
        timeout_s: seconds one probe may take.
        ready: the latest answer (``None`` before the first probe).
        reason: why the latest probe failed (``None`` when it passed).
    """

    store: AsyncStore
    cache_s: float = READY_CACHE_S
    timeout_s: float = READY_TIMEOUT_S
    ready: bool | None = None
    reason: str | None = None
    _checked_at: float = -float("inf")
    _lock: asyncio.Lock | None = dataclasses.field(default=None, repr=False)

    async def check(self) -> tuple[bool, str | None]:
        """``(ready, reason)``, probing the store when the last answer is too old (one
        probe at a time; concurrent callers share it)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.ready is None or time.monotonic() - self._checked_at >= self.cache_s:
                try:
                    async with asyncio.timeout(self.timeout_s):
                        await probe_root(self.store)
                    self.ready, self.reason = True, None
                except TimeoutError:
                    self.ready = False
                    self.reason = f"listing {self.store.url} took over {self.timeout_s:g} s"
                except TesseraError as err:
                    self.ready, self.reason = False, str(err)
                self._checked_at = time.monotonic()
            return bool(self.ready), self.reason

    def passed(self) -> None:
        """Note a probe passed now (the one ``tessera serve`` made before starting)."""
        self.ready, self.reason, self._checked_at = True, None, time.monotonic()
