"""The planner's hyperslab benchmark runs end to end (2048 x 2048, 2 queries) through the
emulated links and writes its CSV, with a bare GET of each box's bytes beside the methods; it
checks every answer against numpy as it goes. Bad
arguments are refused before any data is written."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "hyperslab.py"


def test_hyperslab_benchmark_quick_run(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "hyperslab.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    measured = [r for r in rows if r["median_s"]]
    assert {(r["codec"], r["workload"]) for r in measured} == {
        (c, w) for c in ("raw", "zstd", "zstd, 0-999")
        for w in ("horizontal 82 rows", "vertical 82 cols", "small 21x21")}
    for r in measured:
        assert float(r["median_s"]) > 0 and int(r["requests"]) >= 1
        assert (r["x_best_forced"] != "") == r["method"].startswith("auto")
        assert (r["x_bare_get"] != "") == r["method"].startswith("auto")
    assert {r["method"] for r in measured} >= {"auto", "get", "merge", "pushdown",
                                               "bare GET of the exact bytes"}
    for r in measured:
        if r["method"] == "bare GET of the exact bytes":  # one request of those bytes
            assert r["requests"] == "1" and int(r["bytes"]) >= int(r["exact_bytes"])


@pytest.mark.parametrize(("args", "says"), [
    (["--queries", "0"], "--queries must be at least 1"),
    (["--size", "100"], "--size must be at least 1024"),
    (["--bandwidth-mbps", "0"], "--bandwidth-mbps > 0"),
])
def test_hyperslab_benchmark_refuses_bad_arguments(args: list[str], says: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and says in done.stderr
