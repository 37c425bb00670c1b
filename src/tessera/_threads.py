"""The process's one pool of compute threads, for CPU work that releases the GIL (numpy,
scipy.fft, zstd): decoding image groups, decompressing tiles.

One pool per process, sized to the machine's cores, made on first use and made again in a
child process after ``fork`` (a forked child inherits no running threads). Work that fits one
chunk runs in the caller's thread; :func:`run_chunks` spreads the rest.

>>> import numpy as np
>>> out = np.zeros(10)
>>> def fill(lo: int, hi: int) -> None:
...     out[lo:hi] = np.arange(lo, hi)
>>> run_chunks(fill, 10, 3)
>>> out.tolist() == list(range(10))
True
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pid = 0


def workers() -> int:
    """Threads of the pool: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def compute_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The process's compute pool (:func:`workers` threads)."""
    global _pool, _pid
    with _lock:
        if _pool is None or _pid != os.getpid():
            _pool = concurrent.futures.ThreadPoolExecutor(workers(),
                                                          thread_name_prefix="tessera-cpu")
            _pid = os.getpid()
        return _pool


def submit(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
    """``fn(*args, **kwargs)`` on the compute pool; called from a pool thread, it runs right
    here (a pool thread waiting on the pool could wait for ever) and the future is done."""
    if not threading.current_thread().name.startswith("tessera-cpu"):
        return compute_pool().submit(fn, *args, **kwargs)
    done: concurrent.futures.Future[T] = concurrent.futures.Future()
    try:
        done.set_result(fn(*args, **kwargs))
    except BaseException as err:  # handed to the caller through the future
        done.set_exception(err)
    return done


def run_chunks(fn: Callable[[int, int], None], n: int, chunk: int) -> None:
    """``fn(lo, hi)`` over ``0..n`` in pieces of ``chunk`` items: the caller's thread and up
    to :func:`workers` - 1 pool threads take pieces in turn until none is left (so the work
    goes on at the caller's pace when the pool is busy, e.g. with a fetch waiting on I/O);
    in the caller's thread alone when there is one piece, or when called from a pool thread.
    The error of the lowest piece that failed is raised after every piece has finished (an
    interrupt of the caller's own piece is raised at once, and no piece starts after it)."""
    bounds = [(lo, min(lo + chunk, n)) for lo in range(0, n, max(1, chunk))]
    if len(bounds) <= 1 or threading.current_thread().name.startswith("tessera-cpu"):
        for lo, hi in bounds:
            fn(lo, hi)
        return
    pieces = iter(enumerate(bounds))
    taking = threading.Lock()
    failed: list[tuple[int, Exception]] = []
    interrupted = threading.Event()

    def take() -> None:
        while not interrupted.is_set():
            with taking:
                piece = next(pieces, None)
            if piece is None:
                return
            try:
                fn(*piece[1])
            except Exception as err:  # raised by the caller once all pieces are done
                failed.append((piece[0], err))

    helpers = [compute_pool().submit(take) for _ in range(min(workers(), len(bounds)) - 1)]
    try:
        take()
    except BaseException:  # e.g. KeyboardInterrupt in the caller: no new pieces, raised now
        interrupted.set()
        raise
    # helpers not started yet (the pool is busy) have nothing left to do: cancelled, and
    # not waited for (a cancelled future counts as done only once a pool thread sees it)
    running = [h for h in helpers if not h.cancel()]
    concurrent.futures.wait(running)
    if failed:
        raise min(failed, key=lambda f: f[0])[1]
    for helper in running:
        helper.result()  # a helper's own interrupt (not an error of a piece)
