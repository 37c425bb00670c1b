"""The pushdown test server's process does not outlive the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

_PARENT = """
import sys, time
from tessera.testing import PushdownTestServer
server = PushdownTestServer(sys.argv[1], insecure=True).start()  # never stopped
print(server.pid, flush=True)
if sys.argv[2] == "wait":
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by init) counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("how", ["killed", "exits without stop"])
def test_the_server_stops_when_its_parent_goes(tmp_path, how: str) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, f"file://{tmp_path}", "wait" if how == "killed" else ""],
        stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        server_pid = int(parent.stdout.readline())
        assert _alive(server_pid)
        if how == "killed":
            parent.send_signal(signal.SIGKILL)  # no atexit, no finally: only the pipe closes
        parent.wait(timeout=30)
        assert _gone_within(server_pid, 20), "the pushdown server outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_a_server_with_two_workers_exits_cleanly(tmp_path):
    """uvicorn's supervisor with --workers 2 once died at shutdown with "Fatal Python
    error: _enter_buffered_busy" (exit -6): the stdin watcher held stdin's buffer lock."""
    import numpy as np

    import tessera
    from tessera.testing import PushdownTestServer

    tessera.from_numpy((tmp_path / "a").as_uri(), np.zeros(4))
    server = PushdownTestServer(tmp_path.as_uri(), extra_args=["--workers", "2"]).start()
    status = server.stop()
    assert status == 0, server.logs()[-2000:]
    assert "Fatal Python error" not in server.logs()
