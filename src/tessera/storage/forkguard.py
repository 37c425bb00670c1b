"""Fork safety: a process forked after Tessera did I/O cannot do I/O itself.

obstore runs every request on a tokio runtime that is created once per process, on first
use, with its own worker threads. ``fork`` copies the runtime's state but not its threads,
so in a child forked after the parent's first request every request waits forever. Rather
than hang, Tessera notices and raises :class:`~tessera.errors.ForkSafetyError`, which says
what to do: start such workers with ``spawn`` or ``forkserver`` (``tessera.torch`` loaders
do), or fork before the first Tessera I/O.

A child forked *before* the parent's first request starts its own runtime and works.
"""

from __future__ import annotations

import os

from tessera.errors import ForkSafetyError

_used_in_pid: int | None = None
_inherited_from: int | None = None


def note_io() -> None:
    """Record that this process has started obstore's runtime (called per request)."""
    global _used_in_pid
    if _inherited_from is not None:
        raise ForkSafetyError(
            f"this process (pid {os.getpid()}) was forked from pid {_inherited_from} after "
            "that process had done Tessera I/O; obstore's I/O runtime does not survive fork, "
            "so requests here would hang. Start worker processes with the 'spawn' or "
            "'forkserver' method (multiprocessing.get_context('forkserver'), "
            "DataLoader(multiprocessing_context='forkserver'), or tessera.torch's "
            "dataset.loader(...)), or fork before the first Tessera I/O")
    if _used_in_pid is None:  # set again only after a fork (a child's first request)
        _used_in_pid = os.getpid()


def _after_fork_in_child() -> None:
    global _inherited_from, _used_in_pid
    if _used_in_pid is not None:
        _inherited_from = _used_in_pid
        _used_in_pid = None


os.register_at_fork(after_in_child=_after_fork_in_child)
