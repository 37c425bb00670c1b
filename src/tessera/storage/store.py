"""The store's async core over obstore (its blocking face, :class:`~tessera.storage.blocking.Store`,
and :func:`~tessera.storage.blocking.open_store` are beside it).

Every request goes through :meth:`AsyncStore._call`, which validates the key, applies the
store's root prefix, times the request, records it, maps failures onto Tessera's errors and
retries transient ones with backoff. Nothing coalesces ranges behind the caller's back: one
range asked for is one request sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import math
import os
import random
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Sequence,
)
from pathlib import Path
from typing import Any, Literal, TypeVar

import obstore
from obstore import Bytes
from obstore.exceptions import NotFoundError
from obstore.store import ObjectStore

from tessera.config import StoreConfig
from tessera.errors import (
    InvalidArgumentError,
    ObjectExistsError,
    PermanentStorageError,
    StorageError,
    TransientStorageError,
)
from tessera.storage.backends import build_backend, environment_endpoint, local_backend
from tessera.storage.direct import CallingThreadIO, PutResult, _as_payload, _check_range
from tessera.storage.errormap import map_error
from tessera.storage.forkguard import note_io
from tessera.storage.keys import join_key, validate_key, validate_prefix
from tessera.storage.stats import IOStats, RequestRecord, StatsRecorder
from tessera.storage.url import StoreURL

T = TypeVar("T")
PutMode = Literal["overwrite", "create"]
ObjectList = list["ObjectInfo"]
NameList = list[str]
SINGLE_PUT_LIMIT = 5 * 2**30


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    """Metadata of one object: ``key`` (relative to the store root), ``size`` in bytes,
    ``last_modified``, ``etag`` and ``version`` (where the backend has them).

    >>> import tessera
    >>> store = tessera.open_store("memory://doc-object-info")
    >>> _ = store.put("a", b"hello")
    >>> store.head("a").size
    5
    """

    key: str
    size: int
    last_modified: dt.datetime
    etag: str | None = None
    version: str | None = None


@dataclasses.dataclass(frozen=True)
class ListDirResult:
    """One level of a listing: ``prefixes`` (sub-folders) and ``objects`` directly below."""

    prefixes: list[str]
    objects: list[ObjectInfo]


class AsyncStore(CallingThreadIO):
    """The async core of a store. Use :func:`tessera.open_store` and ``store.aio`` to get one.

    Attributes:
        url: the parsed store URL.
        config: its :class:`~tessera.config.StoreConfig`.
        endpoint: the S3 endpoint (S3-compatible servers), if the ``endpoint`` option or
            the environment (``AWS_ENDPOINT_URL``) names one.
        stats: running totals of every request this store made.

    >>> import asyncio, tessera
    >>> store = tessera.open_store("memory://doc-async").aio
    >>> _ = asyncio.run(store.put("a", b"hello"))
    >>> bytes(asyncio.run(store.get_range("a", 1, 3)))  # 3 bytes from offset 1
    b'ell'
    """

    def __init__(self, url: StoreURL, config: StoreConfig, options: dict[str, Any]) -> None:
        self.url = url
        self.config = config
        self.endpoint: str | None = (options.get("endpoint") or options.get("endpoint_url")
                                     or environment_endpoint(url.scheme))
        self._options = dict(options)
        self._inner = build_backend(url, config, dict(options))
        self._root = url.prefix
        self._paths: dict[str, str] = {}
        self._recorder = StatsRecorder()
        self._rand = random.Random()

    @property
    def storage_options(self) -> dict[str, Any]:
        """A copy of the options the store was opened with (credentials included), to
        reopen it in another process."""
        return dict(self._options)

    # -- accounting ------------------------------------------------------------------------
    @property
    def stats(self) -> IOStats:
        """Running totals of this store's requests (a live object; ``.copy()`` to snapshot)."""
        return self._recorder.total

    def collect(self) -> contextlib.AbstractContextManager[IOStats]:
        """Collect this store's requests made inside a ``with`` block."""
        return self._recorder.collect()

    def record(self, rec: RequestRecord) -> None:
        """Record a request made on this store's behalf elsewhere (e.g. a pushdown call)."""
        self._recorder.record(rec)

    # -- the one request path --------------------------------------------------------------
    async def _call(
        self,
        kind: str,
        key: str,
        send: Callable[[], Awaitable[T]],
        *,
        sent: int = 0,
        received: Callable[[T], int] = lambda _: 0,
        requests: Callable[[T], int] = lambda _: 1,
    ) -> T:
        note_io()
        policy = self.config.retry
        timeout = self.config.request_timeout_s
        for attempt in range(1, policy.max_attempts + 1):
            started = time.monotonic()
            try:
                result = await asyncio.wait_for(send(), timeout)
            except Exception as exc:
                err = self._failed(exc, kind, key, sent, started)
                if isinstance(err, TransientStorageError) and attempt < policy.max_attempts:
                    await asyncio.sleep(policy.backoff_s(attempt, self._rand.random()))
                    continue
                if isinstance(err, TransientStorageError) and attempt > 1:
                    err.args = (f"{err.args[0]} (gave up after {attempt} tries)",)
                raise err from exc
            latency = time.monotonic() - started
            n = requests(result)
            got = received(result)
            for i in range(n):  # a paged listing is several requests
                self._recorder.record(RequestRecord(
                    kind, key, got if i == 0 else 0, sent if i == 0 else 0,
                    latency / n, True, started + latency * i / n))
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _path(self, key: str) -> str:
        """The backend path of ``key`` (checked by :func:`validate_key`; the paths of keys
        already checked are kept, up to a few thousand, as a small read asks per call)."""
        path = self._paths.get(key) if type(key) is str else None
        if path is None:
            path = join_key(self._root, validate_key(key))
            if len(self._paths) >= 4096:
                self._paths.clear()
            self._paths[key] = path
        return path

    def _file(self, key: str) -> Path:
        """The file holding ``key`` in a folder store."""
        return Path(self.url.path, self._path(key))

    def _backend(self, *, write: bool = False) -> ObjectStore:
        """The obstore store; a file store's folder is created by the first write.

        Raises FileNotFoundError (mapped to ObjectNotFoundError) for a read below a folder
        that does not exist.
        """
        if self._inner is None:
            self._inner = local_backend(self.url, create=write)
            if self._inner is None:
                raise FileNotFoundError(f"folder {self.url.path} does not exist")
        return self._inner

    # -- reads -----------------------------------------------------------------------------
    async def get(self, key: str) -> Bytes:
        """The whole object, as a zero-copy bytes-like buffer (``bytes(buf)`` copies)."""
        path = self._path(key)

        async def send() -> Bytes:
            result = await obstore.get_async(self._backend(), path)
            return await result.bytes_async()

        return await self._call("get", key, send, received=len)

    async def get_range(self, key: str, offset: int, length: int) -> Bytes:
        """``length`` bytes from ``offset``; fewer if the object ends first.

        Raises :class:`~tessera.errors.InvalidRangeError` when ``offset`` is at or past the
        end of the object (and ``length > 0``); a zero ``length`` returns ``b""`` without a
        request.
        """
        path = self._path(key)
        _check_range(offset, length, self.url, key)
        if length == 0:
            return Bytes(b"")

        async def send() -> Bytes:
            return await obstore.get_range_async(self._backend(), path, start=offset, length=length)

        return await self._call("range", key, send, received=len)

    async def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[Bytes]:
        """Several ``(offset, length)`` ranges of one object: one request each, concurrently
        (at most ``config.max_concurrency`` in flight), never merged. Results in input order.
        """
        for offset, length in ranges:
            _check_range(offset, length, self.url, key)
        limit = asyncio.Semaphore(self.config.max_concurrency)

        async def one(offset: int, length: int) -> Bytes:
            async with limit:
                return await self.get_range(key, offset, length)

        tasks = [asyncio.ensure_future(one(o, n)) for o, n in ranges]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:  # one range failed for good: stop the others
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def head(self, key: str) -> ObjectInfo:
        """Metadata of one object."""
        path = self._path(key)

        async def send() -> ObjectInfo:
            meta = await obstore.head_async(self._backend(), path)
            return self._info(meta)

        return await self._call("head", key, send)

    async def exists(self, key: str) -> bool:
        """True if the object exists (one HEAD request). "No such object" is this
        request's answer, not its failure: it is counted as a request that succeeded."""
        path = self._path(key)

        async def send() -> bool:
            try:
                await obstore.head_async(self._backend(), path)
            except (FileNotFoundError, NotFoundError):
                return False
            return True

        return await self._call("head", key, send)

    # -- writes ----------------------------------------------------------------------------
    async def put(
        self, key: str, data: Any, *, mode: PutMode = "overwrite", if_match: str | None = None
    ) -> PutResult:
        """Write a whole object from a bytes-like ``data`` (bytes, memoryview, numpy array).

        ``mode="create"`` fails with :class:`~tessera.errors.ObjectExistsError` if the key is
        taken (atomic on S3, GCS, Azure and local folders); ``if_match=etag`` replaces the
        object only if it still has that ETag. A create that is retried after a lost answer
        and then finds the key taken reads the object back: if it holds exactly ``data``, the
        first try won and the put succeeds.
        """
        path = self._path(key)
        payload = _as_payload(data, str(self.url), key)
        size = len(payload)
        if size > SINGLE_PUT_LIMIT:
            raise PermanentStorageError(
                f"{size} bytes exceed the {SINGLE_PUT_LIMIT}-byte single-request limit",
                url=str(self.url), key=key, op="put")
        if mode not in ("overwrite", "create"):
            raise InvalidArgumentError(f"put mode must be 'overwrite' or 'create', got {mode!r}")
        if if_match is not None and mode == "create":
            raise InvalidArgumentError("put: if_match and mode='create' exclude each other")
        put_mode: Any = {"e_tag": if_match} if if_match is not None else mode
        tries = 0

        async def send() -> PutResult:
            nonlocal tries
            tries += 1
            res = await obstore.put_async(self._backend(write=True), path, payload, mode=put_mode,
                                          use_multipart=False)
            return PutResult(etag=res.get("e_tag"), version=res.get("version"))

        try:
            return await self._call("put", key, send, sent=size)
        except ObjectExistsError:
            if tries > 1 and mode == "create":
                current = await self.get(key)
                if bytes(current) == bytes(payload):
                    info = await self.head(key)
                    return PutResult(etag=info.etag, version=info.version)
            raise

    async def put_stream(self, key: str, chunks: AsyncIterable[Any], *,
                         part_bytes: int = 16 << 20) -> PutResult:
        """Write a whole object from chunks produced while it uploads (bytes-like each).

        One multipart upload (a staging file on local folders): the object appears whole
        when the last chunk is in, or not at all. Producing the next chunk overlaps with
        sending the previous one, and only the chunks in flight are held in memory. Parts
        of ``part_bytes`` (at least 5 MiB, S3's minimum) are retried by the upload itself;
        the stream cannot be replayed, so a failure after the retries ends the put (it is
        not retried as a whole, unlike :meth:`put`).

        >>> import asyncio, tessera
        >>> store = tessera.open_store("memory://doc-stream").aio
        >>> async def parts():
        ...     for i in range(3):
        ...         yield bytes([i]) * 4
        >>> _ = asyncio.run(store.put_stream("k", parts()))
        >>> bytes(asyncio.run(store.get("k")))
        b'\\x00\\x00\\x00\\x00\\x01\\x01\\x01\\x01\\x02\\x02\\x02\\x02'
        """
        path = self._path(key)
        part_bytes = max(part_bytes, 5 << 20)
        sent = 0

        async def counted() -> AsyncIterator[Any]:
            nonlocal sent
            async for chunk in chunks:
                payload = _as_payload(chunk, str(self.url), key)
                sent += len(payload)
                yield payload

        note_io()
        started = time.monotonic()
        try:
            res = await obstore.put_async(self._backend(write=True), path, counted(),
                                          chunk_size=part_bytes, max_concurrency=4)
        except Exception as exc:
            raise self._failed(exc, "put", key, sent, started) from exc
        self._succeeded("put", key, 0, sent, started)
        return PutResult(etag=res.get("e_tag"), version=res.get("version"))

    async def delete(self, key: str) -> None:
        """Remove an object. Deleting a missing object is not an error (as on S3)."""
        path = self._path(key)

        async def send() -> None:
            with contextlib.suppress(FileNotFoundError):
                await obstore.delete_async(self._backend(), path)

        await self._call("delete", key, send)

    # -- listing ---------------------------------------------------------------------------
    async def iter_list(self, prefix: str = "") -> AsyncGenerator[list[ObjectInfo], None]:
        """Objects below ``prefix`` (whole path segments), page by page, in no fixed order.

        A page that fails transiently is retried by restarting the listing where it stopped:
        after the last key seen on stores that list in key order (cloud and memory), or
        skipping keys already returned on local folders. No key is lost or repeated.
        """
        sub = validate_prefix(prefix)
        full = join_key(self._root, sub) if sub else self._root
        page = self.config.list_page_size
        try:
            backend = self._backend()
        except FileNotFoundError:
            return  # a folder that does not exist holds nothing
        ordered = self.url.scheme != "file"
        last_path: str | None = None  # ordered stores: restart after this path
        seen: set[str] = set()  # local folders: paths already returned
        stream: Any = None

        async def send() -> list[Any] | None:
            nonlocal stream
            if stream is None:
                offset = last_path if ordered else None
                stream = obstore.list(backend, full or None, offset=offset,
                                      chunk_size=page).__aiter__()
            try:
                return list(await stream.__anext__())
            except StopAsyncIteration:
                return None
            except BaseException:
                stream = None  # a failed stream cannot go on; the retry opens a new one
                raise

        first = True
        while True:
            # The end-of-stream poll after the last page sends nothing; only an empty
            # listing's single request is counted.
            metas = await self._call("list", sub, send, requests=_page_counter(first))
            if metas is None:
                return
            first = False
            if ordered:
                if metas:
                    last_path = max(m["path"] for m in metas)
            else:
                metas = [m for m in metas if m["path"] not in seen]
                seen.update(m["path"] for m in metas)
            if metas:
                yield [self._info(m) for m in metas]

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        """All objects below ``prefix``, sorted by key."""
        out: list[ObjectInfo] = []
        async for page in self.iter_list(prefix):
            out.extend(page)
        out.sort(key=lambda o: o.key)
        return out

    async def list_dir(self, prefix: str = "") -> ListDirResult:
        """One level below ``prefix``: sub-prefixes and the objects directly in it, sorted."""
        sub = validate_prefix(prefix)
        full = join_key(self._root, sub) if sub else self._root

        async def send() -> ListDirResult:
            try:
                backend = self._backend()
            except FileNotFoundError:
                return ListDirResult([], [])
            res = await obstore.list_with_delimiter_async(backend, full or None)
            prefixes = sorted(self._strip(p) for p in res["common_prefixes"])
            objects = sorted((self._info(m) for m in res["objects"]), key=lambda o: o.key)
            return ListDirResult(prefixes, objects)

        page = self.config.list_page_size
        return await self._call(
            "list", sub, send,
            requests=lambda r: max(1, math.ceil((len(r.prefixes) + len(r.objects)) / page)))

    async def list_names(self, prefix: str) -> NameList:
        """Names (last path segment) of the objects directly below ``prefix``, sorted,
        without their metadata: a directory scan on a worker thread for folder stores,
        one delimited listing (:meth:`list_dir`) elsewhere; counted as one ``list`` request.

        obstore's local listing reads every file's metadata, which a scan does not (about
        20x the time for a folder of 100 commit markers). As obstore's does, the scan hides
        the staging files of uploads in flight (names ending in ``#`` and digits) and
        anything that is not a file.

        >>> import asyncio, tessera
        >>> store = tessera.open_store("memory://doc-names")
        >>> _ = store.put("d/b", b"1"), store.put("d/a", b"2"), store.put("d/sub/c", b"3")
        >>> asyncio.run(store.aio.list_names("d"))
        ['a', 'b']
        """
        if not self.is_local:
            return [o.key.rsplit("/", 1)[-1] for o in (await self.list_dir(prefix)).objects]
        sub = validate_prefix(prefix)
        folder = Path(self.url.path, join_key(self._root, sub) if sub else self._root)

        def scan() -> NameList:
            try:
                with os.scandir(folder) as entries:
                    return sorted(e.name for e in entries
                                  if e.is_file() and not _staging_name(e.name))
            except (FileNotFoundError, NotADirectoryError):
                return []

        async def send() -> NameList:
            return await asyncio.to_thread(scan)

        return await self._call("list", sub, send)

    # -- helpers ---------------------------------------------------------------------------
    def _failed(self, exc: Exception, kind: str, key: str, sent: int,
                started: float) -> StorageError:
        """Record one failed request started at ``started`` and translate its error."""
        self._recorder.record(RequestRecord(kind, key, 0, sent, time.monotonic() - started,
                                            False, started))
        return map_error(exc, url=str(self.url), key=key or None, op=kind,
                         networked=self.url.is_cloud, timeout_s=self.config.request_timeout_s)

    def _succeeded(self, kind: str, key: str, received: int, sent: int,
                   started: float) -> None:
        """Record one request made outside :meth:`_call` that succeeded."""
        self._recorder.record(RequestRecord(kind, key, received, sent,
                                            time.monotonic() - started, True, started))

    def _strip(self, path: str) -> str:
        if self._root:
            return path[len(self._root) + 1:] if path.startswith(self._root + "/") else path
        return path

    def _info(self, meta: Any) -> ObjectInfo:
        return ObjectInfo(key=self._strip(meta["path"]), size=int(meta["size"]),
                          last_modified=meta["last_modified"], etag=meta.get("e_tag"),
                          version=meta.get("version"))

    def __repr__(self) -> str:
        return f"AsyncStore({str(self.url)!r})"


def _page_counter(first: bool) -> Callable[[list[ObjectInfo] | None], int]:
    """Requests a listing poll cost: the poll that finds the end of a non-empty listing is
    free (the last page already said so); an empty listing's single poll is one request."""
    return lambda page: 1 if (page is not None or first) else 0


def _staging_name(name: str) -> bool:
    """True for the staging files of local uploads in flight (``name#123``), which obstore's
    local store never lists."""
    suffix = name.partition("#")[2]
    return bool(suffix) and suffix.isascii() and suffix.isdigit()


__all__ = [
    "AsyncStore",
    "ListDirResult",
    "ObjectInfo",
    "PutResult",
    "StorageError",
]
