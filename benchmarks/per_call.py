"""Per-call cost: what one small read costs when a user's own loop (a PyTorch ``Dataset``'s
``__getitem__``) reads one sample per call, the most common way people write datasets over
arrays. Everything measured in one run, in one process.

Reads: 20 x 20 crops of a 1000 x 1000 int32 array in 256 x 256 tiles (raw: no codec, so the
figures are the fixed cost of a call, not decompression), touching 1, 2 or 4 tiles, each at
a different place (``--reads`` per shape, read once first, as a training loop's first
epoch: timed apart as the "first read" column, then timed again).

Systems: Tessera on ``memory://``, a local folder and the S3 test server on loopback; the
``tessera.h5`` facade on a local folder (with its chunk cache, as HDF5's: 8 MiB per dataset);
h5py on a chunked HDF5 file on the local disk (HDF5 2.0's chunk cache: 8 MiB); zarr
v3 on its MemoryStore and LocalStore (same chunks, no compression); TensorStore's zarr3 driver
on its memory and file key-value stores (where it installs). End to end: the same crops as a
per-sample ``torch.utils.data.Dataset`` read through a ``DataLoader`` (no workers, one sample
per step), for Tessera, zarr and h5py. The "by name" rows of the h5 facade and h5py look the
dataset up in its file on every call (``f["x"][r:r + 20, c:c + 20]``), as many datasets'
``__getitem__`` do.

Per row: the mean per-call time (median of ``--reps`` runs; and of the fastest run), the
ratio to zarr on the same
kind of store and to h5py, and for Tessera its planner's estimate of the read
(``arr.explain(sel).estimate.seconds``, mean over the same reads) beside the measured time:
with the built-in profile of the store's kind, and with a profile measured in the same run
as ``tessera store profile --quick`` measures one (requests, then the client's work per call and
per tile through the reader).

Writes ``per_call.csv``, ``per_call.png`` and ``per_call_results.md`` under ``--out``.

    python benchmarks/per_call.py [--quick] [--out DIR]   (default benchmarks/out; the
    committed results: --out benchmarks/results)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import tessera
import tessera.h5
from _common import write_csv
from tessera.array.calibrate import crop_corners, measure_calls
from tessera.query.plan import default_profile
from tessera.testing import S3TestServer

SIDE, TILE, CROP = 1000, 256, 20


def crops(tiles: int, n: int, seed: int) -> list[tuple[int, int]]:
    """``n`` crop corners whose 20 x 20 crop touches exactly ``tiles`` (1, 2 or 4) tiles,
    in the full-size tiles 0-2 of each axis (the crops ``tessera store profile`` times)."""
    return crop_corners(tiles, n, seed, tile=TILE, grid=-(-SIDE // TILE))


def per_call(reads: dict[str, Callable[[int, int], Any]], corners: list[tuple[int, int]],
             reps: int) -> dict[str, tuple[float, float, float]]:
    """Per system, the mean seconds per call over ``corners``: the first time each is read
    (a training loop's first epoch: plans made, Tessera's recipes kept for footprints not
    read before, files cached), then the median and the fastest of ``reps`` runs. The
    systems take turns within each run, so that a busy spell of the shared machine slows
    each alike rather than the one measured then."""
    def epoch(read: Callable[[int, int], Any]) -> float:
        start = time.perf_counter()
        for r, c in corners:
            read(r, c)
        return (time.perf_counter() - start) / len(corners)

    first = {name: epoch(read) for name, read in reads.items()}
    runs: dict[str, list[float]] = {name: [] for name in reads}
    for _ in range(reps):
        for name, read in reads.items():
            runs[name].append(epoch(read))
    return {name: (first[name], statistics.median(runs[name]), min(runs[name]))
            for name in reads}


def _check(read: Callable[[int, int], Any], data: np.ndarray, name: str) -> None:
    for r, c in ((0, 0), (250, 500), (750, 240)):
        got = np.asarray(read(r, c))
        if not np.array_equal(got, data[r:r + CROP, c:c + CROP]):
            raise SystemExit(f"{name} read the wrong data at ({r}, {c})")


def build(name: str, data: np.ndarray, work: Path, s3: S3TestServer | None = None,
          ) -> tuple[str, Any, Any]:
    """One system of :data:`BUILT` holding ``data`` (files under ``work``; the S3 test server
    ``s3`` for ``tessera s3 loopback``): its store kind, the object a crop is read from
    (``obj[r:r + 20, c:c + 20]``) and the Tessera array whose plans are estimated (``None``
    for the others and the h5 facade)."""
    tile = (TILE, TILE)
    if name.startswith("tessera ") and name != "tessera.h5 local":
        kind = name.removeprefix("tessera ")
        options: dict[str, Any] = {}
        if kind == "memory":
            url = "memory://per-call"
        elif kind == "local":
            url = (work / "tessera").as_uri()
        elif s3 is None:
            raise ValueError(f"{name} needs the S3 test server")
        else:
            url, options = s3.unique_url("per-call"), dict(s3.storage_options())
        arr = tessera.from_numpy(url, data, tile=tile, storage_options=options)
        return kind, arr, arr
    if name == "tessera.h5 local":
        f = tessera.h5.File((work / "facade").as_uri(), "w")
        return "local", f.create_dataset("x", data=data, chunks=tile), None
    if name == "h5py local":
        import h5py

        with h5py.File(work / "x.h5", "w") as h:
            h.create_dataset("x", data=data, chunks=tile)
        return "local", h5py.File(work / "x.h5", "r")["x"], None
    import zarr

    kind = name.removeprefix("zarr ")
    store = zarr.storage.MemoryStore() if kind == "memory" else \
        zarr.storage.LocalStore(str(work / "zarr"))
    z = zarr.create_array(store, shape=data.shape, chunks=tile, dtype=data.dtype,
                          compressors=None)
    z[:] = data
    return kind, z, None


#: The systems :func:`build` makes (TensorStore's, where it installs: :func:`_tensorstore`).
BUILT = ("tessera memory", "tessera local", "tessera s3 loopback", "tessera.h5 local",
         "h5py local", "zarr memory", "zarr local")


def systems(data: np.ndarray, work: Path, s3: S3TestServer) -> dict[str, tuple[str, Any, Any]]:
    """name -> (store kind, read(r, c), the Tessera array or None)."""
    out: dict[str, tuple[str, Any, Any]] = {}
    for name in BUILT:
        kind, obj, arr = build(name, data, work, s3)
        out[name] = (kind, _slicer(obj), arr)
        if name in ("tessera.h5 local", "h5py local"):  # f["x"][crop]: looked up per call
            out[f"{name} by name"] = (kind, lambda r, c, f=obj.file: f["x"][r:r + CROP,
                                                                           c:c + CROP], None)
    out.update(_tensorstore(data, work))
    return out


def _slicer(obj: Any) -> Callable[[int, int], Any]:
    return lambda r, c: obj[r:r + CROP, c:c + CROP]


def _tensorstore(data: np.ndarray, work: Path) -> dict[str, tuple[str, Any, Any]]:
    try:
        import tensorstore as ts
    except ImportError as err:
        print(f"TensorStore: not measured ({err})")
        return {}
    out: dict[str, tuple[str, Any, Any]] = {}
    for kind, kvstore in (("memory", {"driver": "memory"}),
                          ("local", {"driver": "file", "path": str(work / "ts")})):
        t = ts.open({"driver": "zarr3", "kvstore": kvstore}, create=True, dtype=ts.int32,
                    shape=data.shape, chunk_layout=ts.ChunkLayout(chunk_shape=[TILE, TILE]),
                    ).result()
        t[...].write(data).result()
        out[f"tensorstore {kind}"] = (
            kind, lambda r, c, t=t: t[r:r + CROP, c:c + CROP].read().result(), None)
    return out


def _estimate(arr: Any, corners: list[tuple[int, int]], profile: Any) -> float:
    """The planner's mean estimate (ms) of the crops under ``profile`` (the handle's own
    profile restored after)."""
    kept, arr.profile = arr.profile, profile
    est = [arr.explain((slice(r, r + CROP), slice(c, c + CROP))).estimate.seconds
           for r, c in corners]
    arr.profile = kept
    return statistics.fmean(est) * 1e3


def measured_profiles(work: Path) -> dict[str, Any]:
    """What ``tessera store profile --quick`` measures (requests, then the client's work per call
    and per tile through the reader) for a memory and a folder store, not saved."""
    out = {}
    for kind, url in (("memory", "memory://per-call-profile"),
                      ("local", (work / "profile").as_uri())):
        out[kind] = tessera.profile_store(url, quick=True, save=False, calls=measure_calls)
        print(f"profiled {kind}: call {out[kind].call_s * 1e3:.3f} ms, tile "
              f"{out[kind].tile_s * 1e3:.3f} ms")
    return out


def loader_rows(data: np.ndarray, named: dict[str, tuple[str, Any, Any]],
                corners: list[tuple[int, int]], reps: int) -> list[dict[str, Any]]:
    """The end-to-end row: per-sample Datasets through a DataLoader (no workers)."""
    try:
        import torch.utils.data as tud
    except ImportError as err:
        print(f"DataLoader rows: not measured ({err})")
        return []

    class Crops(tud.Dataset):  # type: ignore[type-arg]
        def __init__(self, read: Callable[[int, int], Any]) -> None:
            self.read = read

        def __len__(self) -> int:
            return len(corners)

        def __getitem__(self, i: int) -> Any:
            return np.asarray(self.read(*corners[i]))

    rows = []
    for name in ("tessera memory", "tessera local", "zarr memory", "zarr local", "h5py local"):
        kind, read, _ = named[name]
        loader = tud.DataLoader(Crops(read), batch_size=None, num_workers=0)

        def epoch(loader: Any = loader) -> None:
            for _ in loader:
                pass

        epoch()
        runs = []
        for _ in range(reps):
            start = time.perf_counter()
            epoch()
            runs.append((time.perf_counter() - start) / len(corners))
        rows.append({"system": name, "store": kind, "tiles": "1 (DataLoader)",
                     "per_call_ms": statistics.median(runs) * 1e3})
    return rows


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["system"] for r in rows))
    shapes = ["1", "2", "4", "1 (DataLoader)"]
    fig, ax = plt.subplots(figsize=(11, 4.8))
    width = 0.8 / len(shapes)
    for k, shape in enumerate(shapes):
        got = {r["system"]: r["per_call_ms"] for r in rows if r["tiles"] == shape}
        ax.bar([i + k * width for i in range(len(names))],
               [got.get(n, 0.0) for n in names], width, label=f"{shape} tile(s)")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))], names, rotation=30,
                  ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("ms per 20 x 20 read (log)")
    ax.set_title("Per-call cost of one small read, one process (lower is better)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def results_md(rows: list[dict[str, Any]], n: int) -> str:
    by = {(r["system"], r["tiles"]): r for r in rows}
    lines = ["# Per-call cost: one small read per call", "",
             f"`python benchmarks/per_call.py` — {n} reads of 20 x 20 int32 per shape, raw "
             "256 x 256 tiles of a 1000 x 1000 array, one process, every system in the "
             "same run (ms per call; ratios against zarr v3 on the same kind of store and "
             "against h5py on a local file).", "",
             "Chunk caches: h5py keeps whole chunks in HDF5's cache (8 MiB per dataset in "
             "HDF5 2.0: the nine tiles the crops touch fit, so its reads make no system "
             "call once each chunk was read), and so does the `tessera.h5` facade (its "
             "chunk cache, the same default on a local folder); Tessera's arrays read the "
             "planner's byte ranges on every call.", "",
             "Estimates: the planner's (`arr.explain(sel).estimate.seconds`, mean over the "
             "same crops) with the built-in profile of the store's kind, and with a profile "
             "`tessera store profile --quick` measured in this run (requests, then the client's "
             "work per call and per tile through the reader).", "",
             "First read: the mean per call the first time each crop was read (Tessera "
             "plans a footprint it has not read before the general way and keeps its "
             "recipe; 20 x 20 crops across a seam have 19 footprints per seam, so a 2-tile "
             "first epoch meets most of them, a 4-tile one many of its 361).", "",
             "| system | store | tiles | ms per call | fastest run ms | first read ms | / zarr "
             "| / h5py | estimate ms | estimate / measured | profiled estimate / measured |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        zarr = by.get((f"zarr {r['store']}", r["tiles"]))
        h5 = by.get(("h5py local", r["tiles"]))
        est = r.get("estimate_ms")
        lines.append(
            f"| {r['system']} | {r['store']} | {r['tiles']} | {r['per_call_ms']:.4f} | "
            + (f"{r['best_ms']:.4f}" if r.get("best_ms") is not None else "-") + " | "
            + (f"{r['first_read_ms']:.4f}" if r.get("first_read_ms") is not None else "-")
            + " | " + (f"{r['per_call_ms'] / zarr['per_call_ms']:.2f}" if zarr else "-") + " | "
            + (f"{r['per_call_ms'] / h5['per_call_ms']:.2f}" if h5 else "-") + " | "
            + (f"{est:.4f} | {est / r['per_call_ms']:.2f}" if est is not None else "- | -")
            + " | " + (f"{r['estimate_profiled_ms'] / r['per_call_ms']:.2f}"
                       if r.get("estimate_profiled_ms") is not None else "-") + " |")
    lines += ["", "## Goals (issue 40)", ""]
    for kind in ("memory", "local"):
        t, z = by.get((f"tessera {kind}", "1")), by.get((f"zarr {kind}", "1"))
        if t and z:
            lines.append(f"- Tessera on {kind}, 1 tile: {t['per_call_ms']:.4f} ms vs zarr "
                         f"{z['per_call_ms']:.4f} ms ({t['per_call_ms'] / z['per_call_ms']:.2f}"
                         "x; goal <= 1x)" + (
                             f"; goal <= 0.05 ms: {'met' if t['per_call_ms'] <= 0.05 else 'missed'}"
                             f" (the fastest run: {t['best_ms']:.4f} ms)"
                             if kind == "memory" and "best_ms" in t else ""))
    t, h = by.get(("tessera.h5 local", "1")), by.get(("h5py local", "1"))
    if t and h:
        lines.append(f"- tessera.h5 on a local folder vs h5py on a local file, 1 tile: "
                     f"{t['per_call_ms'] / h['per_call_ms']:.1f}x (goal <= 3x)")
    for r in rows:
        if r.get("estimate_ms") is not None and r["store"] in ("memory", "local"):
            said = []
            for what, key in (("built-in profile", "estimate_ms"),
                              ("measured profile", "estimate_profiled_ms")):
                if r.get(key) is not None:
                    ratio = r[key] / r["per_call_ms"]
                    said.append(f"{what} {ratio:.2f}x measured "
                                f"({'within' if abs(ratio - 1) <= 0.25 else 'outside'} 25%)")
            lines.append(f"- estimate of {r['system']}, {r['tiles']} tile(s): "
                         + "; ".join(said))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 reads per shape, one run")
    parser.add_argument("--reads", type=int, help="reads per shape (overrides the mode)")
    parser.add_argument("--reps", type=int, help="runs per system (median taken)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    n = args.reads or (60 if args.quick else 400)
    reps = args.reps or (1 if args.quick else 5)
    args.out.mkdir(parents=True, exist_ok=True)
    data = np.arange(SIDE * SIDE, dtype=np.int32).reshape(SIDE, SIDE)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as work, S3TestServer() as s3:
        profiles = measured_profiles(Path(work))
        named = systems(data, Path(work), s3)
        for name, (_, read, _) in named.items():
            _check(read, data, name)
        for tiles in (1, 2, 4):
            corners = crops(tiles, n, seed=tiles)
            timed = per_call({name: read for name, (_, read, _) in named.items()}, corners,
                             reps)
            for name, (kind, _, arr) in named.items():
                first, steady, best = timed[name]
                row: dict[str, Any] = {"system": name, "store": kind, "tiles": str(tiles),
                                       "per_call_ms": steady * 1e3, "best_ms": best * 1e3,
                                       "first_read_ms": first * 1e3}
                if arr is not None:
                    row["estimate_ms"] = _estimate(arr, corners, default_profile(arr.store.url))
                    if kind in profiles:
                        row["estimate_profiled_ms"] = _estimate(arr, corners, profiles[kind])
                rows.append(row)
                print(f"{name:>20} {tiles} tile(s): {row['per_call_ms']:.4f} ms/call"
                      + (f" (estimate {row['estimate_ms']:.4f})" if "estimate_ms" in row
                         else ""))
        rows += loader_rows(data, named, crops(1, n, seed=9), reps)
    write_csv(args.out / "per_call.csv", rows)
    plot(rows, args.out / "per_call.png")
    (args.out / "per_call_results.md").write_text(results_md(rows, n))
    print(f"wrote {args.out}/per_call.csv, per_call.png, per_call_results.md")


if __name__ == "__main__":
    main()
