"""The client's own work per read, measured: what ``tessera store profile`` adds to a store's
profile so that the planner's estimates of small reads (where the link is not what a read
waits for) hold (``StoreProfile.call_s`` and ``tile_s``, docs/performance.md).

A scratch array of raw tiles is written below the store, read through the ordinary read
path in 20 x 20 crops that touch 1, 2 and 4 tiles (each list read once untimed, as a
training loop's first epoch: the fragments' bookkeeping read, plans and recipes made, then
the three lists timed in turn seven times, each one's median kept), and removed. The time
the planner expects for the requests of each crop (its estimate without the client's
work) is taken from each measured time; a straight line through what is left, against the
tiles touched, gives the work per call (its intercept) and per tile (its slope).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
import uuid

import numpy as np

from tessera.array.factories import from_numpy
from tessera.query.cost import StoreProfile
from tessera.storage.blocking import Store

TILE, CROP, SIDE = 256, 20, 1024
#: Reads timed per shape (after the same reads untimed); the shapes are timed in turn
#: ``RUNS`` times and each shape's median run kept (what a loop meets on a shared machine,
#: as ``benchmarks/per_call.py`` reports it; the fastest run let a quiet spell set the
#: profile).
READS = 100
RUNS = 7


def crop_corners(tiles: int, n: int, seed: int = 0, *, tile: int = TILE,
                 grid: int = SIDE // TILE) -> list[tuple[int, int]]:
    """``n`` corners of 20 x 20 crops touching ``tiles`` (1, 2 or 4) tiles of ``tile`` x
    ``tile`` cells, each at another place, in the first ``grid - 1`` tiles of each axis of a
    grid of ``grid`` (so a crop across a seam stays inside; the default: the scratch
    array's). ``benchmarks/per_call.py`` times the same crops.

    >>> crop_corners(2, 2, seed=1)
    [(434, 509), (571, 759)]
    """
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ti, tj = (int(v) for v in rng.integers(0, grid - 1, 2))
        inside = [int(v) for v in rng.integers(0, tile - CROP + 1, 2)]
        across = [tile - int(v) for v in rng.integers(1, CROP, 2)]  # 1-19 cells before a seam
        r = ti * tile + (across[0] if tiles == 4 else inside[0])
        c = tj * tile + (across[1] if tiles >= 2 else inside[1])
        out.append((r, c))
    return out


def measure_calls(store: Store, profile: StoreProfile, reads: int = READS,
                  ) -> tuple[float, float]:
    """``(call_s, tile_s)`` of reads of ``store`` under ``profile`` (see the module docs);
    both at least 0.

    >>> import tessera
    >>> from tessera.query.cost import DEFAULT_PROFILES
    >>> call_s, tile_s = measure_calls(tessera.open_store("memory://doc-calls"),
    ...                                DEFAULT_PROFILES["local"], reads=5)
    >>> call_s >= 0 and tile_s >= 0
    True
    """
    prefix = f"__tessera_profile-calls-{uuid.uuid4().hex}"
    url = str(store.url.child(prefix))
    data = np.zeros((SIDE, SIDE), np.int32)
    io_only = dataclasses.replace(profile, call_s=0.0, tile_s=0.0)
    arr = from_numpy(url, data, tile=(TILE, TILE), storage_options=store.aio.storage_options)
    try:
        arr.profile = io_only
        shapes = {}
        for tiles in (1, 2, 4):
            corners = crop_corners(tiles, reads, seed=tiles)
            shapes[tiles] = [(slice(r, r + CROP), slice(c, c + CROP)) for r, c in corners]
            for sel in shapes[tiles]:  # warm, as a loop's second epoch: plans and recipes made
                arr.read(sel)
        runs: dict[int, list[float]] = {tiles: [] for tiles in shapes}
        for _ in range(RUNS):  # the shapes in turn: a busy spell slows each alike
            for tiles, sels in shapes.items():
                start = time.perf_counter()
                for sel in sels:
                    arr.read(sel)
                runs[tiles].append((time.perf_counter() - start) / reads)
        xs, ys = [], []
        for tiles, sels in shapes.items():
            expected = statistics.fmean(arr.explain(s).estimate.seconds for s in sels)
            xs.append(tiles)
            ys.append(statistics.median(runs[tiles]) - expected)
        slope, intercept = np.polyfit(xs, ys, 1)
        return max(0.0, float(intercept)), max(0.0, float(slope))
    finally:
        for obj in store.list(prefix):
            store.delete(obj.key)
        store.aio.prune_folders(prefix)
