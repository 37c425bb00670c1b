"""The evaluation harness runs end to end on a tiny scale: every system, workload and
experiment, answers checked against numpy, CSVs, plots and RESULTS.md written."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _evaluation() -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location("evaluation_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


def test_goals_say_when_the_link_puts_a_goal_out_of_reach() -> None:
    """The bound is fastest peer / (RTT + first byte + selected bytes / bandwidth), and
    leanest peer bytes / selected bytes; misses name the bound or auto's own shortfall."""
    evaluation: Any = _evaluation()
    run = {"rtt_ms": 20.0, "first_byte_ms": 15.0, "bandwidth_mbps": 100.0}

    def row(system: str, s: float, nbytes: int) -> dict[str, Any]:
        return {"workload": "small", "system": system, "median_s": s, "bytes": nbytes,
                "selected_bytes": 1_000_000}

    rows = [row("tessera-auto", 0.050, 1_100_000), row("tessera-get", 0.080, 4_000_000),
            row("zarr", 0.090, 4_000_000), row("tiledb", 0.120, 4_000_000),
            row("zarr-sharded", 0.150, 2_000_000)]
    (g,) = evaluation.goals(rows, run)
    floor = 0.035 + 1_000_000 / 100e6
    assert g["speedup_vs_fastest_peer"] == pytest.approx(0.090 / 0.050)
    assert g["speedup_bound"] == pytest.approx(0.090 / floor)  # 2.0 < goal 2.5
    assert g["auto_x_floor"] == pytest.approx(0.050 / floor)
    assert g["speed_why"].startswith("out of reach") and "2.00x" in g["speed_why"]
    assert g["bytes_bound"] == pytest.approx(2.0)
    assert "at most 2.0x" in g["bytes_why"]
    rows[2] = row("zarr", 0.600, 40_000_000)
    rows[3] = row("tiledb", 0.600, 40_000_000)
    rows[4] = row("zarr-sharded", 0.600, 40_000_000)
    (g,) = evaluation.goals(rows, run)
    assert g["speed_met"] == "yes" and g["speed_why"] == ""
    assert g["bytes_met"] == "yes" and g["bytes_why"] == ""
    rows[0] = row("tessera-auto", 0.300, 5_000_000)
    (g,) = evaluation.goals(rows, run)
    assert g["speed_why"] == "80% of the goal; auto takes 6.67x the floor"
    assert g["bytes_why"] == "auto reads 5.00x the selected bytes"
    assert g["forced_met"] == "no"
    assert g["forced_why"] == "auto takes 3.75x the time of get (forced)"
    rows[0] = row("tessera-auto", 0.085, 5_000_000)
    (g,) = evaluation.goals(rows, run)
    assert g["forced_met"] == "yes" and g["forced_why"] == ""
