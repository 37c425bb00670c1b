"""The loaders benchmark runs end to end on a small set (every epoch checked to deliver every
sample once with its stored values) and writes its CSV and table. No timing is asserted."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "loaders.py"


def test_loaders_benchmark_runs(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("deltalake")
    done = subprocess.run([sys.executable, str(SCRIPT), "--samples", "256", "--workers", "1",
                           "--reps", "1", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    with open(tmp_path / "loaders.csv", newline="") as f:
        rows = {r["system"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"TensorTableDataset", "ArrayDataset",
                         ".npy object per sample + np.load"}
    assert all(float(r["samples_per_s"]) > 0 for r in rows.values())
    assert "| TensorTableDataset |" in (tmp_path / "loaders_results.md").read_text()
