"""The array-engine benchmark runs end to end (tiny sizes) and writes its CSV: it checks
every read against numpy as it goes, so this also guards its correctness checks."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "array_engine.py"


def test_array_engine_benchmark_quick_run(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--no-cold", "--out",
                           str(tmp_path), "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "array_engine.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    experiments = {r["experiment"] for r in rows}
    assert {"dense write", "dense write + sync (durable)", "full read (page cache)",
            "sparse updates"} <= experiments
    assert sum(r["experiment"].endswith("box read") for r in rows) == 4
    assert all(float(r["tessera_s"]) > 0 for r in rows)
