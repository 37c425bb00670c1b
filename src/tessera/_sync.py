"""The sync facade's bridge: runs Tessera's coroutines on one background event loop.

Sync calls copy the caller's context (so ``collect_stats()`` blocks see their requests) and
may come from any thread, including one that already runs an event loop (a notebook). The
loop thread is started on first use and restarted in a child process after ``fork``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._run, name="tessera-io", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()


_lock = threading.Lock()
_runner: _LoopThread | None = None


def _get_runner() -> _LoopThread:
    global _runner
    with _lock:
        if _runner is None or _runner.pid != os.getpid():
            _runner = _LoopThread()
        return _runner


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on the background loop and return its result."""
    runner = _get_runner()
    if threading.current_thread() is runner.thread:
        coro.close()
        raise RuntimeError(
            "a synchronous Tessera call was made from inside Tessera's own event loop; "
            "await the async API (store.aio) instead"
        )
    ctx = contextvars.copy_context()
    result: concurrent.futures.Future[T] = concurrent.futures.Future()
    task_box: list[asyncio.Task[T]] = []

    def _start() -> None:
        task = runner.loop.create_task(coro)
        task_box.append(task)

        def _done(t: asyncio.Task[T]) -> None:
            if t.cancelled():
                result.cancel()
            elif (exc := t.exception()) is not None:
                result.set_exception(exc)
            else:
                result.set_result(t.result())

        task.add_done_callback(_done)

    runner.loop.call_soon_threadsafe(_start, context=ctx)
    try:
        return result.result()
    except BaseException:
        if not result.done() and task_box:
            runner.loop.call_soon_threadsafe(task_box[0].cancel)
        raise
