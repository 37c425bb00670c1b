"""The floors benchmark runs end to end on a small array and writes its CSV and table: the
decompression beside obstore's GETs and Tessera's read, each a positive time, the floor the
larger of the GETs and the decompression on every core, the goal 1.25x it. No timing is
compared."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "floors.py"


def test_floors_benchmark_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--side", "1024", "--reps", "1",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    with open(tmp_path / "floors.csv", newline="") as f:
        rows = {r["what"]: float(r["seconds"]) for r in csv.DictReader(f)}
    assert len(rows) == 6 and all(v > 0 for v in rows.values())
    gets = rows["obstore's concurrent GETs of the tiles (loopback)"]
    many = [v for k, v in rows.items() if k.startswith("zstd decompression alone") and
            "C threads" in k]
    floor = rows["floor: the larger of the GETs and the decompression on every core"]
    assert abs(floor - max(gets, *many)) <= 1e-3
    assert abs(rows["goal: 1.25x the floor"] - 1.25 * floor) <= 2e-3
    text = (tmp_path / "floors_results.md").read_text()
    assert "zstd decompression alone, one thread" in text and "the goal of 1.25x" in text
