"""The pushdown load benchmark runs end to end (few requests) and writes its CSV; it checks
every accepted answer against numpy and fails on a wrong one."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "pushdown_load.py"


def test_pushdown_load_benchmark_small_run(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--clients", "4", "--requests", "10",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "pushdown_load.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    assert all(int(r["accepted"]) + int(r["refused_503"]) == 40 for r in rows)
    assert all(float(r["throughput_rps"]) > 0 for r in rows)
