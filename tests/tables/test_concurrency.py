"""Many writers at once on the S3 test server (delta-rs commits are create-only puts): 8
spawned processes x 10 writes each, nothing lost; and reads of a vacuumed version fail with
HistoryVacuumedError (in a subprocess: delta-rs has aborted the interpreter at exit after
such reads, spec fact V13)."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import numpy as np
import pytest

from tessera.tables import TensorTable

pytestmark = pytest.mark.s3


def _writer(url: str, options: dict, who: int) -> None:
    table = TensorTable.open(url, mode="w", storage_options=options)
    for i in range(10):
        table.write(f"w{who}/{i}", np.full((4, 3), who * 100 + i, np.int32))


def test_eight_processes_writing_at_once_lose_nothing(s3_server) -> None:
    url, options = s3_server.unique_url("tt-conc"), dict(s3_server.storage_options())
    TensorTable.create(url, storage_options=options)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(url, options, who)) for who in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    table = TensorTable.open(url, storage_options=options)
    assert len(table) == 80 and table.version == 80  # 80 commits after the create
    for who in range(8):
        for i in (0, 9):
            assert (table[f"w{who}/{i}"].numpy() == who * 100 + i).all()


VACUUMED = """
import sys, numpy as np
from tessera.errors import HistoryVacuumedError
from tessera.tables import TensorTable
url = sys.argv[1]
t = TensorTable.create(url)
t.write("a", np.ones(4))
t.write("a", np.zeros(4), mode="overwrite")
t.vacuum(retention_hours=0, dry_run=False, force=True)
old = TensorTable.open(url, at=1)
try:
    old["a"].numpy()
except HistoryVacuumedError as err:
    print("vacuumed:", err)
print("latest", TensorTable.open(url)["a"].numpy().tolist())
"""


def test_reads_of_a_vacuumed_version_say_so(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-c", VACUUMED, (tmp_path / "t").as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert "vacuumed:" in done.stdout and "version 1" in done.stdout, done.stdout + done.stderr
    assert "latest [0.0, 0.0, 0.0, 0.0]" in done.stdout
