"""The viewer's array views: any 2-D plane of an N-D array, at the resolution in view.

A view is a box ``[y0, y1) x [x0, x1)`` of positions on two axes (``axes``), the other
axes held at ``index``, drawn into at most ``w x h`` pixels: the array is read with the
step ``ceil(max((y1 - y0) / h, (x1 - x0) / w))`` on both axes (a strided sample: only the
tiles in the box, fetched as the planner chooses; with a pushdown server, a zoomed-out
view is read through it, so only the sampled cells cross the link). The
read is planned first (``explain``) and refused over the viewer's budget; the answer
carries the picture, the plan the read followed (per tile its method; requests, bytes,
seconds and dollars, estimated and measured) and a histogram of the values drawn.

Sparse arrays draw their cells as points (one pixel per cell at the step, transparent
between them).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tessera.describe import array_doc
from tessera.errors import InvalidArgumentError
from tessera.query.plan import Plan
from tessera.view.core import Viewer
from tessera.view.params import Query
from tessera.view.pictures import (
    COLOUR_MAPS,
    data_url,
    histogram,
    levels,
    paint,
    value_range,
)

#: The most pixels a view draws on each side.
MAX_SIDE = 2048
#: Tiles drawn in the plan overlay at most (more are counted, not drawn).
MAX_OVERLAY_TILES = 4096


def page(viewer: Viewer, q: Query) -> dict[str, Any]:
    """An array's page: its ``info`` document and its history (oldest first)."""
    path, at = q.text("path", "") or "", q.text("at")
    arr = viewer.open_kind(path, at, "array", fresh=True)
    doc = array_doc(path, arr)
    doc["history"] = arr.history().to_dicts()
    doc["colour_maps"] = list(COLOUR_MAPS)
    return doc


def _geometry(arr: Any, q: Query) -> tuple[list[int], int | None, int, list[int]]:
    """The full index (one position per axis), the view's y axis (``None`` for a 1-D
    array), its x axis, and the shape."""
    shape = list(arr.shape)
    nd = len(shape)
    axes = q.integers("axes", [nd - 2, nd - 1] if nd >= 2 else [0])
    if nd == 1:
        axes = [-1, 0] if axes in ([0], [-1, 0]) else axes
    if len(axes) != 2 or any(not -1 <= a < nd for a in axes) or axes[0] == axes[1] or \
            (nd >= 2 and min(axes) < 0):
        raise InvalidArgumentError(f"axes must be two different axes of the array's {nd}, "
                                   f"got {axes}")
    index = q.integers("index", [0] * nd)
    if len(index) != nd:
        raise InvalidArgumentError(f"index must give one position per axis ({nd}), got "
                                   f"{len(index)}")
    for d, (i, n) in enumerate(zip(index, shape, strict=True)):
        if not 0 <= i < max(n, 1):
            raise InvalidArgumentError(f"index[{d}] = {i} is outside the array's {n} "
                                       "positions on that axis")
    ay = None if axes[0] < 0 else axes[0]
    return index, ay, axes[1], shape


def _box(q: Query, ny: int, nx: int) -> tuple[int, int, int, int, int, int, int]:
    """The box clamped to the array, the pixels asked for, and the step."""
    y0 = min(max(q.integer("y0", 0), 0), max(ny - 1, 0))
    x0 = min(max(q.integer("x0", 0), 0), max(nx - 1, 0))
    y1 = min(max(q.integer("y1", ny), y0 + 1), ny)
    x1 = min(max(q.integer("x1", nx), x0 + 1), nx)
    w = q.integer("w", 512, lo=1, hi=MAX_SIDE)
    h = q.integer("h", 512, lo=1, hi=MAX_SIDE)
    step = max(1, math.ceil(max((y1 - y0) / h, (x1 - x0) / w)))
    return y0, y1, x0, x1, w, h, step


def _selection(index: list[int], ay: int | None, ax: int, box: tuple[int, ...],
               step: int) -> tuple[Any, ...]:
    y0, y1, x0, x1 = box
    sel: list[Any] = list(index)
    if ay is not None:
        sel[ay] = slice(y0, y1, step)
    sel[ax] = slice(x0, x1, step)
    return tuple(sel)


def selection_text(sel: tuple[Any, ...]) -> str:
    """A selection as numpy writes it.

    >>> selection_text((3, slice(0, 8, 2), slice(1, 4)))
    '3, 0:8:2, 1:4'
    """
    return ", ".join((f"{s.start}:{s.stop}" + ("" if s.step is None else f":{s.step}"))
                     if isinstance(s, slice) else str(s) for s in sel)


def _plan_doc(plan: Plan | None, stats: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"methods": {}, "estimated": None, "measured": None}
    if plan is not None:
        out["methods"] = plan.methods
        out["estimated"] = {"requests": len(plan.requests), "bytes": plan.totals.nbytes,
                            "seconds": plan.estimate.seconds, "dollars": plan.estimate.dollars,
                            "pricing": plan.pricing}
    if stats is not None:
        pricing = plan.pricing if plan is not None else "s3"
        out["measured"] = {"requests": stats.requests, "bytes": stats.bytes_received,
                           "seconds": stats.elapsed_s, "dollars": stats.cost_usd(pricing)}
    return out


def _overlay(arr: Any, report: Any, ay: int | None, ax: int) -> tuple[list[list[Any]], int]:
    """Per tile read ``[y0, y1, x0, x1, method]`` in positions (at most
    :data:`MAX_OVERLAY_TILES`), and how many tiles the read planned."""
    plan = report.plan
    if plan is None or len(plan.choices) != len(report.tile_reads):
        return [], 0 if plan is None else len(plan.choices)
    dims = arr.schema.dims
    tiles: list[list[Any]] = []
    for choice, read in zip(plan.choices[:MAX_OVERLAY_TILES],
                            report.tile_reads[:MAX_OVERLAY_TILES], strict=True):
        x = read.tile_origin[ax] - dims[ax].domain[0]
        if ay is None:
            y, ty = 0, 1
        else:
            y, ty = read.tile_origin[ay] - dims[ay].domain[0], dims[ay].tile
        ny = 1 if ay is None else arr.shape[ay]  # edge tiles end where the array ends
        tiles.append([int(y), int(min(y + ty, ny)), int(x),
                      int(min(x + dims[ax].tile, arr.shape[ax])), choice.method])
    return tiles, len(plan.choices)


def view(viewer: Viewer, q: Query) -> dict[str, Any]:
    """A view of an array (see the module docstring)."""
    path, at = q.text("path", "") or "", q.text("at")
    arr = viewer.open_kind(path, at, "array")
    names = [a.name for a in arr.schema.attrs]
    attr = q.choice("attr", names, names[0])
    cmap = q.choice("cmap", list(COLOUR_MAPS), next(iter(COLOUR_MAPS)))
    index, ay, ax, shape = _geometry(arr, q)
    ny = 1 if ay is None else shape[ay]
    y0, y1, x0, x1, _, _, step = _box(q, ny, shape[ax])
    with viewer.lock:
        if arr.schema.sparse:
            values, rgba_mask, answer = _sparse(viewer, arr, attr, index, ay, ax,
                                                (y0, y1, x0, x1), step)
        else:
            sel = _selection(index, ay, ax, (y0, y1, x0, x1), step)
            # zoomed out with a pushdown server: the server samples, only the cells travel
            method = "pushdown" if step > 1 and arr.pushdown is not None else None
            plan = arr.explain(sel, attrs=[attr], method=method)
            viewer.check_budget(plan.totals.nbytes, f"this view ({selection_text(sel)})")
            values = np.asarray(arr.read(sel, attrs=[attr], method=method)[attr])
            report = arr.last_read
            tiles, planned = _overlay(arr, report, ay, ax)
            answer = {"selection": selection_text(sel), "tiles": tiles,
                      "tiles_planned": planned, **_plan_doc(report.plan, report.stats)}
            rgba_mask = None
    if ay is None:
        values = values.reshape(1, -1)
    elif ay > ax and rgba_mask is None:
        values = values.T
    lo, hi = value_range(values if rgba_mask is None else values[rgba_mask])
    vmin, vmax = q.number("vmin"), q.number("vmax")
    vmin = lo if vmin is None else vmin
    vmax = hi if vmax is None else vmax
    level, bad = levels(values, vmin, vmax)
    pixels = paint(level, bad, cmap)
    drawn = np.ones(level.shape, bool) if rgba_mask is None else rgba_mask.copy()
    if bad is not None:
        drawn &= ~bad
    if rgba_mask is not None:
        alpha = np.where(rgba_mask, 255, 0).astype(np.uint8)[..., None]
        pixels = np.concatenate([pixels, alpha], axis=-1)
    answer.update({"image": data_url(pixels), "box": [y0, y1, x0, x1], "step": step,
                   "size": [int(pixels.shape[0]), int(pixels.shape[1])], "attr": attr,
                   "vmin": vmin, "vmax": vmax,
                   "histogram": {"counts": histogram(level[drawn]), "edges": [vmin, vmax]},
                   "sparse": bool(arr.schema.sparse)})
    return answer


def _sparse(viewer: Viewer, arr: Any, attr: str, index: list[int], ay: int | None, ax: int,
            box: tuple[int, int, int, int], step: int,
            ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """A sparse array's cells in the box as a raster at ``step`` and the mask of drawn
    pixels (where several cells fall on one pixel, the last the read returns is drawn)."""
    y0, y1, x0, x1 = box
    dims = arr.schema.dims
    sel: list[Any] = [slice(i, i + 1) for i in index]
    if ay is not None:
        sel[ay] = slice(y0, y1)
    sel[ax] = slice(x0, x1)
    lows = [d.domain[0] for d in dims]
    bounds = [(lows[d] + s.start, lows[d] + s.stop - 1) for d, s in enumerate(sel)]
    meeting = sum(f.nbytes for f in arr.fragments if all(
        lo <= hi_b and lo_b <= hi for (lo, hi), (lo_b, hi_b)
        in zip(f.nonempty_domain, bounds, strict=True)))
    viewer.check_budget(meeting, "this view of a sparse array")
    cells = arr.read(tuple(sel), attrs=[attr])
    coords, vals = cells.coords, np.asarray(cells.values[attr])
    ny = -(-(y1 - y0) // step) if ay is not None else 1
    nx = -(-(x1 - x0) // step)
    raster = np.zeros((ny, nx), dtype=np.float64)
    mask = np.zeros((ny, nx), dtype=bool)
    py = np.zeros(len(vals), np.intp) if ay is None else (coords[ay] - lows[ay] - y0) // step
    px = (coords[ax] - lows[ax] - x0) // step
    raster[py, px] = vals
    mask[py, px] = True
    report = arr.last_read
    stats = report.stats if report is not None else None
    return raster, mask, {"selection": selection_text(tuple(sel)), "tiles": [],
                          "tiles_planned": 0, "cells": len(vals), **_plan_doc(None, stats)}


def value(viewer: Viewer, q: Query) -> dict[str, Any]:
    """The value of one cell (``index``: one position per axis) of attribute ``attr``;
    ``null`` for an empty cell of a sparse array."""
    path, at = q.text("path", "") or "", q.text("at")
    arr = viewer.open_kind(path, at, "array")
    names = [a.name for a in arr.schema.attrs]
    attr = q.choice("attr", names, names[0])
    index, _, _, _ = _geometry(arr, q)
    with viewer.lock:
        if arr.schema.sparse:
            cells = arr.read(tuple(slice(i, i + 1) for i in index), attrs=[attr])
            found = np.asarray(cells.values[attr])
            got: Any = found[-1].item() if len(found) else None
        else:
            got = np.asarray(arr.read(tuple(index), attrs=[attr])[attr]).item()
    if isinstance(got, complex) or (isinstance(got, float) and not math.isfinite(got)):
        got = str(got)
    return {"index": index, "attr": attr, "value": got}
