"""The growth benchmark runs end to end at two small sizes per series and writes its CSVs,
table and figure. No timing is asserted: the slopes are reported, not checked."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "growth.py"


def test_growth_benchmark_runs(tmp_path: Path) -> None:
    pytest.importorskip("deltalake")
    done = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--reps", "1", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    with open(tmp_path / "growth_slopes_tiny.csv", newline="") as f:
        fits = list(csv.DictReader(f))
    assert {(r["series"], r["operation"]) for r in fits} >= {
        ("fragments", "whole read"), ("fragments", "cold open after consolidate"),
        ("tiles", "explain (first)"), ("tensors", "commit of 10"),
        ("images", "first read after open")}
    assert all(r["slope"] not in ("", "nan") for r in fits)
    assert (tmp_path / "growth_tiny.png").stat().st_size > 0
    assert "| fragments | 20x20 read |" in (tmp_path / "growth_table_tiny.md").read_text()
