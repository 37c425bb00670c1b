"""The whole-reads benchmark runs end to end on its quick arrays and writes its CSV, table
and figure; the plan of 10^6 tiles step by step runs at a small size. No timing is
asserted: the times are reported, not checked."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def test_whole_reads_benchmark_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(BENCHMARKS / "whole_reads.py"), "--quick",
                           "--reps", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    with open(tmp_path / "whole_reads_quick.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["store"] for r in rows} == {"folder", "S3 loopback"}
    assert all(float(r[k]) > 0 for r in rows
               for k in ("columns_s", "tile_by_tile_s", "obstore_gets_s"))
    assert (tmp_path / "whole_reads_quick.png").stat().st_size > 0
    assert "| folder |" in (tmp_path / "whole_reads_quick.md").read_text()


def test_the_million_tile_plan_runs_small(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import growth
    finally:
        sys.path.remove(str(BENCHMARKS))
    got = growth.million_plan(tmp_path, tiles=4000)
    assert got["tiles"] == 4000 and got["requests"] >= 1
    assert got["plan_bytes"] == 4000 * 256
    assert set(got) >= {"tile_reads_s", "needs_s", "planner_s", "as_read_s", "explain_s",
                        "whole_read_s", "tile_by_tile_s"}
