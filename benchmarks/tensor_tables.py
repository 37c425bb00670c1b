"""Tensor tables against single-object baselines (the Delta Tensor paper's section V, issue 24's
benchmark): stored bytes, write, read-all and slice times of dense (FTSF) and sparse (COO,
CSR, CSF, BSGS) tensors, beside `.npy`, `.pt` and safetensors objects on the same store,
each read whole and with smart byte ranges.

Everything goes through an emulated link (RTT 20 ms, 100 MB/s, about the paper's 1 Gbit/s)
to the S3 test server. The paper's data cannot be downloaded here, so:

- dense: a faces-like stack (N, 3, 1024, 1024) uint8 (smooth random fields plus a few bits
  of noise, so that compression gains about what the paper's FFHQ PNGs gave) with N = 256
  (`--quick`: 16), FTSF with `D^c = 3` (one image per row, as the paper);
- sparse: an Uber-shaped tensor (183, 24, 1140, 1717) with exactly 3,309,490 non-zeros,
  clustered as pickups are (weekday x rush-hour intensity, a few hundred spatial hotspots),
  values = pickup counts (float64, as a `.pt` of counts would hold); `--quick` keeps the
  shape with a tenth of the non-zeros.

Each cell is a median of repeated runs (`--reps`; slices at random starts). Bytes and
requests come from the link's counters; for table reads, Tessera's IOStats are checked
against them. Writes `tensor_tables.csv`, `tensor_tables.png` and `tensor_tables_results.md`
under `--out`.

    python benchmarks/tensor_tables.py [--quick] [--reps N] [--out DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_csv

UBER_SHAPE = (183, 24, 1140, 1717)
UBER_NNZ = 3_309_490
RTT_S, BANDWIDTH = 0.020, 100e6


def faces_like(n: int, seed: int) -> np.ndarray:
    """``n`` smooth 3 x 1024 x 1024 uint8 images: a sum of random low-frequency waves per
    channel plus 2 bits of noise (snappy keeps ~93% of the bytes, zstd ~88%: close to the
    paper's 91% for FFHQ faces under Spark's snappy)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:1024, 0:1024].astype(np.float32) / 1024
    out = np.empty((n, 3, 1024, 1024), np.uint8)
    for i in range(n):
        for c in range(3):
            field = np.zeros((1024, 1024), np.float32)
            for _ in range(4):
                fy, fx = rng.uniform(0.5, 4, 2)
                field += rng.uniform(10, 40) * np.sin(2 * np.pi * (fy * yy + fx * xx)
                                                      + rng.uniform(0, 6.3))
            noise = rng.integers(0, 4, (1024, 1024))
            out[i, c] = np.clip(128 + field + noise, 0, 255).astype(np.uint8)
    return out


def uber_like(nnz: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates ``(nnz, 4)`` and float64 counts of an Uber-shaped pickup tensor with
    exactly ``nnz`` distinct cells: days x hours with weekday and rush-hour intensities,
    locations from 300 Gaussian hotspots, counts = pickups per cell."""
    rng = np.random.default_rng(seed)
    days, hours, lat, lon = UBER_SHAPE
    hour_w = 1 + np.exp(-((np.arange(24) - 8) ** 2) / 4) * 2 + np.exp(
        -((np.arange(24) - 18) ** 2) / 6) * 2.5
    day_w = np.where(np.arange(days) % 7 >= 5, 0.8, 1.0)
    time_w = np.outer(day_w, hour_w).ravel()
    time_w /= time_w.sum()
    centers = rng.uniform([0.2 * lat, 0.2 * lon], [0.8 * lat, 0.8 * lon], (300, 2))
    spread = rng.uniform(1.5, 10, 300)
    weight = rng.pareto(1.5, 300) + 0.1
    weight /= weight.sum()
    raw = np.zeros(0, np.int64)  # every pickup's cell, as one C-order number
    linear, counts = raw, raw
    while len(linear) < nnz:
        m = int((nnz - len(linear)) * 1.6) + 1000
        t = rng.choice(days * hours, m, p=time_w)
        h = rng.choice(300, m, p=weight)
        pos = centers[h] + rng.normal(0, 1, (m, 2)) * spread[h, None]
        ok = (pos[:, 0] >= 0) & (pos[:, 0] < lat) & (pos[:, 1] >= 0) & (pos[:, 1] < lon)
        flat = (t[ok] * lat + pos[ok, 0].astype(np.int64)) * lon + pos[ok, 1].astype(np.int64)
        raw = np.concatenate([raw, flat])
        linear, counts = np.unique(raw, return_counts=True)
    keep = np.sort(rng.choice(len(linear), nnz, replace=False))
    linear, counts = linear[keep], counts[keep]
    coords = np.stack(np.unravel_index(linear, UBER_SHAPE), axis=1).astype(np.int64)
    return coords, counts.astype(np.float64)


def median_time(fn: Any, reps: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


class Bench:
    """The S3 test server behind the emulated link, and measuring helpers."""

    def __init__(self, s3: Any, link: Any) -> None:
        import tessera

        self.s3, self.link = s3, link
        self.options = s3.storage_options(endpoint=link.endpoint)
        self.store = tessera.open_store(s3.unique_url("baselines"), **self.options)

    def measure(self, fn: Any, reps: int = 1) -> dict[str, Any]:
        """Median seconds of ``fn`` and the link's counters of its last run."""
        times, result = [], None
        for _ in range(reps):
            self.link.reset_counters()
            t0 = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - t0)
        c = self.link.counters()
        return {"s": statistics.median(times), "requests": c.requests,
                "bytes_down": c.bytes_down, "body_down": c.response_body_bytes,
                "bytes_up": c.bytes_up, "result": result}

    def stored(self, prefix: str) -> int:
        return sum(o.size for o in self.store_for(prefix).list())

    def store_for(self, url_or_prefix: str) -> Any:
        import tessera

        return tessera.open_store(url_or_prefix, **self.s3.storage_options())


def npy_header(blob: bytes) -> tuple[int, tuple[int, ...], np.dtype[Any]]:
    """Offset of the data, shape and dtype of a .npy file from its first bytes."""
    f = io.BytesIO(blob)
    version = np.lib.format.read_magic(f)
    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
            else np.lib.format.read_array_header_2_0)
    shape, _, dtype = read(f)
    return f.tell(), shape, dtype


def dense_part(b: Bench, n: int, reps: int, rng: np.random.Generator) -> list[dict]:
    from safetensors.numpy import save as st_save

    from tessera.tables import TensorTable

    x = faces_like(n, seed=1)
    per_image = x[0].nbytes
    width = min(100, max(1, n // 4))  # the paper: 100 of 5,000 images
    rows: list[dict] = []

    def row(system: str, op: str, m: dict[str, Any], **extra: Any) -> None:
        rows.append({"part": "dense", "system": system, "op": op, "n": n,
                     "seconds": round(m["s"], 4), "requests": m["requests"],
                     "bytes_down": m["bytes_down"], "bytes_up": m["bytes_up"], **extra})

    buf = io.BytesIO()
    np.save(buf, x)
    npy = buf.getvalue()
    row(".npy", "write", b.measure(lambda: b.store.put("faces.npy", npy)), stored=len(npy))
    row(".npy", "read all", b.measure(lambda: np.load(io.BytesIO(bytes(
        b.store.get("faces.npy")))), reps))
    offset, _, _ = npy_header(bytes(b.store.get_range("faces.npy", 0, 256)))

    def npy_slice(start: int) -> np.ndarray:
        data = b.store.get_range("faces.npy", offset + start * per_image, width * per_image)
        return np.frombuffer(data, np.uint8).reshape(width, *x.shape[1:])

    starts = [int(s) for s in rng.integers(0, n - width + 1, reps)]
    m = b.measure(lambda: npy_slice(starts[0]), 1)
    m["s"] = statistics.median(median_time(lambda s=s: npy_slice(s), 1)[0] for s in starts)
    row(".npy", f"slice {width} (ranged)", m)
    whole = b.measure(lambda: np.load(io.BytesIO(bytes(b.store.get("faces.npy"))))[
        starts[0]:starts[0] + width], 1)
    row(".npy", f"slice {width} (whole GET)", whole)
    st = st_save({"faces": x})
    row("safetensors", "write", b.measure(lambda: b.store.put("faces.safetensors", st)),
        stored=len(st))
    head_len = struct.unpack("<Q", bytes(b.store.get_range("faces.safetensors", 0, 8)))[0]
    header = json.loads(bytes(b.store.get_range("faces.safetensors", 8, head_len)))
    base = 8 + head_len + header["faces"]["data_offsets"][0]
    m = b.measure(lambda: bytes(b.store.get_range("faces.safetensors",
                                                  base + starts[0] * per_image,
                                                  width * per_image)), 1)
    m["s"] = statistics.median(median_time(lambda s=s: b.store.get_range(
        "faces.safetensors", base + s * per_image, width * per_image), 1)[0] for s in starts)
    row("safetensors", f"slice {width} (ranged)", m)
    for codec in ("none", "snappy", "zstd"):
        from tessera.config import TablesConfig

        url = b.s3.unique_url(f"faces-{codec}")
        config = TablesConfig(codec=codec)
        tt = TensorTable.create(url, storage_options=b.options, config=config)
        w = b.measure(lambda tt=tt: tt.write("faces", x, format="ftsf", chunk_dim=3))
        stored = sum(o.size for o in b.store_for(url).list())
        row(f"FTSF {codec}", "write", w, stored=stored,
            c_r=round(stored / len(npy), 4))
        reader = TensorTable.open(url, storage_options=b.options, config=config)
        ref = reader["faces"]
        row(f"FTSF {codec}", "read all", b.measure(lambda ref=ref: ref.numpy(), reps))
        results = []
        for s in starts:
            m = b.measure(lambda ref=ref, s=s: ref[s:s + width], 1)
            got = m["result"]
            assert np.array_equal(got, x[s:s + width])
            stats = reader.last_read.stats
            m.update(iostats_requests=stats.requests, iostats_bytes=stats.bytes_received)
            results.append(m)
        m = results[0]
        m["s"] = statistics.median(r["s"] for r in results)
        row(f"FTSF {codec}", f"slice {width}", m, iostats_requests=m["iostats_requests"],
            iostats_bytes=m["iostats_bytes"], body_down=m["body_down"],
            chunk_bytes=width * per_image)
    return rows


def sparse_part(b: Bench, nnz: int, reps: int, rng: np.random.Generator) -> list[dict]:
    import torch

    from tessera.tables import TensorTable
    from tessera.tables.tensors import coo_tensor

    coords, values = uber_like(nnz, seed=2)
    t = coo_tensor(UBER_SHAPE, coords, values)
    rows: list[dict] = []

    def row(system: str, op: str, m: dict[str, Any], **extra: Any) -> None:
        rows.append({"part": "sparse", "system": system, "op": op, "n": nnz,
                     "seconds": round(m["s"], 4), "requests": m["requests"],
                     "bytes_down": m["bytes_down"], "bytes_up": m["bytes_up"], **extra})

    sp = torch.sparse_coo_tensor(torch.from_numpy(coords.T.copy()), torch.from_numpy(values),
                                 UBER_SHAPE).coalesce()
    buf = io.BytesIO()
    torch.save(sp, buf)
    pt = buf.getvalue()
    row(".pt", "write", b.measure(lambda: b.store.put("uber.pt", pt)), stored=len(pt))

    def pt_load() -> Any:
        return torch.load(io.BytesIO(bytes(b.store.get("uber.pt"))), weights_only=True)

    row(".pt", "read all", b.measure(pt_load, reps))
    days = [int(d) for d in rng.integers(0, UBER_SHAPE[0], reps)]
    m = b.measure(lambda: pt_load()[days[0]], 1)
    row(".pt", "slice one day", m)
    day_nnz = [int((coords[:, 0] == d).sum()) for d in days]
    for fmt in ("coo", "csr", "csf", "bsgs"):
        url = b.s3.unique_url(f"uber-{fmt}")
        tt = TensorTable.create(url, storage_options=b.options)
        w = b.measure(lambda tt=tt, fmt=fmt: tt.write("uber", t, format=fmt))
        stored = sum(o.size for o in b.store_for(url).list())
        info = w["result"]
        row(fmt.upper(), "write", w, stored=stored, share_of_pt=round(stored / len(pt), 4),
            bytes_per_nnz=round(stored / nnz, 2),
            block_shape=str(tt.header("uber").block_shape or ""))
        reader = TensorTable.open(url, storage_options=b.options)
        ref = reader["uber"]
        whole = b.measure(lambda ref=ref: ref.read(output="sparse"), max(1, reps // 2))
        assert whole["result"].nnz == nnz
        row(fmt.upper(), "read all", whole)
        results = []
        for d, expect in zip(days, day_nnz, strict=True):
            m = b.measure(lambda ref=ref, d=d: ref.read((d,), output="sparse"), 1)
            assert m["result"].nnz == expect
            stats = reader.last_read.stats
            m.update(iostats_requests=stats.requests, iostats_bytes=stats.bytes_received)
            results.append(m)
        m = results[0]
        m["s"] = statistics.median(r["s"] for r in results)
        row(fmt.upper(), "slice one day", m, iostats_requests=m["iostats_requests"],
            iostats_bytes=m["iostats_bytes"], body_down=m["body_down"],
            table_share=round(stored / UBER_SHAPE[0]), layout=info.layout)
    return rows


PAPER = {"FTSF / npy bytes": "0.911 (snappy)", "slice / whole npy": "0.0996",
         "FTSF write / npy": "1.855", "FTSF read all / npy": "1.250",
         "sparse / pt bytes": "< 0.1323; BSGS 0.0483", "slice / pt": "BSGS 0.447",
         "read all / pt": "BSGS 0.704", "write / pt": "CSF 0.733"}


def summary(rows: list[dict]) -> str:
    """The results table: each goal, the paper's figure and ours."""
    def get(system: str, op: str) -> dict:
        return next(r for r in rows if r["system"] == system and r["op"].startswith(op))

    lines = ["| goal | paper | ours | pass |", "|---|---|---|---|"]

    def add(goal: str, paper: str, ours: str, ok: bool | None) -> None:
        lines.append(f"| {goal} | {paper} | {ours} | "
                     f"{'-' if ok is None else 'yes' if ok else '**no**'} |")

    if any(r["part"] == "dense" for r in rows):
        npy_w, npy_all = get(".npy", "write"), get(".npy", "read all")
        whole, ranged = get(".npy", "slice") , None
        whole = next(r for r in rows if r["system"] == ".npy" and "whole GET" in r["op"])
        ranged = next(r for r in rows if r["system"] == ".npy" and "ranged" in r["op"])
        for codec in ("none", "snappy", "zstd"):
            w = get(f"FTSF {codec}", "write")
            add(f"FTSF ({codec}) stored / .npy", PAPER["FTSF / npy bytes"],
                f"{w['c_r']:.3f}", w["c_r"] <= 1.01 if codec == "none" else None)
        s = get("FTSF none", "slice")
        add("slice time / whole .npy GET (<= 0.15)", PAPER["slice / whole npy"],
            f"{s['seconds'] / whole['seconds']:.3f}", s["seconds"] <= 0.15 * whole["seconds"])
        add("slice time / ranged .npy read (<= 1.3)", "-",
            f"{s['seconds'] / ranged['seconds']:.2f}", s["seconds"] <= 1.3 * ranged["seconds"])
        moved = s["bytes_down"] / s["chunk_bytes"]
        add("slice bytes / its chunks (<= 1.05, + 1 MiB)", "-", f"{moved:.3f}",
            s["bytes_down"] <= 1.05 * s["chunk_bytes"] + (1 << 20))
        w = get("FTSF none", "write")
        add("FTSF write / .npy PUT (<= 1.5)", PAPER["FTSF write / npy"],
            f"{w['seconds'] / npy_w['seconds']:.2f}", w["seconds"] <= 1.5 * npy_w["seconds"])
        a = get("FTSF none", "read all")
        add("FTSF read all / .npy GET (<= 1.15)", PAPER["FTSF read all / npy"],
            f"{a['seconds'] / npy_all['seconds']:.2f}", a["seconds"] <= 1.15 * npy_all["seconds"])
        add("IOStats = link (requests +-2, body bytes 1%)", "-",
            f"{s['iostats_requests']} vs {s['requests']} requests, {s['iostats_bytes']:,} vs "
            f"{s['body_down']:,} B", abs(s["iostats_requests"] - s["requests"]) <= 2
            and abs(s["iostats_bytes"] - s["body_down"]) <= 0.01 * s["body_down"])
    if any(r["part"] == "sparse" for r in rows):
        pt_w, pt_all, pt_s = get(".pt", "write"), get(".pt", "read all"), get(".pt", "slice")
        for fmt in ("COO", "CSR", "CSF", "BSGS"):
            w = get(fmt, "write")
            limit = 0.06 if fmt == "BSGS" else 0.15
            add(f"{fmt} stored / .pt (<= {limit:.0%})", PAPER["sparse / pt bytes"],
                f"{w['share_of_pt']:.2%} ({w['bytes_per_nnz']} B/nnz"
                + (f", block {w['block_shape']}" if w["block_shape"] else "") + ")",
                w["share_of_pt"] <= limit)
        for fmt in ("COO", "CSF", "BSGS"):
            s = get(fmt, "slice")
            add(f"{fmt} one-day slice / .pt GET+load (<= 0.5)", PAPER["slice / pt"],
                f"{s['seconds'] / pt_s['seconds']:.3f}", s["seconds"] <= 0.5 * pt_s["seconds"])
        for fmt in ("BSGS", "CSF"):
            a = get(fmt, "read all")
            add(f"{fmt} read all / .pt (<= 0.75)", PAPER["read all / pt"],
                f"{a['seconds'] / pt_all['seconds']:.2f}",
                a["seconds"] <= 0.75 * pt_all["seconds"])
        w = get("CSF", "write")
        add("CSF write / .pt (<= 0.8)", PAPER["write / pt"],
            f"{w['seconds'] / pt_w['seconds']:.2f}", w["seconds"] <= 0.8 * pt_w["seconds"])
        for fmt in ("COO", "CSR", "BSGS"):
            w = get(fmt, "write")
            add(f"{fmt} write / .pt (<= 1.5)", "-", f"{w['seconds'] / pt_w['seconds']:.2f}",
                w["seconds"] <= 1.5 * pt_w["seconds"])
        s = get("BSGS", "slice")
        add("BSGS slice bytes <= 3 x table / 183 + 256 KiB", "-",
            f"{s['bytes_down']:,} vs {3 * s['table_share'] + 262144:,}",
            s["bytes_down"] <= 3 * s["table_share"] + 262144)
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, part in zip(axes, ("dense", "sparse"), strict=True):
        mine = [r for r in rows if r["part"] == part]
        ops = list(dict.fromkeys(r["op"] for r in mine))
        systems = list(dict.fromkeys(r["system"] for r in mine))
        for i, system in enumerate(systems):
            xs, ys = [], []
            for j, op in enumerate(ops):
                hit = [r for r in mine if r["system"] == system and r["op"] == op]
                if hit:
                    xs.append(j + i * 0.8 / len(systems))
                    ys.append(hit[0]["seconds"])
            ax.bar(xs, ys, width=0.8 / len(systems), label=system)
        ax.set_xticks(range(len(ops)))
        ax.set_xticklabels(ops, rotation=20, fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("seconds (median)")
        ax.set_title(f"{part} tensors, 20 ms RTT, 100 MB/s")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "tensor_tables.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="16 images, a tenth of the nnz")
    parser.add_argument("--reps", type=int, default=None, help="repeats per cell (5; quick 3)")
    parser.add_argument("--images", type=int, default=None, help="dense images (256)")
    parser.add_argument("--nnz", type=int, default=None, help="sparse non-zeros (3,309,490)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args(argv)
    reps = args.reps or (3 if args.quick else 5)
    n = args.images or (16 if args.quick else 256)
    nnz = args.nnz or (UBER_NNZ // 10 if args.quick else UBER_NNZ)
    if reps < 1 or n < 4 or nnz < 1000:
        parser.error("--reps >= 1, --images >= 4 and --nnz >= 1000")
    args.out.mkdir(parents=True, exist_ok=True)
    from tessera.testing import EmulatedLink, S3TestServer

    rng = np.random.default_rng(0)
    with S3TestServer() as s3, EmulatedLink(s3.port, one_way_delay_s=RTT_S / 2,
                                            bandwidth=BANDWIDTH) as link:
        bench = Bench(s3, link)
        rows = dense_part(bench, n, reps, rng)
        rows += sparse_part(bench, nnz, reps, rng)
    write_csv(args.out / "tensor_tables.csv", rows)
    plot(rows, args.out)
    table = summary(rows)
    (args.out / "tensor_tables_results.md").write_text(table)
    for r in rows:
        print(f"{r['part']:6} {r['system']:12} {r['op']:22} {r['seconds']:8.3f} s "
              f"{r['requests']:5} req {r['bytes_down']:>13,} B down"
              + (f", stored {r['stored']:,} B" if "stored" in r else ""))
    print("\n" + table)
    print(f"wrote {args.out}/tensor_tables.csv, tensor_tables.png, tensor_tables_results.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
