"""Processes that used Tessera exit cleanly: the background loop is wound down at exit."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import tessera
store = tessera.open_store("file://{root}")
for i in range(50):
    store.put(f"k{{i}}", b"x" * 100)
print(len(store.list()))
"""


def test_short_lived_processes_exit_cleanly(tmp_path) -> None:
    procs = [subprocess.Popen([sys.executable, "-X", "faulthandler", "-c",
                               SCRIPT.format(root=tmp_path / f"s{i}")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(6)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-4000:]
        assert out.strip() == "50"
