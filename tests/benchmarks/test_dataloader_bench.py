"""The DLIO-style data-loading benchmark runs end to end on a tiny set and writes its CSV;
it checks every crop against numpy and fails on a wrong one."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "dataloader.py"


def test_dataloader_benchmark_small_run(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--images", "16", "--height", "96", "--width", "128",
         "--tile", "32", "--batches", "2", "--batch-size", "8", "--repeats", "1",
         "--rtt-ms", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "dataloader.csv", newline="") as f:
        rows = {r["loader"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"tessera", "whole"}
    assert int(rows["tessera"]["bytes"]) < int(rows["whole"]["bytes"])
    assert all(float(r["samples_per_s"]) > 0 for r in rows.values())
