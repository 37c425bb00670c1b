"""The per-call benchmark runs end to end on a few reads and writes its CSV, plot and
results table; every system read the right crops (the script checks them against numpy
before timing). No timing is asserted."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "per_call.py"


def test_per_call_benchmark_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--reads", "12",
                           "--reps", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert (tmp_path / "per_call.png").stat().st_size > 0
    with open(tmp_path / "per_call.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    got = {(r["system"], r["tiles"]) for r in rows}
    for tiles in ("1", "2", "4"):
        for system in ("tessera memory", "tessera local", "tessera s3 loopback",
                       "tessera.h5 local", "h5py local", "tessera.h5 local by name",
                       "h5py local by name", "zarr memory", "zarr local"):
            assert (system, tiles) in got
    assert ("tessera memory", "1 (DataLoader)") in got
    tessera_rows = [r for r in rows if r["system"].startswith("tessera ")
                    and r["tiles"] in ("1", "2", "4")]
    assert all(float(r["estimate_ms"]) > 0 for r in tessera_rows)
    assert all(float(r["per_call_ms"]) > 0 for r in rows)
    text = (tmp_path / "per_call_results.md").read_text()
    assert "## Goals (issue 40)" in text and "estimate of tessera memory" in text
