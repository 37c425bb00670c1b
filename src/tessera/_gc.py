"""The cyclic garbage collector paused while a large read makes its per-tile objects.

A read over many tiles makes a few small objects per tile (what each tile read needs, its
place in the plan), none of them in a reference cycle: reference counting frees them all.
CPython's cyclic collector still walks every live object each time the number of objects
allocated since its last full pass reaches a quarter of those alive, so a read of 10^5
tiles spends about a third of its time in the collector, and more the more objects the
process holds (the previous read's plan among them): the cost of a read grew faster than
its tiles. Reads over many tiles run with the collector paused (``ReadConfig``'s
``gc_pause_tiles``); it runs again, as it was, when the last such read in the process ends.
Objects the pause leaves behind in cycles are collected then.

>>> import gc
>>> with collector_paused():
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def collector_paused(pause: bool = True) -> Iterator[None]:
    """Pause the cyclic collector for the block (nested and concurrent blocks share one
    pause; the collector is enabled again when the last one ends, if it was enabled when
    the first began). ``pause`` false: do nothing."""
    global _depth, _was_enabled
    if not pause:
        yield
        return
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
