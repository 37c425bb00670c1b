"""The ArrayMorph evaluation (section 5 of the paper), scaled to this machine: Tessera beside
zarr v3, TileDB-Py and plain downloads, same data, same seeded queries, one run.

Setting: the S3 test server in its own process (ranged GETs cost the same whatever the object
size); every client reaches it through an emulated link (RTT, bandwidth and per-request
first-byte latency as options; bytes and requests counted there); a pushdown server runs
beside the store, outside the link, reached through a second link with the same settings.

Systems: Tessera ``auto`` and every forced method (get, merge, fetch, pushdown); zarr v3
uncompressed, zstd and sharded; TileDB-Py dense (default and with I/O concurrency 16, in a
child process); whole-object download; exact byte ranges on a raw object.

Workloads: horizontal box (1% of the rows), vertical box (1% of the columns) and small box
(21 x 21) on an N x N int32 array; CameraTrap-style crops (a batch of seeded MegaDetector
boxes per query on a stack of uint8 images); BERT-style sampling (1% random rows of each of
several int32 arrays per query).

Experiments: (a) time, bytes, requests and dollars of every system on every workload (Figure
7: queries per minute vs queries per dollar); (b) the methods auto chose per tile (Figure 8);
(c) plan quality: the alternative plans for single tiles, executed (Figure 9); (d) phi from 0
to 1e5 (Figure 10); (e) tile size (Figure 11); (f) bandwidth and latency (Figure 12).
Every answer is checked against numpy; a wrong one fails the run. In (a), Tessera's methods
take turns on each query (in a seeded random order drawn afresh per query), so that a slow
spell of the shared machine does not fall on one of them and none always runs just after
the same one; the other systems run their queries in turn.

Writes ``benchmarks/results/*.csv`` and ``*.png`` (kept in the repository beside it) and
regenerates
``benchmarks/RESULTS.md`` (nothing in it typed by hand).

    python benchmarks/evaluation.py            # quick: a few minutes on 2 cores
    python benchmarks/evaluation.py --full     # the paper's 8192 x 8192 scale and more
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime as dt
import math
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from rich.console import Console

import peers
import tessera
from _common import write_csv
from tessera.storage.pricing import get_pricing
from tessera.testing import EmulatedLink, PushdownTestServer, S3TestServer
from tessera.testing.camera_trap import make_camera_trap_set
from tessera.torch import regions_from_megadetector

console = Console(highlight=False, width=150)
HERE = Path(__file__).parent
METHODS = ["auto", "get", "merge", "fetch", "pushdown"]
PRICES = get_pricing("s3")


@dataclasses.dataclass
class Scale:
    """Sizes of one run."""

    n: int
    tile: int
    queries: int
    images: int
    image_hw: tuple[int, int]
    image_tile: int
    crops: int
    bert_arrays: int
    bert_shape: tuple[int, int]
    bert_tile_rows: int
    tile_sizes_kib: tuple[int, ...]
    bandwidths: tuple[float, ...]
    rtts_ms: tuple[float, ...]


# Quick keeps the paper's tile (1024 x 1024 int32, 4 MiB) on a smaller grid; tiny is for the
# test suite (it checks that the harness runs, not what it measures).
QUICK = Scale(4096, 1024, 3, 48, (384, 512), 128, 16, 3, (4096, 512), 256,
              (64, 256, 1024, 4096), (25e6, 100e6), (10.0, 60.0))
TINY = Scale(512, 128, 2, 8, (96, 128), 32, 4, 2, (512, 64), 64, (16, 64), (50e6,), (10.0,))
FULL = Scale(8192, 1024, 5, 96, (768, 1024), 256, 32, 4, (16384, 1024), 1024,
             (64, 256, 1024, 4096, 16384, 65536), (20e6, 50e6, 100e6), (10.0, 50.0, 150.0))


@dataclasses.dataclass
class Workload:
    """Seeded queries on one dataset: each query is a list of selections (one per box)."""

    name: str
    dataset: str
    queries: list[list[Any]]


@dataclasses.dataclass
class Measured:
    seconds: list[float] = dataclasses.field(default_factory=list)
    nbytes: list[int] = dataclasses.field(default_factory=list)
    requests: list[int] = dataclasses.field(default_factory=list)
    dollars: list[float] = dataclasses.field(default_factory=list)

    @property
    def stopped(self) -> bool:
        """True once the first query took longer than ``SLOW_S``: that one stands alone."""
        return bool(self.seconds) and self.seconds[0] > SLOW_S

    def row(self, **keys: Any) -> dict[str, Any]:
        s = statistics.median(self.seconds)
        d = statistics.median(self.dollars)
        return {**keys, "queries": len(self.seconds), "median_s": s,
                "bytes": int(statistics.median(self.nbytes)),
                "requests": int(statistics.median(self.requests)), "dollars": d,
                "queries_per_min": 60 / s, "queries_per_dollar": 1 / d if d else float("inf")}


class Bench:
    """The store, the links and the pushdown server of one run."""

    def __init__(self, s3: S3TestServer, link: EmulatedLink, pd_link: EmulatedLink,
                 client: tessera.PushdownClient, profile: tessera.StoreProfile) -> None:
        self.s3, self.link, self.pd_link, self.client, self.profile = \
            s3, link, pd_link, client, profile
        self.opts = s3.storage_options(link.endpoint)
        self.direct = s3.storage_options()

    def reset(self) -> None:
        self.link.reset_counters()
        self.pd_link.reset_counters()

    def counted(self) -> tuple[int, int]:
        c, p = self.link.counters(), self.pd_link.counters()
        return c.bytes_down + p.bytes_down, c.requests + p.requests

    def tessera(self, name: str) -> tessera.Array:
        arr = tessera.open_array(self.s3.url(name), storage_options=self.opts,
                                 pushdown=self.client)
        arr.profile = self.profile
        return arr


def check(got: Any, want: np.ndarray, what: str) -> None:
    if not np.array_equal(np.asarray(got), want):
        raise SystemExit(f"WRONG ANSWER: {what} (shape {np.shape(got)} vs {want.shape})")


# -- data and workloads ---------------------------------------------------------------------
def make_data(scale: Scale, seed: int) -> tuple[dict[str, np.ndarray], Any]:
    """The arrays every system stores, and the camera-trap set behind ``cams``."""
    rng = np.random.default_rng(seed)
    data = {"grid": rng.integers(0, 2**31 - 1, (scale.n, scale.n), dtype=np.int32)}
    cams = make_camera_trap_set(scale.images, height=scale.image_hw[0],
                                width=scale.image_hw[1], seed=seed)
    data["cams"] = cams.images
    for i in range(scale.bert_arrays):
        data[f"bert{i}"] = rng.integers(0, 30522, scale.bert_shape, dtype=np.int32)
    return data, cams


def make_workloads(scale: Scale, data: dict[str, np.ndarray], cams: Any,
                   seed: int) -> list[Workload]:
    rng = np.random.default_rng(seed + 1)
    n = scale.n
    k = max(1, n // 100)
    wl = [
        Workload("horizontal", "grid", [[(slice(s, s + k), slice(None))]
                                        for s in rng.integers(0, n - k, scale.queries)]),
        Workload("vertical", "grid", [[(slice(None), slice(s, s + k))]
                                      for s in rng.integers(0, n - k, scale.queries)]),
        Workload("small", "grid", [[(slice(y, y + 21), slice(x, x + 21))] for y, x in
                                   rng.integers(0, n - 21, (scale.queries, 2))]),
    ]
    shape = data["cams"].shape[1:]
    regions, _ = regions_from_megadetector(cams.megadetector(), shape, min_conf=0.5)
    wl.append(Workload("crops", "cams", [
        [(i, *box) for i, box in (regions[j] for j in
                                  rng.choice(len(regions), scale.crops, replace=False))]
        for _ in range(scale.queries)]))
    rows = scale.bert_shape[0]
    wl.append(Workload("bert", "bert", [
        [(np.sort(rng.choice(rows, max(1, rows // 100), replace=False)), slice(None))
         for _ in range(scale.bert_arrays)] for _ in range(scale.queries)]))
    return wl


def names_of(w: Workload, scale: Scale) -> list[str]:
    """The dataset behind each selection of a query."""
    if w.dataset == "bert":
        return [f"bert{i}" for i in range(scale.bert_arrays)]
    return [w.dataset]


def write_all(bench: Bench, scale: Scale, data: dict[str, np.ndarray]) -> None:
    s3 = bench.s3
    tiles = {"grid": (scale.tile, scale.tile),
             "cams": (1, 3, scale.image_tile, scale.image_tile)}
    for i in range(scale.bert_arrays):
        tiles[f"bert{i}"] = (scale.bert_tile_rows, scale.bert_shape[1])
    for name, values in data.items():
        console.print(f"writing {name} {values.shape} {values.dtype} for every system")
        tile = tiles[name]
        tessera.from_numpy(s3.url(f"tessera/{name}"), values, tile=tile,
                           storage_options=bench.direct)
        peers.zarr_write(s3, f"zarr/{name}", values, tile, None)
        peers.zarr_write(s3, f"zarr-zstd/{name}", values, tile, "zstd")
        inner = tuple(max(1, t // 8) if t > 8 else t for t in tile)
        peers.zarr_write(s3, f"zarr-sharded/{name}", values, inner, None, shards=tile)
        peers.tiledb_write(s3, f"tiledb/{name}", values, tile)
        if name == "cams":
            store = tessera.open_store(s3.url(""), **bench.direct)
            for j in range(len(values)):
                store.put(f"raw/cams/{j:05d}", values[j])
        else:
            peers.raw_write(s3, f"raw/{name}", values)


# -- systems --------------------------------------------------------------------------------
def tessera_reader(bench: Bench, w: Workload, scale: Scale, method: str,
                   phi: float | None = None,
                   ) -> tuple[Callable[[list[Any]], list[np.ndarray]], dict[str, Any]]:
    """A reader of the workload's queries through Tessera, and the arrays it reads."""
    arrays = {n: bench.tessera(f"tessera/{n}") for n in names_of(w, scale)}
    for a in arrays.values():
        a[(0,) * a.ndim]  # bookkeeping loaded, connections open

    def read(query: list[Any]) -> list[np.ndarray]:
        if w.dataset == "bert":
            return [arrays[n].read(s, method=method, phi=phi)
                    for n, s in zip(arrays, query, strict=True)]
        arr = arrays[w.dataset]
        return list(arr.read(tessera.Hyperslabs(query), method=method, phi=phi))

    return read, arrays


def zarr_reader(bench: Bench, w: Workload, scale: Scale, kind: str) -> Callable[..., Any]:
    arrays = {n: peers.zarr_open(bench.s3, bench.link.endpoint, f"{kind}/{n}")
              for n in names_of(w, scale)}

    def read(query: list[Any]) -> list[np.ndarray]:
        if w.dataset == "bert":
            return [arrays[n].oindex[s] for n, s in zip(arrays, query, strict=True)]
        return [arrays[w.dataset][s] for s in query]

    return read


def whole_reader(bench: Bench, w: Workload, scale: Scale,
                 data: dict[str, np.ndarray]) -> Callable[..., Any]:
    store = tessera.open_store(bench.s3.url(""), **bench.opts)

    def read(query: list[Any]) -> list[np.ndarray]:
        if w.dataset == "cams":
            shape, out = data["cams"].shape[1:], []
            cache: dict[int, np.ndarray] = {}
            for sel in query:
                i = int(sel[0])
                if i not in cache:
                    cache[i] = peers.whole_read(store, f"raw/cams/{i:05d}", shape, np.uint8, ...)
                out.append(cache[i][sel[1:]])
            return out
        return [peers.whole_read(store, f"raw/{n}", data[n].shape, data[n].dtype, s)
                for n, s in zip(names_of(w, scale) * len(query), query, strict=False)]

    return read


def ranges_reader(bench: Bench, w: Workload, scale: Scale,
                  data: dict[str, np.ndarray]) -> Callable[..., Any]:
    store = tessera.open_store(bench.s3.url(""), **bench.opts)

    def read(query: list[Any]) -> list[np.ndarray]:
        out = []
        for n, sel in zip(names_of(w, scale) * len(query), query, strict=False):
            if w.dataset == "cams":
                i, ch, ys, xs = sel
                key, shape = f"raw/cams/{int(i):05d}", data["cams"].shape[1:]
                flat_rows = (np.arange(shape[0])[ch][:, None] * shape[1]
                             + np.arange(shape[1])[ys][None, :]).ravel()
                got = peers.ranges_read(store, key, (shape[0] * shape[1], shape[2]),
                                        np.uint8, flat_rows, xs)
                out.append(got.reshape(len(np.arange(shape[0])[ch]), -1, got.shape[-1]))
                continue
            rows, cols = sel
            shape = data[n].shape
            row_idx = np.arange(shape[0])[rows] if isinstance(rows, slice) else rows
            out.append(peers.ranges_read(store, f"raw/{n}", shape, data[n].dtype, row_idx,
                                         cols))
        return out

    return read


def truth_of(w: Workload, scale: Scale, data: dict[str, np.ndarray],
             query: list[Any]) -> list[np.ndarray]:
    names = names_of(w, scale) * (len(query) if w.dataset != "bert" else 1)
    return [data[n][s] for n, s in zip(names, query, strict=False)]


#: A system whose first query takes longer than this runs that query only (its median is
#: of one query; RESULTS.md says so): per-row requests through the link take minutes.
SLOW_S = 5.0


def measure(bench: Bench, w: Workload, scale: Scale, data: dict[str, np.ndarray],
            read: Callable[[list[Any]], list[np.ndarray]], label: str,
            dollars_of: Callable[[], float] | None = None) -> Measured:
    m = Measured()
    for q, query in enumerate(w.queries):
        if m.stopped:
            break
        measure_query(bench, w, scale, data, read, label, dollars_of, m, q, query)
    return m


def measure_query(bench: Bench, w: Workload, scale: Scale, data: dict[str, np.ndarray],
                  read: Callable[[list[Any]], list[np.ndarray]], label: str,
                  dollars_of: Callable[[], float] | None, m: Measured, q: int,
                  query: list[Any]) -> None:
    """Read query ``q`` once into ``m``: time, bytes and requests at the links, dollars; the
    answer checked against numpy."""
    bench.reset()
    t0 = time.perf_counter()
    got = read(query)
    m.seconds.append(time.perf_counter() - t0)
    nbytes, nreq = bench.counted()
    m.nbytes.append(nbytes)
    m.requests.append(nreq)
    m.dollars.append(dollars_of() if dollars_of else
                     nreq * PRICES.request_fee("get") + PRICES.egress_usd(nbytes))
    for k, (g, t) in enumerate(zip(got, truth_of(w, scale, data, query), strict=True)):
        check(g, t, f"{label} on {w.name}, query {q}, box {k}")


def tiledb_measure(bench: Bench, w: Workload, scale: Scale, data: dict[str, np.ndarray],
                   concurrency: int | None, label: str) -> Measured:
    m = Measured()
    names = names_of(w, scale)
    for q, query in enumerate(w.queries):
        per_name = ([(n, [s]) for n, s in zip(names, query, strict=True)]
                    if w.dataset == "bert" else [(w.dataset, query)])
        seconds, nbytes, nreq, got = 0.0, 0, 0, []
        for n, sels in per_name:
            if w.dataset == "cams":
                sels = [tuple(slice(int(s), int(s) + 1) if isinstance(s, (int, np.integer))
                              else s for s in sel) for sel in sels]
            bench.reset()
            secs, arrays = peers.tiledb_read(bench.s3, bench.link.endpoint, f"tiledb/{n}",
                                             [_full(s, data[n].shape) for s in sels],
                                             concurrency)
            b, r = bench.counted()  # includes opening the array (a few small requests)
            seconds += sum(secs)
            nbytes += b
            nreq += r
            got += [a[0] if w.dataset == "cams" else a for a in arrays]
        m.seconds.append(seconds)
        m.nbytes.append(nbytes)
        m.requests.append(nreq)
        m.dollars.append(nreq * PRICES.request_fee("get") + PRICES.egress_usd(nbytes))
        for k, (g, t) in enumerate(zip(got, truth_of(w, scale, data, query), strict=True)):
            check(g, t, f"{label} on {w.name}, query {q}, box {k}")
    return m


def _full(sel: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
    """Slices with explicit bounds (TileDB's subarrays are closed, peers.py converts)."""
    out = []
    for s, n in zip(sel, shape, strict=True):
        if isinstance(s, slice):
            a, b, _ = s.indices(n)
            out.append(slice(a, b))
        else:
            out.append(s)
    return tuple(out)


def tessera_dollars(arrays: dict[str, Any], label: str) -> Callable[[], float]:
    """Dollars of the latest reads of ``arrays`` (S3 prices, pushdown compute included);
    a read whose pushdown fell back to direct fetches fails the run."""
    def dollars() -> float:
        for a in arrays.values():
            if a.last_read is not None and a.last_read.pushdown_fallbacks:
                raise SystemExit(f"{label}: pushdown fell back: {a.last_read.pushdown_error}")
        return sum(a.last_read.stats.cost_usd(PRICES) for a in arrays.values()
                   if a.last_read is not None)
    return dollars


# -- experiments ----------------------------------------------------------------------------
def experiment_a(bench: Bench, scale: Scale, data: dict[str, np.ndarray],
                 workloads: list[Workload], seed: int = 0,
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(a) every system on every workload; (b) the method mix of auto's plans. ``seed``
    draws the order in which Tessera's methods take turns on each query."""
    rows, mix = [], []
    order_rng = np.random.default_rng(seed)
    for w in workloads:
        first = len(rows)
        # Tessera's methods take turns on each query, in a random order drawn afresh each
        # time, so that a slow spell of this shared machine (or the first pushdown
        # connections) falls on all of them alike, and no method always runs just after one
        # that warmed its tiles in the S3 test server: "auto / best forced" compares them.
        readers = {method: tessera_reader(bench, w, scale, method) for method in METHODS}
        costs = {method: tessera_dollars(readers[method][1], f"tessera-{method} on {w.name}")
                 for method in METHODS}
        measured = {method: Measured() for method in METHODS}
        console.print(f"  {w.name}: tessera {', '.join(METHODS)}, taking turns")
        for q, query in enumerate(w.queries):
            for k in order_rng.permutation(len(METHODS)):
                method = METHODS[int(k)]
                m = measured[method]
                if m.stopped:
                    continue
                measure_query(bench, w, scale, data, readers[method][0], f"tessera-{method}",
                              costs[method], m, q, query)
        for method in METHODS:
            arrays = readers[method][1]
            rows.append(measured[method].row(workload=w.name, system=f"tessera-{method}"))
            if method == "auto":
                counts: dict[str, int] = {}
                for a in arrays.values():
                    plan = a.last_read.plan if a.last_read is not None else None
                    for k, v in (plan.methods if plan is not None else {}).items():
                        counts[k] = counts.get(k, 0) + v
                mix.append({"workload": w.name, **counts})
        for kind in ("zarr", "zarr-zstd", "zarr-sharded"):
            console.print(f"  {w.name}: {kind}")
            m = measure(bench, w, scale, data, zarr_reader(bench, w, scale, kind), kind)
            rows.append(m.row(workload=w.name, system=kind))
        for label, conc in (("tiledb", None), ("tiledb-c16", 16)):
            console.print(f"  {w.name}: {label}")
            m = tiledb_measure(bench, w, scale, data, conc, label)
            rows.append(m.row(workload=w.name, system=label))
        console.print(f"  {w.name}: whole objects, exact ranges")
        rows.append(measure(bench, w, scale, data, whole_reader(bench, w, scale, data),
                            "whole").row(workload=w.name, system="whole-object"))
        rows.append(measure(bench, w, scale, data, ranges_reader(bench, w, scale, data),
                            "ranges").row(workload=w.name, system="exact-ranges"))
        # The bytes a query selects (the median over the queries): what no reader can avoid.
        exact = int(statistics.median(sum(t.nbytes for t in truth_of(w, scale, data, q))
                                      for q in w.queries))
        for r in rows[first:]:
            r["selected_bytes"] = exact
    return rows, mix


def experiment_c(bench: Bench, scale: Scale, data: dict[str, np.ndarray],
                 workloads: list[Workload]) -> list[dict[str, Any]]:
    """(c) plan quality: for one tile of each grid workload's first query, execute every
    alternative plan (each forced method) and auto's choice."""
    arr = bench.tessera("tessera/grid")
    rows = []
    t = scale.tile
    for w in workloads[:3]:
        sel = w.queries[0][0]
        box = tuple(slice(*_clip(s, t, scale.n)) for s in sel)
        want = data["grid"][box]
        for method in METHODS:
            m = Measured()
            for _ in range(3):
                bench.reset()
                t0 = time.perf_counter()
                got = arr.read(box, method=method)
                m.seconds.append(time.perf_counter() - t0)
                check(got, want, f"plan quality {w.name} {method}")
                b, r = bench.counted()
                m.nbytes.append(b)
                m.requests.append(r)
                m.dollars.append(arr.last_read.stats.cost_usd(PRICES))
            plan = arr.last_read.plan
            rows.append(m.row(workload=w.name, plan=method,
                              chosen=",".join(sorted(plan.methods)) if plan else ""))
    return rows


def _clip(s: slice, tile: int, n: int) -> tuple[int, int]:
    """The part of ``s`` inside the first tile it touches."""
    a, b, _ = s.indices(n)
    first = (a // tile) * tile
    return a, min(b, first + tile)


def experiment_d(bench: Bench, scale: Scale, data: dict[str, np.ndarray],
                 workloads: list[Workload]) -> list[dict[str, Any]]:
    """(d) phi from 0 to 1e5 on the vertical box."""
    w = workloads[1]
    rows = []
    for phi in (0.0, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5):
        read, arrays = tessera_reader(bench, w, scale, "auto", phi)
        m = measure(bench, w, scale, data, read, f"phi={phi}",
                    tessera_dollars(arrays, f"phi={phi}"))
        plan = next(iter(arrays.values())).last_read.plan
        rows.append(m.row(phi=phi, methods=_methods(plan)))
    return rows


def _methods(plan: Any) -> str:
    return ", ".join(f"{k}:{v}" for k, v in sorted(plan.methods.items())) if plan else ""


def experiment_e(bench: Bench, scale: Scale, data: dict[str, np.ndarray],
                 workloads: list[Workload]) -> list[dict[str, Any]]:
    """(e) tile size: the horizontal box on the grid stored in tiles of each size."""
    rows = []
    w = workloads[0]
    for kib in scale.tile_sizes_kib:
        side = int(np.sqrt(kib * 1024 / 4))
        if side > scale.n:
            continue
        name = f"tiles-{kib}k"
        tessera.from_numpy(bench.s3.url(f"tessera/{name}"), data["grid"],
                           tile=(side, side), storage_options=bench.direct)
        arr = bench.tessera(f"tessera/{name}")
        arr[0, 0]
        for method in ("auto", "get", "merge"):
            m = Measured()
            for query in w.queries:
                bench.reset()
                t0 = time.perf_counter()
                got = arr.read(query[0], method=method)
                m.seconds.append(time.perf_counter() - t0)
                check(got, data["grid"][query[0]], f"tile size {kib} KiB {method}")
                b, r = bench.counted()
                m.nbytes.append(b)
                m.requests.append(r)
                m.dollars.append(arr.last_read.stats.cost_usd(PRICES))
            rows.append(m.row(tile_kib=kib, method=method))
    return rows


def experiment_f(bench: Bench, scale: Scale, data: dict[str, np.ndarray],
                 workloads: list[Workload], rtt_ms: float, bw: float,
                 first_byte_ms: float) -> list[dict[str, Any]]:
    """(f) bandwidth and latency: the horizontal box under other link settings."""
    rows = []
    w = workloads[0]
    settings = [("bandwidth", b, rtt_ms) for b in scale.bandwidths] + \
               [("rtt", bw, r) for r in scale.rtts_ms]
    try:
        for kind, b, r in settings:
            for link in (bench.link, bench.pd_link):
                link.configure(one_way_delay_s=r / 2e3, bandwidth=b)
            for method in ("auto", "get", "merge", "pushdown"):
                read, arrays = tessera_reader(bench, w, scale, method)
                m = measure(bench, w, scale, data, read, f"{kind} {method}",
                            tessera_dollars(arrays, f"{kind} {method}"))
                rows.append(m.row(vary=kind, bandwidth_mbps=b / 1e6, rtt_ms=r, method=method))
    finally:
        for link in (bench.link, bench.pd_link):
            link.configure(one_way_delay_s=rtt_ms / 2e3, bandwidth=bw,
                           first_byte_latency_s=first_byte_ms / 1e3)
    return rows


# -- output ---------------------------------------------------------------------------------
COLORS = {"tessera-auto": "black", "tessera-get": "tab:blue", "tessera-merge": "tab:orange",
          "tessera-fetch": "tab:green", "tessera-pushdown": "tab:red", "zarr": "tab:purple",
          "zarr-zstd": "tab:pink", "zarr-sharded": "tab:brown", "tiledb": "tab:olive",
          "tiledb-c16": "tab:cyan", "whole-object": "tab:gray", "exact-ranges": "gold"}


def plot_a(rows: list[dict[str, Any]], path: Path) -> None:
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    ncols = 3
    nrows = -(-(len(workloads) + 1) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(13, 4 * nrows))
    flat = list(np.ravel(axes))
    for ax, w in zip(flat, workloads, strict=False):
        for r in (r for r in rows if r["workload"] == w):
            auto = r["system"] == "tessera-auto"
            ax.scatter(r["queries_per_min"], r["queries_per_dollar"], s=140 if auto else 40,
                       color=COLORS.get(r["system"], "k"), label=r["system"],
                       marker="*" if auto else "o", zorder=3 if auto else 2)
        ax.set(xscale="log", yscale="log", title=w, xlabel="queries per minute",
               ylabel="queries per dollar (S3)")
        ax.grid(alpha=0.3)
    handles, labels = flat[0].get_legend_handles_labels()
    for ax in flat[len(workloads):]:
        ax.axis("off")
    flat[-1].legend(handles, labels, loc="center", fontsize=9)
    fig.suptitle("(a) performance and cost per workload: up and right is better "
                 "(star: Tessera auto)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_b(mix: list[dict[str, Any]], path: Path) -> None:
    methods = sorted({k for m in mix for k in m if k != "workload"})
    fig, ax = plt.subplots(figsize=(6, 3.5))
    bottom = np.zeros(len(mix))
    for meth in methods:
        vals = np.array([m.get(meth) or 0 for m in mix], float)
        ax.bar([m["workload"] for m in mix], vals, bottom=bottom, label=meth)
        bottom += vals
    ax.set(ylabel="tiles", title="(b) methods auto chose per tile (last query)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_c(rows: list[dict[str, Any]], path: Path) -> None:
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    fig, axes = plt.subplots(1, len(workloads), figsize=(4 * len(workloads), 3.6))
    for ax, w in zip(np.atleast_1d(axes), workloads, strict=True):
        for r in (r for r in rows if r["workload"] == w):
            ax.scatter(r["median_s"], r["dollars"], color=COLORS[f"tessera-{r['plan']}"],
                       s=120 if r["plan"] == "auto" else 40,
                       facecolors="none" if r["plan"] == "auto" else None,
                       label=r["plan"])
        ax.set(xscale="log", yscale="log", title=f"{w}: one tile", xlabel="seconds")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    np.atleast_1d(axes)[0].set_ylabel("dollars")
    fig.suptitle("(c) plan quality: auto (circle) among the alternatives; down-left is better")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_d(rows: list[dict[str, Any]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    phis = [max(r["phi"], 0.1) for r in rows]
    ax.plot(phis, [r["median_s"] for r in rows], "o-", label="seconds")
    ax.set(xscale="log", xlabel="phi (seconds per dollar; 0 drawn at 0.1)", ylabel="seconds")
    ax2 = ax.twinx()
    ax2.plot(phis, [r["dollars"] * 1e6 for r in rows], "s--", color="tab:red",
             label="micro-dollars")
    ax2.set_ylabel("micro-dollars per query")
    ax.set_title("(d) vertical box: phi trades time for dollars")
    fig.legend(loc="upper center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_e(rows: list[dict[str, Any]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for method in ("auto", "get", "merge"):
        sel = [r for r in rows if r["method"] == method]
        ax.plot([r["tile_kib"] for r in sel], [r["median_s"] for r in sel], "o-",
                label=method, color=COLORS[f"tessera-{method}"])
    ax.set(xscale="log", yscale="log", xlabel="tile size (KiB)", ylabel="seconds per query",
           title="(e) horizontal box vs tile size")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_f(rows: list[dict[str, Any]], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, kind, key, label in ((axes[0], "bandwidth", "bandwidth_mbps", "bandwidth (MB/s)"),
                                 (axes[1], "rtt", "rtt_ms", "round trip (ms)")):
        for method in ("auto", "get", "merge", "pushdown"):
            sel = [r for r in rows if r["vary"] == kind and r["method"] == method]
            ax.plot([r[key] for r in sel], [r["median_s"] for r in sel], "o-", label=method,
                    color=COLORS[f"tessera-{method}"])
        ax.set(xlabel=label, ylabel="seconds per query", yscale="log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("(f) horizontal box under other links (profile kept from the default link)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _table(rows: list[dict[str, Any]], cols: list[tuple[str, str, str]]) -> str:
    head = "| " + " | ".join(c[1] for c in cols) + " |"
    sep = "|" + "|".join("---" for _ in cols) + "|"
    body = ["| " + " | ".join(format(r[c[0]], c[2]) if c[2] else str(r[c[0]])
                              for c in cols) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def goals(rows: list[dict[str, Any]], run: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 6's goals, per workload: auto's speed-up and byte saving over every zarr and
    TileDB variant (the worst case among them), and auto against the best forced method.

    Beside each, the most any reader could reach on this link: the *floor* is one round
    trip, one first-byte wait and the selected bytes at the link's bandwidth (every
    request in parallel, no byte beyond the selection), so no reader's speed-up over the
    fastest peer can pass fastest peer / floor, nor its byte saving leanest peer / selected
    bytes. A goal above that bound cannot be met on this link by any reader.
    """
    out = []
    latency_s = (run["rtt_ms"] + run["first_byte_ms"]) / 1e3
    bandwidth = run["bandwidth_mbps"] * 1e6
    for w in dict.fromkeys(r["workload"] for r in rows):
        by = {r["system"]: r for r in rows if r["workload"] == w}
        auto = by["tessera-auto"]
        peer_rows = [r for k, r in by.items() if k.startswith(("zarr", "tiledb"))]
        fastest = min(r["median_s"] for r in peer_rows)
        leanest = min(r["bytes"] for r in peer_rows)
        speed = fastest / auto["median_s"]
        fewer = leanest / max(1, auto["bytes"])
        plain = min(by["zarr"]["bytes"], by["tiledb"]["bytes"]) / max(1, auto["bytes"])
        best_name, best = min(((k, r["median_s"]) for k, r in by.items()
                               if k.startswith("tessera-") and k != "tessera-auto"),
                              key=lambda kv: kv[1])
        want = 5.0 if w in ("horizontal", "vertical") else 2.5
        selected = auto.get("selected_bytes") or 0  # 0: a CSV of an older run
        floor = latency_s + selected / bandwidth if selected else math.nan
        speed_bound = fastest / floor
        bytes_bound = leanest / selected if selected else math.nan
        out.append({"workload": w, "speedup_vs_fastest_peer": speed, "speed_goal": want,
                    "speed_met": "yes" if speed >= want else "no",
                    "speedup_bound": speed_bound, "auto_x_floor": auto["median_s"] / floor,
                    "speed_why": _why(speed >= want, speed_bound < want,
                                      f"{speed / want:.0%} of the goal; the link allows at "
                                      f"most {speed_bound:.2f}x",
                                      f"{speed / want:.0%} of the goal; auto takes "
                                      f"{auto['median_s'] / floor:.2f}x the floor"),
                    "bytes_fewer_vs_leanest_peer": fewer,
                    "bytes_met": "yes" if fewer >= 10 else "no",
                    "bytes_bound": bytes_bound,
                    "bytes_why": _why(fewer >= 10, bytes_bound < 10,
                                      f"the selection is {1 / bytes_bound:.0%} of what the "
                                      f"leanest peer reads: at most {bytes_bound:.1f}x",
                                      f"auto reads {auto['bytes'] / max(1, selected):.2f}x "
                                      "the selected bytes"),
                    "bytes_fewer_vs_plain_peers": plain,
                    "auto_vs_best_forced": auto["median_s"] / best,
                    "forced_met": "yes" if auto["median_s"] <= 1.1 * best else "no",
                    "forced_why": "" if auto["median_s"] <= 1.1 * best else
                    f"auto takes {auto['median_s'] / best:.2f}x the time of "
                    f"{best_name.removeprefix('tessera-')} (forced)"})
    return out


def _why(met: bool, out_of_reach: bool, reach_text: str, other_text: str) -> str:
    """Why a goal is missed: beyond what any reader could do on this link, or not (a
    bound of NaN: a run that did not record the selected bytes)."""
    if met:
        return ""
    if "nan" in reach_text:
        return "missed; this run did not record the selected bytes, so no bound"
    return f"out of reach: {reach_text}" if out_of_reach else other_text


def write_results(path: Path, out: Path, args: argparse.Namespace, scale: Scale,
                  results: dict[str, list[dict[str, Any]]]) -> None:
    import obstore
    import tiledb
    import zarr

    rel = os.path.relpath(out, path.parent)
    run = results["run"][0]
    lines = [
        "# Results: Tessera beside zarr, TileDB and plain downloads",
        "",
        f"Generated by `benchmarks/evaluation.py{' --full' if args.full else ''}` from a "
        f"run on {run['date']} UTC; every figure below was measured in that "
        "one run and every answer checked against numpy. Do not edit by hand: rerun "
        "`make bench` (quick) or `python benchmarks/evaluation.py --full`.",
        "",
        f"- Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        f"- Versions: tessera {tessera.__version__}, numpy {np.__version__}, zarr "
        f"{zarr.__version__}, tiledb {tiledb.__version__}, obstore {obstore.__version__}",
        f"- Link: RTT {run.get('rtt_ms', args.rtt_ms):g} ms, "
        f"{run.get('bandwidth_mbps', args.bandwidth_mbps):g} MB/s, first byte "
        f"{run.get('first_byte_ms', args.first_byte_ms):g} ms per request; pushdown server "
        "beside the store, reached through a second link with the same settings; prices: "
        "S3 list prices (tessera.storage.pricing).",
        f"- Data: grid {scale.n}x{scale.n} int32 in {scale.tile}x{scale.tile} tiles/chunks "
        f"(all systems); camera traps {scale.images} x 3 x {scale.image_hw[0]} x "
        f"{scale.image_hw[1]} uint8 in 1x3x{scale.image_tile}x{scale.image_tile}, "
        f"{scale.crops} crops per query; BERT-style {scale.bert_arrays} arrays of "
        f"{scale.bert_shape[0]}x{scale.bert_shape[1]} int32 in {scale.bert_tile_rows}-row "
        f"tiles, 1% random rows of each per query; {scale.queries} seeded queries per "
        "workload (a system whose first query takes over "
        f"{SLOW_S:g} s runs that one only). zarr sharded: the tile as shard, 1/8 of it per "
        "side as inner chunks. TileDB runs in a child process (it holds the GIL during "
        "queries); its bytes and requests include opening the array.",
        "",
        "## Goals (issue 6)",
        "",
        "Speed-up and byte saving are against the fastest and the leanest of the zarr and "
        "TileDB variants on each workload; the last byte column is against plain zarr and "
        "TileDB (no shards).",
        "",
        "*Bound* is the most any reader could reach on this link, from the same run: the "
        "fastest peer's time over the *floor* (one round trip, one first-byte wait, and the "
        "bytes the query selects at the link's bandwidth, every request in parallel), and "
        "the leanest peer's bytes over the selected bytes. A goal above its bound is out "
        "of reach for any reader here; *x floor* is auto's time over the floor.",
        "",
        _table(results["goals"], [("workload", "workload", ""),
                                  ("speedup_vs_fastest_peer", "auto speed-up", ".2f"),
                                  ("speed_goal", "goal", ".1f"), ("speed_met", "met", ""),
                                  ("speedup_bound", "bound", ".2f"),
                                  ("auto_x_floor", "x floor", ".2f"),
                                  ("bytes_fewer_vs_leanest_peer", "x fewer bytes", ".1f"),
                                  ("bytes_met", "met (10x)", ""),
                                  ("bytes_bound", "bound", ".1f"),
                                  ("bytes_fewer_vs_plain_peers", "x fewer than plain", ".1f"),
                                  ("auto_vs_best_forced", "auto / best forced", ".2f"),
                                  ("forced_met", "met (1.1)", "")]),
        "",
        "Misses, measured:",
        "",
        *[f"- {g['workload']}, {what}: {g[key]}" for g in results["goals"]
          for what, key in (("speed-up", "speed_why"), ("bytes", "bytes_why"),
                            ("auto / best forced", "forced_why")) if g.get(key)],
        "",
        "## (a) Performance and cost (Figure 7)",
        "",
        f"![a]({rel}/a_performance_cost.png)",
        "",
    ]
    for w in dict.fromkeys(r["workload"] for r in results["a"]):
        rows = [r for r in results["a"] if r["workload"] == w]
        auto = next(r for r in rows if r["system"] == "tessera-auto")
        for r in rows:
            r["x_auto_time"] = r["median_s"] / auto["median_s"]
        lines += [f"### {w}", "", _table(rows, [
            ("system", "system", ""), ("median_s", "median s", ".4f"),
            ("x_auto_time", "x auto's time", ".2f"), ("bytes", "bytes", ",d"),
            ("requests", "requests", "d"), ("dollars", "$ per query", ".3g"),
            ("queries_per_min", "queries/min", ".0f"), ("queries", "queries run", "d")]),
                  ""]
    lines += ["## (b) Methods auto chose (Figure 8)", "", f"![b]({rel}/b_method_mix.png)", ""]
    sections = [
        ("c", "(c) Plan quality on single tiles (Figure 9)", "c_plans.png",
         [("workload", "workload", ""), ("plan", "plan", ""), ("median_s", "median s", ".4f"),
          ("bytes", "bytes", ",d"), ("dollars", "$", ".3g"), ("chosen", "methods", "")]),
        ("d", "(d) phi (Figure 10)", "d_phi.png",
         [("phi", "phi", "g"), ("median_s", "median s", ".4f"),
          ("dollars", "$ per query", ".3g"), ("methods", "plan", "")]),
        ("e", "(e) Tile size (Figure 11)", "e_tile_size.png",
         [("tile_kib", "tile KiB", "d"), ("method", "method", ""),
          ("median_s", "median s", ".4f"), ("bytes", "bytes", ",d"),
          ("requests", "requests", "d")]),
        ("f", "(f) Bandwidth and latency (Figure 12)", "f_link.png",
         [("vary", "varied", ""), ("bandwidth_mbps", "MB/s", "g"), ("rtt_ms", "RTT ms", "g"),
          ("method", "method", ""), ("median_s", "median s", ".4f")]),
    ]
    for key, title, image, cols in sections:
        if results.get(key):
            lines += [f"## {title}", "", f"![{key}]({rel}/{image})", "",
                      _table(results[key], cols), ""]
        else:
            lines += [f"## {title}", "", "Not run in this run (`--skip`).", ""]
    path.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the paper's scale (long)")
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    parser.add_argument("--bandwidth-mbps", type=float, default=100.0, help="MB/s")
    parser.add_argument("--first-byte-ms", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--results", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--skip", default="", help="experiments to leave out, e.g. 'e,f'")
    parser.add_argument("--report-only", action="store_true",
                        help="rebuild the plots and RESULTS.md from the CSVs in --out "
                             "(what an earlier run measured); measures nothing")
    args = parser.parse_args()
    scale = FULL if args.full else TINY if args.tiny else QUICK
    args.out.mkdir(parents=True, exist_ok=True)
    skip = set(args.skip.split(",")) - {""}
    if args.report_only:
        measured = {k: read_csv(args.out / f"{k}.csv")
                    for k in ("a", "b", "c", "d", "e", "f", "goals", "run")}
        if measured["goals"] and "forced_why" not in measured["goals"][0]:
            # CSVs of a run before the bounds (or the last miss's reason) were computed:
            # recomputed from table (a); the bounds of a run too old to record the selected
            # bytes read "nan"
            link = {"rtt_ms": args.rtt_ms, "bandwidth_mbps": args.bandwidth_mbps,
                    "first_byte_ms": args.first_byte_ms}
            measured["goals"] = goals(measured["a"], {**link, **(measured["run"] or [{}])[0]})
        report(args, scale, measured)
        return
    started = time.perf_counter()
    data, cams = make_data(scale, args.seed)
    workloads = make_workloads(scale, data, cams, args.seed)
    link_args = {"one_way_delay_s": args.rtt_ms / 2e3, "bandwidth": args.bandwidth_mbps * 1e6,
                 "first_byte_latency_s": args.first_byte_ms / 1e3}
    results: dict[str, list[dict[str, Any]]] = {
        "c": [], "d": [], "e": [], "f": [],
        "run": [{"date": f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M}", "rtt_ms": args.rtt_ms,
                 "bandwidth_mbps": args.bandwidth_mbps, "first_byte_ms": args.first_byte_ms}]}
    with S3TestServer() as s3:
        direct = s3.storage_options()
        with PushdownTestServer(s3.url(""), storage_options=direct,
                                extra_args=["--cache-bytes", "0"]) as server, \
                EmulatedLink(s3.port, **link_args) as link, \
                EmulatedLink(server.port, **link_args) as pd_link:
            client = tessera.PushdownClient(pd_link.endpoint, token=server.token)
            os.environ["TESSERA_PROFILE_DIR"] = tempfile.mkdtemp(prefix="tessera-profiles-")
            profile = tessera.profile_store(s3.url("profile"), pushdown=client, quick=True,
                                            **s3.storage_options(link.endpoint))
            bench = Bench(s3, link, pd_link, client, profile)
            write_all(bench, scale, data)
            console.print("[bold](a, b)[/] every system on every workload")
            results["a"], results["b"] = experiment_a(bench, scale, data, workloads,
                                                      args.seed + 2)
            results["goals"] = goals(results["a"], results["run"][0])
            for name, fn in (("c", experiment_c), ("d", experiment_d), ("e", experiment_e)):
                if name not in skip:
                    console.print(f"[bold]({name})[/]")
                    results[name] = fn(bench, scale, data, workloads)
            if "f" not in skip:
                console.print("[bold](f)[/]")
                results["f"] = experiment_f(bench, scale, data, workloads, args.rtt_ms,
                                            args.bandwidth_mbps * 1e6, args.first_byte_ms)
    for name, rows in results.items():
        write_csv(args.out / f"{name}.csv", rows)
    report(args, scale, results)
    for g in results["goals"]:
        console.print(g)
    console.print(f"wrote {args.results} and {args.out} in "
                  f"{time.perf_counter() - started:.0f} s")


def read_csv(path: Path) -> list[dict[str, Any]]:
    """Rows of a CSV this script wrote, numbers as numbers (missing file: no rows)."""
    if not path.exists():
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        row: dict[str, Any] = {}
        for k, v in r.items():
            try:
                row[k] = int(v)
            except ValueError:
                try:
                    row[k] = float(v)
                except ValueError:
                    row[k] = v
        out.append(row)
    return out


def report(args: argparse.Namespace, scale: Scale,
           results: dict[str, list[dict[str, Any]]]) -> None:
    """Plots and RESULTS.md from the measured rows."""
    plot_a(results["a"], args.out / "a_performance_cost.png")
    plot_b(results["b"], args.out / "b_method_mix.png")
    if results["c"]:
        plot_c(results["c"], args.out / "c_plans.png")
    if results["d"]:
        plot_d(results["d"], args.out / "d_phi.png")
    if results["e"]:
        plot_e(results["e"], args.out / "e_tile_size.png")
    if results["f"]:
        plot_f(results["f"], args.out / "f_link.png")
    write_results(args.results, args.out, args, scale, results)


if __name__ == "__main__":
    main()
