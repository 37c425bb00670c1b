"""The sync facade's bridge: runs Tessera's coroutines on one background event loop.

Sync calls copy the caller's context (so ``collect_stats()`` blocks see their requests) and
may come from any thread, including one that already runs an event loop (a notebook). The
loop thread is started on first use and restarted in a child process after ``fork``. At
interpreter exit the loop is wound down (its tasks cancelled, its worker threads joined)
before Python finalises, so no I/O callback arrives in a half-finalised interpreter.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import os
import threading
import time
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

    def stop(self, timeout_s: float = 5.0) -> None:
        """Cancel what still runs, shut the worker threads down, stop and join the loop."""
        if not self.thread.is_alive():
            return

        async def wind_down() -> None:
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.loop.shutdown_default_executor()

        # Best effort: the loop is stopped below either way.
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(wind_down(), self.loop).result(timeout_s)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout_s)


_lock = threading.Lock()
_runner: _LoopThread | None = None


def _get_runner() -> _LoopThread:
    global _runner
    with _lock:
        if _runner is None or _runner.pid != os.getpid():
            _runner = _LoopThread()
        return _runner


#: How long exit waits, with the GIL released, for obstore's I/O threads to finish handing
#: their last results to Python.
EXIT_GRACE_S = 0.05


@atexit.register
def _stop_at_exit() -> None:
    """Wind the loop down before the interpreter finalises.

    obstore completes each request on a tokio thread that hands the result to the event loop
    (``call_soon_threadsafe``) and then needs the GIL once more; if the interpreter starts
    finalising in that instant, CPython ends the thread with ``pthread_exit``, which a Rust
    thread cannot survive, and the process aborts (SIGABRT) although all its work completed
    (a known limitation of pyo3-async-runtimes). Stopping the loop and then sleeping briefly, GIL
    released, lets those threads finish first.
    """
    with _lock:
        runner = _runner
    if runner is not None and runner.pid == os.getpid():
        runner.stop()
        time.sleep(EXIT_GRACE_S)


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
