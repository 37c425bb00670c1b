"""Stopping the child processes of the testing kit."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any


def stop_process(proc: subprocess.Popen[Any], grace_s: float) -> int:
    """SIGTERM, then SIGKILL if ``proc`` has not exited after ``grace_s``; its exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    return int(proc.returncode)


def on_stdin_close(callback: Callable[[], None]) -> None:
    """Call ``callback`` (on a daemon thread) once this process's stdin reaches its end: a
    child started with ``stdin=PIPE`` then learns that its parent went, however it went."""

    # The file descriptor itself, not sys.stdin: a daemon thread blocked inside the
    # buffered reader holds its lock, and an interpreter shutting down (uvicorn's
    # supervisor after its workers stopped) then dies with "Fatal Python error:
    # _enter_buffered_busy" instead of exiting 0.
    try:
        fd = sys.stdin.fileno()
    except (OSError, ValueError, AttributeError):
        return

    def watch() -> None:
        try:
            while os.read(fd, 1):
                pass
        except OSError:
            pass
        callback()

    threading.Thread(target=watch, name="stdin-watch", daemon=True).start()
