"""One pushdown server against two (a fleet, tiles shared by rendezvous hashing) and against
one server with two worker processes: the same forced-pushdown reads of a zstd array in front
of the S3 test server, every server's tile cache cold at the first read and warm at the
next, each answer checked against numpy. Reports seconds per read, tiles per server, and
the ceiling: the same reads fetched directly from the store (no server).

    python benchmarks/fleet.py [--side 2048] [--reps 3] [--out DIR]

Writes ``fleet.csv``, ``fleet.png`` and ``fleet_results.md`` under ``--out`` (default
benchmarks/out; committed results: --out benchmarks/results). On this project's 2-core
machine the S3 test server, the servers and the client share two cores, so a second server
or worker cannot add cores: the figures show the routing's overhead and the cache split,
not a speed-up that needs more machines.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import tessera
from _common import write_csv
from tessera.pushdown.fleet import PushdownFleet
from tessera.testing import PushdownTestServer, S3TestServer


def _timed(arr: Any, sel: Any, want: np.ndarray, method: str) -> float:
    start = time.perf_counter()
    got = arr.read(sel, method=method)
    took = time.perf_counter() - start
    if not np.array_equal(got, want):
        raise SystemExit(f"wrong data through {arr.pushdown}")
    if method == "pushdown" and arr.last_read.pushdown_fallbacks:
        raise SystemExit(f"{arr.last_read.pushdown_fallbacks} tiles fell back: "
                         f"{arr.last_read.pushdown_error}")
    return took


def measure(name: str, url: str, opts: dict[str, Any], pushdown: Any, sel: Any,
            want: np.ndarray, reps: int) -> dict[str, Any]:
    arr = tessera.open_array(url, storage_options=opts, pushdown=pushdown)
    method = "get" if pushdown is None else "pushdown"
    cold = _timed(arr, sel, want, method)
    servers = dict(arr.last_read.pushdown_servers)
    warm = statistics.median(_timed(arr, sel, want, method) for _ in range(reps))
    tiles = len(arr.last_read.tile_reads)
    row = {"system": name, "cold_s": round(cold, 4), "warm_s": round(warm, 4),
           "tiles": tiles, "requests_per_server": ";".join(
               f"{u.rsplit(':', 1)[-1]}={n}" for u, n in sorted(servers.items()))}
    print(f"{name:>28}: cold {cold:.3f} s, warm {warm:.3f} s, {tiles} tiles, "
          f"requests {servers or '-'}")
    return row


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["system"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4))
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["cold_s"] for r in rows], 0.4, label="cold caches")
    ax.bar(x + 0.2, [r["warm_s"] for r in rows], 0.4, label="warm caches")
    ax.set_xticks(x, names, rotation=15, ha="right")
    ax.set_ylabel("seconds per read")
    ax.set_title("Forced pushdown reads: one server, two, one with two workers")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", type=int, default=2048)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = np.random.default_rng(0).integers(0, 1000, (args.side, args.side)).astype(np.int32)
    sel = (slice(None), slice(100, 182))  # an 82-column slab: one tile column, every row
    want = data[sel]
    rows = []
    with S3TestServer() as s3:
        opts = dict(s3.storage_options())
        url = s3.unique_url("fleet")
        tessera.from_numpy(url, data, tile=(64, 128), codec="zstd", storage_options=opts)
        rows.append(measure("direct (no server)", url, opts, None, sel, want, args.reps))
        root = s3.url("")
        with PushdownTestServer(root, storage_options=opts) as one:
            rows.append(measure("1 server", url, opts, one.client(), sel, want, args.reps))
        with PushdownTestServer(root, storage_options=opts) as a, \
                PushdownTestServer(root, storage_options=opts, token=a.token) as b:
            fleet = PushdownFleet([a.url, b.url], token=a.token)
            rows.append(measure("2 servers (fleet)", url, opts, fleet, sel, want, args.reps))
        with PushdownTestServer(root, storage_options=opts,
                                extra_args=["--workers", "2"], start_timeout_s=90) as w:
            rows.append(measure("1 server, 2 workers", url, opts, w.client(), sel, want,
                                args.reps))
    write_csv(args.out / "fleet.csv", rows)
    plot(rows, args.out / "fleet.png")
    lines = ["# One pushdown server, two, and one with two workers", "",
             f"`python benchmarks/fleet.py --side {args.side}`: an 82-column slab of a "
             f"{args.side} x {args.side} int32 zstd array in 64 x 128 tiles, forced pushdown, "
             "in front of the S3 test server on loopback; cold: every server's tile cache "
             f"empty; warm: median of {args.reps} more reads. All on one 2-core machine.", "",
             "| system | cold s | warm s | tiles | requests per server (port=n) |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['system']} | {r['cold_s']} | {r['warm_s']} | {r['tiles']} | "
                     f"{r['requests_per_server'] or '-'} |")
    (args.out / "fleet_results.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}/fleet.csv, fleet.png, fleet_results.md")


if __name__ == "__main__":
    main()
