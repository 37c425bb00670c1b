"""The store's blocking face: :class:`Store` runs :class:`~tessera.storage.store.AsyncStore`'s
coroutines on Tessera's background loop, and :func:`open_store` opens one from a URL."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from obstore import Bytes

from tessera._sync import run_sync
from tessera.config import StoreConfig
from tessera.storage.stats import IOStats
from tessera.storage.store import (
    AsyncStore,
    ListDirResult,
    ObjectInfo,
    ObjectList,
    PutMode,
    PutResult,
)
from tessera.storage.url import StoreURL, parse_store_url


class Store:
    """A store with a synchronous API; ``store.aio`` is the same store's async core.

    >>> import tessera
    >>> store = tessera.open_store("memory://doc-store")
    >>> _ = store.put("greeting", b"hello world")
    >>> bytes(store.get_range("greeting", 6, 5))
    b'world'
    >>> [o.key for o in store.list()]
    ['greeting']
    """

    def __init__(self, aio: AsyncStore) -> None:
        self.aio = aio

    @property
    def url(self) -> StoreURL:
        """The parsed store URL."""
        return self.aio.url

    @property
    def config(self) -> StoreConfig:
        """The store's configuration."""
        return self.aio.config

    @property
    def stats(self) -> IOStats:
        """Running totals of this store's requests."""
        return self.aio.stats

    def collect(self) -> contextlib.AbstractContextManager[IOStats]:
        """Collect this store's requests made inside a ``with`` block."""
        return self.aio.collect()

    def get(self, key: str) -> Bytes:
        """The whole object (see :meth:`AsyncStore.get`)."""
        return run_sync(self.aio.get(key))

    def get_range(self, key: str, offset: int, length: int) -> Bytes:
        """``length`` bytes from ``offset`` (see :meth:`AsyncStore.get_range`)."""
        return run_sync(self.aio.get_range(key, offset, length))

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[Bytes]:
        """One request per ``(offset, length)`` range (see :meth:`AsyncStore.get_ranges`)."""
        return run_sync(self.aio.get_ranges(key, ranges))

    def head(self, key: str) -> ObjectInfo:
        """Metadata of one object."""
        return run_sync(self.aio.head(key))

    def exists(self, key: str) -> bool:
        """True if the object exists."""
        return run_sync(self.aio.exists(key))

    def put(self, key: str, data: Any, *, mode: PutMode = "overwrite",
            if_match: str | None = None) -> PutResult:
        """Write a whole object (see :meth:`AsyncStore.put`)."""
        return run_sync(self.aio.put(key, data, mode=mode, if_match=if_match))

    def delete(self, key: str) -> None:
        """Remove an object; a missing one is not an error."""
        run_sync(self.aio.delete(key))

    def list(self, prefix: str = "") -> ObjectList:
        """All objects below ``prefix``, sorted by key."""
        return run_sync(self.aio.list(prefix))

    def iter_list(self, prefix: str = "") -> Iterator[ObjectList]:
        """Objects below ``prefix`` page by page, each page fetched when it is needed."""
        pages = self.aio.iter_list(prefix)

        async def next_page() -> ObjectList | None:
            try:
                return await pages.__anext__()
            except StopAsyncIteration:
                return None

        try:
            while (page := run_sync(next_page())) is not None:
                yield page
        finally:
            run_sync(pages.aclose())

    def list_dir(self, prefix: str = "") -> ListDirResult:
        """One level below ``prefix``."""
        return run_sync(self.aio.list_dir(prefix))

    def __repr__(self) -> str:
        return f"Store({str(self.url)!r})"


def open_store(url: str, *, config: StoreConfig | None = None, **options: Any) -> Store:
    """Open the store at ``url``.

    Args:
        url: ``file:///abs/dir`` (or a plain path), ``memory://name``, ``s3://bucket/prefix``,
            ``gs://bucket/prefix`` or ``az://container/prefix``. Every key is confined below
            this root.
        config: retries, concurrency and timeouts; default: :meth:`StoreConfig.from_env`.
        **options: backend options. S3: ``endpoint``, ``region``, ``access_key_id``,
            ``secret_access_key``, ``session_token``, ``allow_http`` and any other obstore S3
            setting; the standard ``AWS_*`` variables are honoured. GCS and Azure: obstore's
            settings (``service_account_path``, ``account_name``, ...) and their variables.

    >>> import tessera
    >>> store = tessera.open_store("memory://doc-open/prefix")
    >>> store.url.prefix
    'doc-open/prefix'
    """
    parsed = parse_store_url(url)
    return Store(AsyncStore(parsed, config or StoreConfig.from_env(), options))


__all__ = ["Store", "open_store"]
