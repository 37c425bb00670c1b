"""Streamed reads hold at most their output plus a window: the peak memory of a whole-array
read from the S3 test server on loopback (no emulated link, where decoding is what falls
behind), for several ``ReadConfig.window_bytes``, raw and zstd tiles.

Each read runs in a fresh Python process: it opens the array and reads one tile first (the
imports, the connection pool, the fragments' bookkeeping), then measures its resident set
(``VmRSS``), resets the kernel's high-water mark (``/proc/self/clear_refs``), reads the whole
array and takes ``VmHWM``. The peak growth over the baseline is set beside the output's
bytes plus the window, and beside the largest bytes of tiles the read held at once
(``last_read.window_peak_bytes``), with the read's seconds and MB/s (median of ``--reps``
processes) and obstore's own concurrent GETs of the same objects as the ceiling.

Each read runs twice over: with glibc's default allocator settings and with
``MALLOC_MMAP_THRESHOLD_=131072``. By default glibc raises its mmap threshold after the
first large block is freed, so later tile buffers come from its heaps and freed ones stay in
the resident set: the process's peak then counts bytes the read no longer held. A fixed
threshold gives each tile buffer its own mapping, returned when freed.

The second part measures the streamed ``/v1/read``: an 82-column slab of the same arrays
through a pushdown server without a tile cache (every read cold) that reads the store
directly (in-region), the client reaching the server through an emulated link (none,
1 Gbit/s with RTT 1 ms, 100 MB/s with RTT 5 ms); each answer whole (the server answers once
every tile is read) and streamed (each tile's cells sent as soon as they are ready), median
of ``--reps`` reads, beside the model RTT + the server's read + cells / bandwidth (the
server's read measured as the same slab read directly from the store on loopback, cold).

    python benchmarks/streaming.py [--side 4096] [--reps 3] [--windows MIB ...] [--out DIR]

Writes ``streaming.csv``, ``streaming_pushdown.csv``, ``streaming.png`` and
``streaming_results.md`` under ``--out``
(default benchmarks/out; committed results: --out benchmarks/results). Linux only (it reads
``/proc``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import tessera
from _common import write_csv
from tessera.testing import S3TestServer

TILE = 512
MIB = 1 << 20
#: Windows measured (MiB); 4096: in effect no window (every tile of a 64 MiB array at once).
WINDOWS_MIB = (4096, 128, 32, 8)
#: Allocator settings each read runs under: name -> environment.
ALLOCATORS: dict[str, dict[str, str]] = {
    "glibc default": {},
    "mmap threshold 128 KiB": {"MALLOC_MMAP_THRESHOLD_": "131072"},
}


def _status(field: str) -> int:
    """A ``/proc/self/status`` figure in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise SystemExit(f"no {field} in /proc/self/status")


def child(url: str, options: dict[str, Any], window: int) -> dict[str, Any]:
    """One measured whole read in this (fresh) process."""
    import gc

    arr = tessera.open_array(url, storage_options=options)
    arr.reads = dataclasses.replace(arr.reads, window_bytes=window)
    arr[0:TILE, 0:TILE]  # imports, connections, bookkeeping: not the read's
    gc.collect()
    base = _status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    start = time.perf_counter()
    cpu = time.process_time()
    out = arr[...]
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = _status("VmHWM")
    return {"seconds": took, "cpu_s": cpu, "growth": peak - base, "output": out.nbytes,
            "held": arr.last_read.window_peak_bytes, "sum": int(out.sum(dtype=np.int64))}


def _obstore_gets(s3: S3TestServer, url: str) -> float:
    """Seconds (best of 3) for obstore to GET, 32 at once, exactly the byte ranges of the
    tiles a whole read of the array at ``url`` takes (the ceiling; throughput.py's)."""
    from throughput import _get_ranges, _obstore

    arr = tessera.open_array(url, storage_options=s3.storage_options())
    arr[...]
    pieces = [(r.key, r.offset, r.length) for r in arr.last_read.tile_reads]
    store = _obstore(s3, s3.endpoint, url.split("/", 3)[3])
    times = []
    for _ in range(3):
        start = time.perf_counter()
        _get_ranges(store, pieces)
        times.append(time.perf_counter() - start)
    return min(times)


def measure(s3: S3TestServer, url: str, codec: str | None, window_mib: int,
            reps: int, allocator: str, want: int) -> dict[str, Any]:
    """Peak growth, held bytes and speed of ``reps`` whole reads, each in a fresh process
    (checked against ``want``, the array's sum)."""
    runs = []
    for _ in range(reps):
        got = subprocess.run([sys.executable, __file__, "--child", url,
                              json.dumps(dict(s3.storage_options())), str(window_mib * MIB)],
                             capture_output=True, text=True, check=False,
                             env={**os.environ, **ALLOCATORS[allocator]})
        if got.returncode:
            raise SystemExit(f"child failed:\n{got.stderr}")
        runs.append(json.loads(got.stdout.strip().splitlines()[-1]))
        if runs[-1]["sum"] != want:
            raise SystemExit(f"wrong data: sum {runs[-1]['sum']} != {want}")
    growth = max(r["growth"] for r in runs)  # the worst peak of the runs
    output = runs[0]["output"]
    bound = output + window_mib * MIB
    seconds = statistics.median(r["seconds"] for r in runs)
    row = {"codec": codec or "raw", "allocator": allocator, "window_MiB": window_mib,
           "output_MiB": round(output / MIB, 1),
           "peak_growth_MiB": round(growth / MIB, 1),
           "bound_MiB": round(bound / MIB, 1),
           "growth_over_bound": round(growth / bound, 3),
           "held_peak_MiB": round(max(r["held"] for r in runs) / MIB, 1),
           "seconds": round(seconds, 4), "MB_per_s": round(output / seconds / 1e6, 1),
           "cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 3)}
    print(f"{row['codec']:>4} {allocator:>22}, window {window_mib:>5} MiB: peak "
          f"+{row['peak_growth_MiB']} MiB (output + window: {row['bound_MiB']}), held "
          f"{row['held_peak_MiB']} MiB, {seconds:.3f} s")
    return row


#: Links between the client and the pushdown server: name -> (bytes/s, one-way delay s).
PUSH_LINKS: dict[str, tuple[float, float] | None] = {
    "none": None, "1 Gbit/s": (1e9 / 8, 0.0005), "100 MB/s": (100e6, 0.0025)}


def pushdown_rows(s3: S3TestServer, urls: dict[str, str], data: np.ndarray,
                  reps: int) -> list[dict[str, Any]]:
    """The slab through a cold pushdown server, whole and streamed, per link and codec."""
    import dataclasses as dc

    from tessera.pushdown.client import PushdownClient
    from tessera.testing import EmulatedLink, PushdownTestServer

    sel = (slice(None), slice(150, 232))
    want = data[sel]
    rows = []
    server = PushdownTestServer(s3.url(""), storage_options=s3.storage_options(),
                                extra_args=["--cache-bytes", "0"]).start()
    try:
        for codec, url in urls.items():
            direct = []
            for _ in range(reps):  # what the server does: read the slab beside the store
                arr = tessera.open_array(url, storage_options=s3.storage_options())
                start = time.perf_counter()
                arr[sel]
                direct.append(time.perf_counter() - start)
            server_read = statistics.median(direct)
            for link_name, spec in PUSH_LINKS.items():
                hop = None if spec is None else EmulatedLink(
                    server.port, one_way_delay_s=spec[1], bandwidth=spec[0]).start()
                try:
                    endpoint = server.url if hop is None else hop.endpoint
                    rtt = 0.0 if spec is None else 2 * spec[1]
                    model = rtt + server_read + (0.0 if spec is None else want.nbytes / spec[0])
                    for stream in (False, True):
                        client = PushdownClient(endpoint, token=server.token)
                        client.config = dc.replace(client.config, stream=stream)
                        arr = tessera.open_array(url, storage_options=s3.storage_options(),
                                                 pushdown=client)
                        times = []
                        for _ in range(reps + 1):
                            start = time.perf_counter()
                            got = arr.read(sel, method="pushdown")
                            times.append(time.perf_counter() - start)
                            if (arr.last_read.pushdown_fallbacks
                                    or not np.array_equal(got, want)):
                                raise SystemExit(f"pushdown went wrong: "
                                                 f"{arr.last_read.pushdown_error}")
                        took = statistics.median(times[1:])  # the first opens connections
                        rows.append({"part": "pushdown", "codec": codec, "link": link_name,
                                     "answer": "streamed" if stream else "whole",
                                     "seconds": round(took, 4),
                                     "server_read_s": round(server_read, 4),
                                     "model_s": round(model, 4),
                                     "over_model": round(took / model, 2)})
                        print(f"pushdown {codec:>4} {link_name:>9} "
                              f"{rows[-1]['answer']:>8}: {took:.4f} s (model {model:.4f})")
                finally:
                    if hop is not None:
                        hop.stop()
    finally:
        server.stop()
    return rows


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for codec in ("raw", "zstd"):
        for allocator, style in zip(ALLOCATORS, ("o-", "s:"), strict=True):
            mine = [r for r in rows if r["codec"] == codec and r["allocator"] == allocator]
            xs = [min(r["window_MiB"], 256) for r in mine]
            ax.plot(xs, [r["peak_growth_MiB"] for r in mine], style,
                    label=f"{codec}, {allocator}")
    mine = [r for r in rows if r["codec"] == "raw" and r["allocator"] == "glibc default"]
    ax.plot([min(r["window_MiB"], 256) for r in mine], [r["bound_MiB"] for r in mine], "k--",
            label="output + window")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("window (MiB; 256 = none)")
    ax.set_ylabel("peak memory growth (MiB)")
    ax.set_title("whole-array read, S3 test server on loopback")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def results_md(rows: list[dict[str, Any]], ceilings: dict[str, float], side: int,
               push: list[dict[str, Any]]) -> str:
    lines = ["# Streamed reads: peak memory against the window (benchmarks/streaming.py)", "",
             f"A whole {side} x {side} int32 array in {TILE} x {TILE} tiles from the S3 test "
             "server on loopback; each read in a fresh process; peak growth is VmHWM over the "
             "resident set before the read (the worst of the runs). Goal: growth <= output + "
             "window (+10%).", "",
             "| codec | allocator | window MiB | output MiB | peak growth MiB | "
             "output + window MiB | growth / bound | tiles held at once MiB | seconds | MB/s | "
             "CPU s | obstore GETs s | met |", "|" + "---|" * 13]
    for r in rows:
        ok = r["growth_over_bound"] <= 1.10
        lines.append(
            f"| {r['codec']} | {r['allocator']} | {r['window_MiB']} | {r['output_MiB']} | "
            f"{r['peak_growth_MiB']} "
            f"| {r['bound_MiB']} | {r['growth_over_bound']} | {r['held_peak_MiB']} | "
            f"{r['seconds']} | {r['MB_per_s']} | {r['cpu_s']} | {ceilings[r['codec']]:.4f} | "
            f"{'yes' if ok else 'no'} |")
    if push:
        lines += ["", "## Streamed /v1/read (cold server)", "",
                  "The 82-column slab (all rows, columns 150..231) through a pushdown server "
                  "without a tile cache, whole and streamed, medians; model: RTT + the server's "
                  "read (the slab read directly from the store on loopback) + cells / "
                  "bandwidth. Goal: within 1.3x of the model.", "",
                  "| codec | link | answer | seconds | server read s | model s | over model |"
                  " met |", "|" + "---|" * 8]
        for r in push:
            lines.append(f"| {r['codec']} | {r['link']} | {r['answer']} | {r['seconds']} | "
                         f"{r['server_read_s']} | {r['model_s']} | {r['over_model']} | "
                         f"{'yes' if r['over_model'] <= 1.3 else 'no'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--windows", type=int, nargs="+", default=list(WINDOWS_MIB),
                        help="windows to measure, MiB")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = np.random.default_rng(0).normal(0, 100, (args.side, args.side)).astype(np.int32)
    rows: list[dict[str, Any]] = []
    ceilings: dict[str, float] = {}
    urls: dict[str, str] = {}
    with S3TestServer() as s3:
        for codec in (None, "zstd"):
            url = urls[codec or "raw"] = s3.unique_url(f"stream-{codec}")
            tessera.from_numpy(url, data, tile=(TILE, TILE), codec=codec,
                               storage_options=s3.storage_options())
            ceilings[codec or "raw"] = _obstore_gets(s3, url)
            for allocator in ALLOCATORS:
                for window in args.windows:
                    rows.append(measure(s3, url, codec, window, args.reps, allocator,
                                        int(data.sum(dtype=np.int64))))
        push = pushdown_rows(s3, urls, data, args.reps)
    write_csv(args.out / "streaming.csv", rows)
    write_csv(args.out / "streaming_pushdown.csv", push)
    plot(rows, args.out / "streaming.png")
    (args.out / "streaming_results.md").write_text(results_md(rows, ceilings, args.side, push))
    print(f"wrote {args.out}/streaming.csv, streaming_pushdown.csv, streaming.png, "
          "streaming_results.md")


if __name__ == "__main__":
    main()
