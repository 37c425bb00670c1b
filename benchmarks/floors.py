"""The CPU floor under a whole-array zstd read on this machine: how long zstd alone takes to
decompress the tiles Tessera stored, beside obstore's own concurrent GETs of the same bytes
from the S3 test server on loopback and Tessera's read of the array, all in one run.

A whole zstd array on loopback should read within 1.25x of the floor that exists: the longer
of obstore's GETs of its tiles and zstd's own decompression of them on every core, as if the
two overlapped perfectly. zstd is timed through ``zstandard`` on one thread (one context,
every block's frame in turn) and through ``zstandard``'s own C threads
(``multi_decompress_to_buffer``, as many as the machine's cores).
Same array as ``throughput.py --full``: 4096 x 4096 int32 normal(0, 100), 512 x 512 tiles,
zstd (level 3, blocks of 64 KiB).

Writes ``floors.csv`` and ``floors_results.md`` under ``--out``.

    python benchmarks/floors.py [--side 4096] [--reps 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import tessera
from _common import write_csv
from array_engine import best_of
from tessera._threads import workers
from tessera.testing import S3TestServer
from throughput import _get_ranges, _obstore


def main() -> None:
    import zstandard

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    array = np.random.default_rng(0).normal(0, 100, (args.side, args.side)).astype(np.int32)
    cores = workers()
    with S3TestServer() as s3:
        url = s3.unique_url("floors")
        options = s3.storage_options()
        tessera.from_numpy(url, array, tile=(512, 512), codec="zstd", storage_options=options)
        arr = tessera.open_array(url, storage_options=options)
        arr.read()
        reads = arr.last_read.tile_reads
        objects = {r.key: bytes(arr.store.get(r.key)) for r in reads}
        frames = []
        for r in reads:
            tile = memoryview(objects[r.key])[r.offset:r.offset + r.length]
            starts = r.blocks.starts.tolist() if r.blocks is not None else [0, r.length]
            frames += [tile[a:b] for a, b in itertools.pairwise(starts)]
        dctx = zstandard.ZstdDecompressor()
        one = best_of(lambda: [dctx.decompress(f) for f in frames], args.reps)
        frame_bytes = [bytes(f) for f in frames]
        many = best_of(lambda: dctx.multi_decompress_to_buffer(frame_bytes, threads=cores),
                     args.reps)
        prefix = url.split("/", 3)[3]
        pieces = [(r.key, r.offset, r.length) for r in reads]
        store = _obstore(s3, s3.endpoint, prefix)
        gets = best_of(lambda: _get_ranges(store, pieces), args.reps)
        ours = best_of(arr.read, args.reps)
    floor = max(gets, many)  # the download and the decompression on every core, overlapped
    goal = 1.25 * floor
    rows = [{"what": "obstore's concurrent GETs of the tiles (loopback)", "seconds": gets},
            {"what": "zstd decompression alone, one thread", "seconds": one},
            {"what": f"zstd decompression alone, {cores} C threads", "seconds": many},
            {"what": "floor: the larger of the GETs and the decompression on every core",
             "seconds": floor},
            {"what": "goal: 1.25x the floor", "seconds": goal},
            {"what": "Tessera's whole-array read (loopback)", "seconds": ours}]
    for row in rows:
        row["seconds"] = round(row["seconds"], 4)
        row["over_goal"] = round(row["seconds"] / goal, 2)
        row["over_floor"] = round(row["seconds"] / floor, 2)
    write_csv(args.out / "floors.csv", rows)
    decoded = array.nbytes / 2**20
    lines = ["# The floor under a whole-array zstd read (benchmarks/floors.py)", "",
             f"A {decoded:.0f} MiB int32 array in 512 x 512 zstd tiles ({len(frames)} blocks, "
             f"{sum(map(len, frames)) / 2**20:.1f} MiB stored), on this {cores}-core machine; "
             f"fastest of {args.reps} runs each, all in one run.", "",
             "| what | seconds | / floor | / goal |", "|---|---|---|---|"]
    lines += [f"| {r['what']} | {r['seconds']:.4f} | {r['over_floor']:.2f}x | "
              f"{r['over_goal']:.2f}x |" for r in rows]
    verdict = "within" if ours <= goal else "beyond"
    lines += ["", f"The floor is the longer of fetching the tiles (obstore's GETs) and "
              f"decompressing them on every core, as if the two overlapped perfectly: "
              f"{floor:.4f} s. Tessera's read takes {ours / floor:.2f}x it, {verdict} the goal "
              f"of 1.25x.", ""]
    (args.out / "floors_results.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
