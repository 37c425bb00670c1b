"""The evaluation harness runs end to end on a tiny scale: every system, workload and
experiment, answers checked against numpy, CSVs, plots and RESULTS.md written."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("zarr")
pytest.importorskip("tiledb")
pytest.importorskip("matplotlib")

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "evaluation.py"


def test_evaluation_tiny_run(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    command = [sys.executable, str(SCRIPT), "--tiny", "--rtt-ms", "2", "--first-byte-ms", "0",
               "--out", str(tmp_path / "out"), "--results", str(results)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 and "WRONG ANSWER" not in done.stdout + done.stderr:
        # One more try for what a loaded machine can cause (a peer's request timing out);
        # a wrong answer is never retried. The first failure stays visible in the log.
        print("first run failed, retrying:", done.stdout[-3000:], done.stderr[-3000:],
              file=sys.stderr)
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with open(tmp_path / "out" / "a.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    systems = {r["system"] for r in rows}
    assert {"tessera-auto", "tessera-pushdown", "zarr", "zarr-zstd", "zarr-sharded", "tiledb",
            "tiledb-c16", "whole-object", "exact-ranges"} <= systems
    assert {r["workload"] for r in rows} == {"horizontal", "vertical", "small", "crops", "bert"}
    for name in ("a_performance_cost", "b_method_mix", "c_plans", "d_phi", "e_tile_size",
                 "f_link"):
        assert (tmp_path / "out" / f"{name}.png").stat().st_size > 1000
    text = results.read_text()
    assert "## Goals (issue 6)" in text and "tessera-auto" in text
    results.unlink()
    again = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--report-only",
                            "--out", str(tmp_path / "out"), "--results", str(results)],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    assert results.read_text() == text  # the report is a function of the measured CSVs
