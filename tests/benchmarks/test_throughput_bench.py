"""The throughput benchmark runs end to end on a small set and writes its CSV, plot and
results table; every system read the right data (the script checks Tessera's arrays against
numpy), the numpy decode is bit-identical to the reference and the compiled one (where it
was built) within one level. No timing is asserted."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "throughput.py"


def test_throughput_benchmark_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--images", "32",
                           "--side", "1024", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert (tmp_path / "throughput.png").stat().st_size > 0
    with open(tmp_path / "throughput.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    links = {r["link"] for r in rows}
    assert {"1 Gbit/s", "none", "in process"} <= links
    shapes = {(r["link"], r["shape"], r["system"]) for r in rows}
    for link in ("1 Gbit/s", "none"):
        for k in (1, 4, 8, 16, 63):
            for output in ("pixels", "coefficients"):
                assert (link, f"images k={k} {output}", "tessera") in shapes
        for codec in ("raw", "zstd"):
            assert (link, f"whole array {codec}", "tessera") in shapes
        assert (link, "images JPEG q90", "JPEG objects + PIL") in shapes
    loaders = {(r["shape"], r["system"]) for r in rows
               if r["link"] == "DataLoader, 2 workers (loopback)"}
    assert loaders == {("images k=8 pixels", "FrequencyDataset"),
                       ("images k=63 pixels", "FrequencyDataset"),
                       ("images JPEG q90", "JPEG objects + PIL")}
    decodes = [r for r in rows if r["link"] == "in process"]
    assert {r["system"] for r in decodes} >= {"tessera numpy decode"}
    assert all(r["bit_identical"] == "True" for r in decodes
               if r["system"] == "tessera numpy decode")
    assert all(int(r["max_level_difference"]) <= 1 for r in decodes)
    linked = [r for r in rows if r["link"] == "1 Gbit/s" and r["system"] == "tessera"]
    assert all(int(r["link_bytes"]) > 0 and int(r["requests"]) > 0 for r in linked)
    coeff = {int(r["shape"].split("=")[1].split()[0]): int(r["link_bytes"]) for r in linked
             if r["shape"].startswith("images") and r["shape"].endswith("coefficients")}
    assert coeff[1] < coeff[8] < coeff[63]  # bytes on the link rise with k
    assert "## Goals" in (tmp_path / "throughput_results.md").read_text()
