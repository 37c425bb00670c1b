"""The tensor-tables benchmark runs end to end on a small case and writes its CSV, plot and
results table; what it asserts are bytes and counts, never timings."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "tensor_tables.py"


def test_tensor_tables_benchmark_runs(tmp_path: Path) -> None:
    pytest.importorskip("safetensors")
    pytest.importorskip("deltalake")
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--images", "4", "--nnz",
                           "20000", "--reps", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "tensor_tables.png").stat().st_size > 0
    assert "| FTSF (none) stored / .npy |" in (tmp_path / "tensor_tables_results.md").read_text()
    with open(tmp_path / "tensor_tables.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    systems = {r["system"] for r in rows}
    assert {".npy", "safetensors", "FTSF none", ".pt", "COO", "CSR", "CSF", "BSGS"} <= systems
    npy = next(r for r in rows if r["system"] == ".npy" and r["op"] == "write")
    ftsf = next(r for r in rows if r["system"] == "FTSF none" and r["op"] == "write")
    assert int(npy["stored"]) <= int(ftsf["stored"]) <= 1.05 * int(npy["stored"])
    pt = next(r for r in rows if r["system"] == ".pt" and r["op"] == "write")
    for fmt in ("COO", "CSR", "CSF", "BSGS"):
        stored = int(next(r for r in rows if r["system"] == fmt and r["op"] == "write")["stored"])
        assert stored < int(pt["stored"])  # every sparse format beats the .pt file
    sliced = next(r for r in rows if r["system"] == "FTSF none" and r["op"].startswith("slice"))
    assert int(sliced["iostats_requests"]) == int(sliced["requests"])  # IOStats = the link
    assert int(sliced["iostats_bytes"]) == int(sliced["body_down"])
