"""The fleet benchmark runs end to end on a small array (one server, a fleet of two, one
server with two workers, and direct reads), checks every answer against numpy and writes
its CSV, plot and table. No timing is asserted."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "fleet.py"


def test_fleet_benchmark_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--side", "512", "--reps", "1",
                           "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    with open(tmp_path / "fleet.csv", newline="") as f:
        rows = {r["system"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"direct (no server)", "1 server", "2 servers (fleet)",
                         "1 server, 2 workers"}
    assert len(rows["2 servers (fleet)"]["requests_per_server"].split(";")) == 2
    assert (tmp_path / "fleet.png").stat().st_size > 0
    assert "| 2 servers (fleet) |" in (tmp_path / "fleet_results.md").read_text()
