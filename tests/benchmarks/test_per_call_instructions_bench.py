"""The instruction-count benchmark runs end to end for one system and a few calls (under
valgrind, where installed) and writes its CSV, plot and table. No count is asserted beyond
being positive: it is a measurement."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "per_call_instructions.py"


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (callgrind)")
def test_per_call_instructions_benchmark_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--systems", "tessera memory",
                           "--calls", "20", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert (tmp_path / "per_call_instructions.png").stat().st_size > 0
    with open(tmp_path / "per_call_instructions.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["system"], r["tiles"], r["code"]) for r in rows] == [
        ("tessera memory", "1", "tree")]
    assert float(rows[0]["instructions_k"]) > 0
    assert "| tessera memory | 1 | tree |" in (
        tmp_path / "per_call_instructions_results.md").read_text()


def test_without_valgrind_it_says_what_is_missing(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": str(tmp_path)})  # no valgrind on this PATH
    assert done.returncode != 0 and "valgrind is not installed" in done.stderr
