"""The viewer's two speed figures, measured over HTTP as a browser asks: a page of 48
thumbnails of a 10,000-image set, and a pan of the slice viewer over an 8192 x 8192 int32
array, both on a local folder; with the bytes each view read.

Each view is one request to ``tessera view``'s API on this machine (read, colour map, PNG,
JSON), timed by the client; beside it, the engine's own read of the same selection in this
process (the floor the viewer's own work sits on). Goals: a page under 1 s, a pan under
200 ms per view. The overview (the whole array into 512 x 512, a strided sample) is read
twice: as the planner chooses on the local folder, and through a pushdown server on this
machine (``tessera serve``), which samples the tiles so that only the cells drawn travel.

    python benchmarks/viewer.py                  # 10,000 images, 8192 x 8192 (about 2 min)
    python benchmarks/viewer.py --quick          # 2,000 images, 4096 x 4096
    python benchmarks/viewer.py --screenshots docs/images   # also the docs' screenshots

Writes ``benchmarks/results/viewer.csv`` (every view), ``viewer.md`` (medians) and
``viewer.png`` (medians against the goals).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import tessera
from _common import write_csv
from tessera.testing.view_store import pictures
from tessera.view import Viewer, running

RESULTS = Path(__file__).parent / "results"
GOALS = {"thumbnail page": 1.0, "pan at 1:1": 0.2}


def build(root: Path, images: int, side: int, size: int) -> None:
    """The image set and the array, written once into ``root``."""
    if not (root / "photos").exists():
        cols = tessera.create_images(str(root / "photos"), size=(size, size))
        batch = pictures(500, size, seed=1)
        with cols.writer() as w:
            for start in range(0, images, len(batch)):
                w.append(batch[: min(len(batch), images - start)])
        cols.consolidate()
    if not (root / "big").exists():
        values = (np.arange(side, dtype=np.int32)[:, None] * 7
                  + np.arange(side, dtype=np.int32)[None, :])
        tessera.from_numpy(str(root / "big"), values, tile=(256, 256))


def timed(http: httpx.Client, name: str, **params: Any) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    answer = http.get(f"api/{name}", params=params)
    seconds = time.perf_counter() - start
    answer.raise_for_status()
    return seconds, answer.json()


def run(root: Path, side: int, reps: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    rng = np.random.default_rng(0)
    with running(Viewer(str(root), budget_bytes=1 << 30)) as address, \
            httpx.Client(base_url=address.split("?")[0], timeout=600,
                         params={"token": address.split("token=")[1]}) as http:
        images = tessera.open(str(root / "photos"))
        pages = len(images) // 48
        for i, page in enumerate([0, *rng.integers(1, pages, reps).tolist()]):
            s, doc = timed(http, "images/grid", path="photos", page=page)
            ids = doc["ids"]
            t0 = time.perf_counter()
            images.read(ids, scale=doc["scale"])
            engine = time.perf_counter() - t0
            rows.append({"view": "thumbnail page", "first": i == 0, "seconds": s,
                         "engine_seconds": engine, "bytes": doc["measured"]["bytes"],
                         "requests": doc["measured"]["requests"], "detail": f"page {page}"})
        arr = tessera.open(str(root / "big"))
        rows += overviews(http, "overview (whole array into 512 x 512)", reps)
        for zoom, label in ((1, "pan at 1:1"), (4, "pan at 1:4")):
            extent = 512 * zoom
            y, x = (int(v) for v in rng.integers(0, side - extent - 64 * zoom * reps, 2))
            for i in range(reps + 1):  # a drag: each view 64 screen pixels on from the last
                y0, x0 = y + i * 16 * zoom, x + i * 64 * zoom
                s, doc = timed(http, "array/view", path="big", y0=y0, y1=y0 + extent,
                               x0=x0, x1=x0 + extent, w=512, h=512)
                t0 = time.perf_counter()
                arr[y0:y0 + extent:zoom, x0:x0 + extent:zoom]
                engine = time.perf_counter() - t0
                rows.append({"view": label, "first": i == 0, "seconds": s,
                             "engine_seconds": engine, "bytes": doc["measured"]["bytes"],
                             "requests": doc["measured"]["requests"],
                             "detail": f"step {doc['step']}, {doc['methods']}"})
    from tessera.testing.pushdown import PushdownTestServer

    with PushdownTestServer(str(root)) as server, \
            running(Viewer(str(root), budget_bytes=1 << 30, pushdown=server.client())) as url, \
            httpx.Client(base_url=url.split("?")[0], timeout=600,
                         params={"token": url.split("token=")[1]}) as http:
        rows += overviews(http, "overview through a pushdown server", reps)
    return rows


def overviews(http: httpx.Client, label: str, reps: int) -> list[dict[str, Any]]:
    """The whole array into 512 x 512, ``reps`` times after a first."""
    rows = []
    for i in range(max(3, reps // 4) + 1):
        s, doc = timed(http, "array/view", path="big", w=512, h=512)
        rows.append({"view": label, "first": i == 0, "seconds": s,
                     "bytes": doc["measured"]["bytes"], "requests": doc["measured"]["requests"],
                     "detail": f"step {doc['step']}, {doc['methods']}"})
    return rows


def summary(rows: list[dict[str, Any]], images: int, side: int) -> str:
    lines = [f"Views over HTTP on a local folder: {images:,} images of the image set, an "
             f"{side} x {side} int32 array in 256 x 256 tiles. Medians over the views after "
             "the first (the first view of each kind opens its handle; shown apart).", "",
             "| view | views | median s | first s | engine read s (median) | bytes per view "
             "(median) | requests | goal |", "|---|---|---|---|---|---|---|---|"]
    for view in dict.fromkeys(r["view"] for r in rows):
        these = [r for r in rows if r["view"] == view]
        later = [r for r in these if not r["first"]] or these
        engine = [r["engine_seconds"] for r in later if "engine_seconds" in r]
        goal = GOALS.get(view)
        cells = [view, str(len(these)),
                 f"{statistics.median(r['seconds'] for r in later):.3f}",
                 f"{next(r['seconds'] for r in these if r['first']):.3f}",
                 f"{statistics.median(engine):.3f}" if engine else "-",
                 f"{statistics.median(r['bytes'] for r in later):,.0f}",
                 f"{statistics.median(r['requests'] for r in later):.0f}",
                 f"< {goal:g} s" if goal else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    views = list(GOALS)
    medians = [statistics.median(r["seconds"] for r in rows if r["view"] == v and not r["first"])
               for v in views]
    engine = [statistics.median(r["engine_seconds"] for r in rows
                                if r["view"] == v and not r["first"]) for v in views]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    at = np.arange(len(views))
    ax.bar(at - 0.2, medians, 0.4, label="view over HTTP (read + PNG + JSON)")
    ax.bar(at + 0.2, engine, 0.4, label="the engine's read alone")
    for i, v in enumerate(views):
        ax.hlines(GOALS[v], i - 0.45, i + 0.45, colors="crimson", linestyles="dashed",
                  label="goal" if i == 0 else None)
    ax.set_xticks(at, views)
    ax.set_ylabel("seconds (median)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("tessera view: a page of 48 thumbnails, a pan of the slice viewer")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def screenshots(folder: Path) -> None:
    """The docs' screenshots of each page kind, on the sample store."""
    import shutil

    from playwright.sync_api import sync_playwright

    from tessera.testing.view_store import sample_store

    folder.mkdir(parents=True, exist_ok=True)
    shots = {"store": "#/", "array": "#/array/volume?index=1,0,0&cmap=cubehelix",
             "sparse": "#/array/points", "table": "#/table/tensors?id=weights%2Fdense",
             "images": "#/images/photos", "image": "#/image/photos?id=5&k=8",
             "h5": "#/h5/legacy.h5", "models": "#/models"}
    import os

    folder = folder.resolve()
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # the pages show the URL as a user types it: `data`
        sample_store("data")
        from tessera.frozen.manifest import InputSpec
        from tessera.frozen.models import init_model

        init_model("resnet18", "models", name="r18", num_classes=10,
                   input=InputSpec(height=32, width=32))
        with running(Viewer("data", models=Path("models"))) as address, \
                sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = browser.new_page(viewport={"width": 1200, "height": 860})
            for i, (name, fragment) in enumerate(shots.items()):
                page.goto(f"{address}&visit={i}{fragment}")  # a new document each time
                page.wait_for_selector("body[data-state=ready]")
                page.screenshot(path=str(folder / f"viewer-{name}.png"))
            browser.close()
        os.chdir(here)
    print(f"wrote {len(shots)} screenshots to {folder}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 images, 4096 x 4096")
    parser.add_argument("--reps", type=int, default=12, help="views per kind after the first")
    parser.add_argument("--image-size", type=int, default=128, help="image side in pixels")
    parser.add_argument("--keep", type=Path, help="keep the data in this folder (reused)")
    parser.add_argument("--screenshots", type=Path, metavar="FOLDER",
                        help="also write the docs' screenshots into FOLDER")
    args = parser.parse_args()
    images, side = (2000, 4096) if args.quick else (10_000, 8192)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        t0 = time.perf_counter()
        build(root, images, side, args.image_size)
        print(f"data ready in {time.perf_counter() - t0:.1f} s")
        rows = run(root, side, args.reps)
    RESULTS.mkdir(exist_ok=True)
    write_csv(RESULTS / "viewer.csv", rows)
    text = summary(rows, images, side)
    (RESULTS / "viewer.md").write_text(text)
    plot(rows, RESULTS / "viewer.png")
    print(text)
    if args.screenshots:
        screenshots(args.screenshots)


if __name__ == "__main__":
    main()
