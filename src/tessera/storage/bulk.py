"""Many objects at once: :func:`delete_all` and :func:`copy_all`, concurrently, in two
waves (the objects ``last`` picks go after all others: what marks a dataset's kind, so that
a half-done copy is not yet a dataset and a half-done removal still is one).

>>> from tessera.storage.blocking import open_store
>>> src, dst = open_store("memory://doc-bulk/a"), open_store("memory://doc-bulk/b")
>>> for key in ("x", "y/z", "mark"):
...     _ = src.put(key, key.encode())
>>> copy_all(src, dst, src.list(), last=lambda key: key == "mark")
8
>>> sorted(o.key for o in dst.list())
['mark', 'x', 'y/z']
>>> delete_all(dst, dst.list())
3
>>> dst.list()
[]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from tessera._sync import run_sync
from tessera.errors import TesseraError
from tessera.storage.blocking import Store
from tessera.storage.store import ObjectInfo

#: ``progress(done, total)``: bytes (copies) or objects (removals) so far, of all.
Progress = Callable[[int, int], None]
#: Objects moved at once.
CONCURRENCY = 16


def _never(key: str) -> bool:
    return False


def _waves(objects: Sequence[ObjectInfo], last: Callable[[str], bool],
           ) -> tuple[list[ObjectInfo], list[ObjectInfo]]:
    return [o for o in objects if not last(o.key)], [o for o in objects if last(o.key)]


async def _each(items: Sequence[ObjectInfo], work: Callable[[ObjectInfo], Awaitable[None]],
                tick: Callable[[ObjectInfo], None]) -> None:
    """``work`` on every item, ``CONCURRENCY`` at once; all finish before the first error
    is raised (so what was done is known)."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(item: ObjectInfo) -> None:
        async with gate:
            await work(item)
        tick(item)

    results = await asyncio.gather(*(one(item) for item in items), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


def delete_all(store: Store, objects: Sequence[ObjectInfo], *,
               last: Callable[[str], bool] = _never, progress: Progress | None = None) -> int:
    """Delete ``objects`` of ``store`` (those ``last`` picks after the others); returns how
    many."""
    done = [0]

    def tick(_: ObjectInfo) -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], len(objects))

    async def drop(item: ObjectInfo) -> None:
        await store.aio.delete(item.key)

    for wave in _waves(objects, last):
        run_sync(_each(wave, drop, tick))
    _prune(store)
    return done[0]


def _prune(store: Store) -> None:
    """On a local folder, remove the folders the deletes left empty (the root included),
    as object stores have no empty folders."""
    if store.url.scheme != "file":
        return
    root = Path(store.url.path)
    if not root.is_dir():
        return
    for folder, _, _ in sorted(os.walk(root), key=lambda entry: -len(entry[0])):
        with contextlib.suppress(OSError):  # not empty: something else lives there
            Path(folder).rmdir()


def copy_all(source: Store, target: Store, objects: Sequence[ObjectInfo], *,
             last: Callable[[str], bool] = _never, progress: Progress | None = None) -> int:
    """Copy ``objects`` of ``source`` to the same keys of ``target`` (those ``last`` picks
    after the others); returns the bytes copied. On an error, what was written is deleted
    again before the error is raised."""
    total = sum(o.size for o in objects)
    sent = [0]
    written: list[ObjectInfo] = []

    def tick(item: ObjectInfo) -> None:
        sent[0] += item.size
        written.append(item)
        if progress is not None:
            progress(sent[0], total)

    async def move(item: ObjectInfo) -> None:
        await target.aio.put(item.key, await source.aio.get(item.key))

    try:
        for wave in _waves(objects, last):
            run_sync(_each(wave, move, tick))
    except (TesseraError, OSError):
        with contextlib.suppress(TesseraError, OSError):  # the copy's own error counts
            delete_all(target, written)
        raise
    return sent[0]
