"""Per-call cost in instructions: what one small read costs the CPU, counted by valgrind's
callgrind, so that two versions of the code can be compared on a shared, noisy machine
where wall-clock times of one call move by +-30% between runs (see ``per_call.py`` for the
times).

Each system reads the same 20 x 20 int32 crops of a 1000 x 1000 array in 256 x 256 tiles as
``per_call.py`` (touching 1, 2 or 4 tiles), each crop read once first (recipes made, files
cached). A child process is run under callgrind twice, making no timed reads and then
``--calls`` of them; the difference over ``--calls`` is the instructions of one call
(the child's start, imports and set-up cancel out). Counts are of user-space instructions
only: a folder's read costs its system calls besides.

Systems: Tessera on ``memory://`` and a local folder, ``tessera.h5`` on a local folder,
h5py on a local HDF5 file, zarr v3 on its MemoryStore. ``--against REV`` also measures the
code of a git revision (checked out in a temporary worktree) beside the working tree.

Writes ``per_call_instructions.csv``, ``.png`` and ``_results.md`` under ``--out``.

    python benchmarks/per_call_instructions.py [--against REV] [--tiles 1 2 4]
        [--calls N] [--systems ...] [--out DIR]   (needs valgrind; default DIR
        benchmarks/out)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_csv

ROOT = Path(__file__).resolve().parent.parent
SYSTEMS = ("tessera memory", "tessera local", "tessera.h5 local", "h5py local", "zarr memory")

#: The child: reads ``calls`` crops of one system after reading each crop once.
CHILD = """
import sys, tempfile
from pathlib import Path
src, system, tiles, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, src)
sys.path.insert(0, {bench!r})
import numpy as np
from per_call import CROP, SIDE, build, crops
import tessera
assert tessera.__file__.startswith(src), tessera.__file__
data = np.arange(SIDE * SIDE, dtype=np.int32).reshape(SIDE, SIDE)
_, obj, arr = build(system, data, Path(tempfile.mkdtemp()))
arr = arr if arr is not None else getattr(obj, "_array", None)  # the h5 facade's
if arr is not None:  # no listing again mid-count
    arr.reads = tessera.ReadConfig(refresh_s=float("inf"))
corners = crops(tiles, 400, seed=tiles)
for r, c in corners:
    assert np.array_equal(np.asarray(obj[r:r + CROP, c:c + CROP]),
                          data[r:r + CROP, c:c + CROP])
for i in range(calls):
    r, c = corners[i % len(corners)]
    obj[r:r + CROP, c:c + CROP]
"""


def instructions(src: Path, system: str, tiles: int, calls: int) -> int:
    """Instructions the child runs to the end with ``calls`` timed reads."""
    with tempfile.TemporaryDirectory() as tmp:
        child = Path(tmp) / "child.py"
        child.write_text(CHILD.format(bench=str(Path(__file__).parent)))
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
             sys.executable, str(child), str(src), system, str(tiles), str(calls)],
            capture_output=True, text=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{system} under callgrind failed:\n{done.stderr[-3000:]}")
    return int(found.group(1))


def per_call(src: Path, system: str, tiles: int, calls: int) -> float:
    """Instructions of one call: the count with ``calls`` reads less the count with none."""
    return (instructions(src, system, tiles, calls) - instructions(src, system, tiles, 0)) \
        / calls


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reads = [(r["system"], r["tiles"]) for r in rows if r["code"] == "tree"]
    labels = [f"{system}\n{tiles} tile(s)" for system, tiles in reads]
    codes = list(dict.fromkeys(r["code"] for r in rows))
    count = {(r["system"], r["tiles"], r["code"]): r["instructions_k"] for r in rows}
    fig, ax = plt.subplots(figsize=(max(6, len(labels) * 1.3), 4.5))
    width = 0.8 / len(codes)
    for k, code in enumerate(codes):
        at = [i for i, read in enumerate(reads) if (*read, code) in count]
        ax.bar([i + k * width for i in at], [count[(*reads[i], code)] for i in at], width,
               label=code)
    ax.set_xticks([i + width * (len(codes) - 1) / 2 for i in range(len(labels))], labels,
                  fontsize=7)
    ax.set_ylabel("thousand instructions per call")
    ax.set_title("One 20 x 20 read: user-space instructions per call (callgrind)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def tree_revision() -> str:
    """The working tree's commit, with ``+changes`` when its sources differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                              text=True).stdout.strip()

    rev = git("rev-parse", "--short", "HEAD") or "unknown"
    return rev + ("+changes" if git("status", "--porcelain", "--", "src") else "")


def results_md(rows: list[dict[str, Any]], calls: int) -> str:
    lines = ["# Per-call cost in instructions", "",
             f"`python benchmarks/per_call_instructions.py` — valgrind's callgrind, {calls} "
             "calls less none, per call (user-space instructions; deterministic, unlike a "
             "time on this shared machine). Same reads as `per_call.py`. Code \"tree\": the "
             f"working tree, at {tree_revision()}.", "",
             "| system | tiles | code | thousand instructions per call | / h5py |",
             "|---|---|---|---|---|"]
    h5 = {(r["tiles"], r["code"]): r["instructions_k"] for r in rows
          if r["system"] == "h5py local"}
    for r in rows:
        ref = h5.get((r["tiles"], r["code"]))
        lines.append(f"| {r['system']} | {r['tiles']} | {r['code']} | "
                     f"{r['instructions_k']:.1f} | "
                     + (f"{r['instructions_k'] / ref:.1f} |" if ref else "- |"))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="also measure this git revision")
    parser.add_argument("--tiles", type=int, nargs="+", default=[1])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS),
                        metavar="SYSTEM", help=f"of: {', '.join(SYSTEMS)} (default: all)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: this benchmark counts instructions "
                         "with callgrind (apt install valgrind)")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"tree": ROOT / "src"}
        if args.against:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q",
                            f"{tmp}/rev", args.against], check=True)
            codes[args.against] = Path(tmp) / "rev" / "src"
        jobs = [(code, src, system, tiles) for tiles in args.tiles for system in args.systems
                for code, src in codes.items()
                if code == "tree" or system.startswith("tessera")]
        try:
            with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                counts = list(pool.map(lambda j: per_call(j[1], j[2], j[3], args.calls),
                                       jobs))
        finally:
            if args.against:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                f"{tmp}/rev"], check=False)
    rows = [{"system": system, "tiles": tiles, "code": code, "instructions_k": n / 1e3}
            for (code, _, system, tiles), n in zip(jobs, counts, strict=True)]
    rows.sort(key=lambda r: (r["tiles"], SYSTEMS.index(r["system"]), r["code"] != "tree"))
    for r in rows:
        print(f"{r['system']:>18} {r['tiles']} tile(s) {r['code']:>12}: "
              f"{r['instructions_k']:.1f}k instructions per call")
    write_csv(args.out / "per_call_instructions.csv", rows)
    plot(rows, args.out / "per_call_instructions.png")
    (args.out / "per_call_instructions_results.md").write_text(results_md(rows, args.calls))
    print(f"wrote {args.out}/per_call_instructions.csv, .png, _results.md")


if __name__ == "__main__":
    main()
