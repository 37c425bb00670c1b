"""The streaming benchmark runs end to end on a small array (every read checked by its sum in
its own process; every pushdown read against numpy) and writes its CSVs, plot and table. No
timing or memory figure is asserted: only that every row was measured."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "streaming.py"


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_streaming_benchmark_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--side", "1024", "--reps", "1",
                           "--windows", "64", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    with open(tmp_path / "streaming.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {(r["codec"], r["allocator"], r["window_MiB"]) for r in rows} == {
        (c, a, w) for c in ("raw", "zstd") for a in ("glibc default", "mmap threshold 128 KiB")
        for w in ("64", "1")}
    assert all(float(r["held_peak_MiB"]) > 0 for r in rows)
    assert (tmp_path / "streaming.png").stat().st_size > 0
    assert "| zstd | glibc default | 1 |" in (tmp_path / "streaming_results.md").read_text()
    with open(tmp_path / "streaming_pushdown.csv", newline="") as f:
        push = list(csv.DictReader(f))
    assert {(r["codec"], r["link"], r["answer"]) for r in push} == {
        (c, link, a) for c in ("raw", "zstd") for link in ("none", "1 Gbit/s", "100 MB/s")
        for a in ("whole", "streamed")}
