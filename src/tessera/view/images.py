"""The viewer's image-set views: pages of thumbnails, one image at a level of detail k, and
the bytes-versus-quality curve.

A page of thumbnails is one read of its images at a reduced scale (the largest of 1, 1/2,
... 1/32 that keeps a thumbnail within :data:`THUMB` pixels), so only the diagonals that
reach that scale are fetched; the answer says which groups and diagonals (columns) the
read touched, and its requests and bytes. One image at ``k`` is read from its ``k`` lowest
diagonals; its PSNR is measured against the same image at the set's highest k.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tessera.describe import images_doc
from tessera.view.core import Viewer
from tessera.view.params import Query
from tessera.view.pictures import data_url

#: The longest side of a thumbnail, in pixels.
THUMB = 96
#: Thumbnails per row of a page's picture.
PER_ROW = 8


def _set(viewer: Viewer, q: Query, *, fresh: bool = False) -> Any:
    return viewer.open_kind(q.text("path", "") or "", q.text("at"), "image set", fresh=fresh)


def page(viewer: Viewer, q: Query) -> dict[str, Any]:
    """An image set's page: its ``info`` document and history."""
    cols = _set(viewer, q, fresh=True)
    doc = images_doc(q.text("path", "") or "", cols)
    doc["history"] = cols.history().to_dicts()
    return doc


def thumb_scale(size: tuple[int, int]) -> float:
    """The largest scale in 1, 1/2, ..., 1/32 that fits ``size`` within :data:`THUMB`.

    >>> thumb_scale((256, 192)), thumb_scale((64, 64)), thumb_scale((100000, 8))
    (0.25, 1.0, 0.03125)
    """
    longest = max(size)
    n = 0 if longest <= THUMB else math.ceil(math.log2(longest / THUMB))
    return 1.0 / (1 << min(n, 5))


def _measured(report: Any) -> dict[str, Any] | None:
    stats = getattr(report, "stats", None)
    if stats is None:
        return None
    return {"requests": stats.requests, "bytes": stats.bytes_received,
            "seconds": stats.elapsed_s}


def grid(viewer: Viewer, q: Query) -> dict[str, Any]:
    """Page ``page`` (from 0) of ``per`` thumbnails as one picture, ``PER_ROW`` a row."""
    cols = _set(viewer, q)
    per = q.integer("per", 48, lo=1, hi=256)
    number = q.integer("page", 0, lo=0)
    fmt = cols.fmt
    k = q.integer("k", fmt.k_max, lo=1, hi=fmt.k_max)
    with viewer.lock:
        ids = cols.ids()
        pages = max(1, -(-len(ids) // per))
        chosen = ids[number * per:(number + 1) * per]
        answer: dict[str, Any] = {"page": number, "pages": pages, "per": per,
                                  "images": len(ids), "ids": chosen.tolist(), "k": k}
        if not len(chosen):
            return {**answer, "image": None, "thumb": [0, 0], "labels": []}
        scale = thumb_scale(cols.size)
        plan = cols.explain(chosen, k, scale=scale)
        viewer.check_budget(plan.totals.nbytes, f"this page of {len(chosen)} thumbnails")
        pixels = np.asarray(cols.read(chosen, k, scale=scale))
        report = cols.last_read
        labels = cols.labels(chosen).tolist()
    n, th, tw = pixels.shape[:3]
    rows = -(-n // PER_ROW)
    sheet = np.full((rows * th, min(n, PER_ROW) * tw, 3), 255, np.uint8)
    for i in range(n):
        r, c = divmod(i, PER_ROW)
        sheet[r * th:(r + 1) * th, c * tw:(c + 1) * tw] = pixels[i, ..., :3]
    group = cols.group
    return {**answer, "image": data_url(sheet), "thumb": [th, tw], "scale": scale,
            "labels": labels, "per_row": PER_ROW,
            "groups": sorted({int(i) // group for i in chosen.tolist()}),
            "columns": cols.fetched_k(k, "pixels", scale),
            "estimated": {"requests": len(plan.requests), "bytes": plan.totals.nbytes},
            "measured": _measured(report)}


def image(viewer: Viewer, q: Query) -> dict[str, Any]:
    """Image ``id`` at ``k``: its picture, the bytes the read planned and measured, and its
    PSNR against the same image at the set's highest k."""
    from tessera.images import psnr

    cols = _set(viewer, q)
    fmt = cols.fmt
    k = q.integer("k", fmt.k_max, lo=1, hi=fmt.k_max)
    with viewer.lock:
        ids = cols.ids()
        first = int(ids[0]) if len(ids) else 0
        chosen = q.integer("id", first, lo=0)
        plan = cols.explain([chosen], k)
        viewer.check_budget(plan.totals.nbytes, f"image {chosen}")
        pixels = np.asarray(cols.read([chosen], k))[0]
        report = cols.last_read
        best = pixels if k == fmt.k_max else np.asarray(cols.read([chosen], fmt.k_max))[0]
        label = int(cols.labels([chosen])[0])
    score = psnr(best, pixels)
    return {"id": chosen, "k": k, "k_max": fmt.k_max, "image": data_url(pixels[..., :3]),
            "label": label, "psnr": None if math.isinf(score) else score,
            "estimated": {"requests": len(plan.requests), "bytes": plan.totals.nbytes},
            "measured": _measured(report)}


def curve(viewer: Viewer, q: Query) -> dict[str, Any]:
    """The set's stored bytes per image at each k (exact), and the PSNR at each k against
    the highest k, measured on ``sample`` images spread over the set."""
    from tessera.images import psnr

    cols = _set(viewer, q)
    fmt = cols.fmt
    sample = q.integer("sample", 4, lo=1, hi=64)
    with viewer.lock:
        ids = cols.ids()
        count = len(ids)
        per_image = (cols.bytes_per_k() / max(count, 1)).tolist()
        scores: list[float | None] = []
        if count:
            chosen = ids[np.linspace(0, count - 1, min(sample, count)).astype(int)]
            columns = cols.read_columns(chosen.tolist(), 0, fmt.k_max)
            best = fmt.decode(columns)
            for k in range(1, fmt.k_max + 1):
                s = psnr(best, fmt.decode(columns[:k]))
                scores.append(None if math.isinf(s) else s)
    return {"k": list(range(1, fmt.k_max + 1)), "bytes_per_image": per_image,
            "psnr": scores, "sample": min(sample, count)}
