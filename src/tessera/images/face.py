"""How an image set shows itself (:class:`ImageFace`, a base of
:class:`~tessera.images.columns.ImageColumns`): its URL, its history of appends, a one-line
``repr`` and, in notebooks, a summary with a strip of real thumbnails of its first images
decoded at a few k (the quality a reader gets from the k lowest diagonals).

>>> import numpy as np
>>> from tessera.images import ImageColumns
>>> cols = ImageColumns.create("memory://doc-img-face", size=(32, 32), group=4)
>>> _ = cols.append(np.zeros((3, 32, 32, 3), np.uint8))
>>> cols
<tessera.ImageColumns memory://doc-img-face 32x32 RGB, 3 images, group 4>
>>> [(c.operation, c.added, c.unit) for c in cols.history()]
[('append', 3, 'images')]
"""

from __future__ import annotations

import base64
import html
import io
from typing import TYPE_CHECKING, Any

import numpy as np

from tessera._sync import run_sync
from tessera.array.array import Array
from tessera.array.names import replaces_others
from tessera.when import Commit, History, iso, utc

#: The k of the thumbnails a notebook shows (clipped to the set's largest).
THUMB_K = (1, 8, 63)
THUMB_IMAGES = 3
THUMB_EDGE = 96


class ImageFace:
    """Description of an image set (state and reads are
    :class:`~tessera.images.columns.ImageColumns`'s)."""

    coeffs: Array
    meta: Array
    size: tuple[int, int]
    group: int

    if TYPE_CHECKING:
        from tessera.images.frequency import FrequencyFormat
        from tessera.storage.blocking import Store

        fmt: FrequencyFormat
        _store: Store

        def ids(self) -> np.ndarray:
            """The ids of the stored images."""

        def _all_heights(self) -> np.ndarray:
            """Every id's height (0: a hole)."""

        def read(self, ids: Any, k: Any = "all", *, output: str = "pixels",
                 scale: float = 1.0) -> Any:
            """Images ``ids`` from their ``k`` lowest diagonals."""

    @property
    def url(self) -> str:
        """The set's URL."""
        return str(self._store.url)

    def history(self) -> History:
        """Every append and consolidation this handle can see, oldest first, with the
        images each added (padding to whole groups left out) and the bytes it stored. An
        append is complete when its sizes and labels are written, after its pixels: that is
        its time (``at=`` that time sees it)."""
        bookkeeping = run_sync(self.meta._committed_metas())
        stored: dict[Any, int] = {}
        for m in run_sync(self.coeffs._committed_metas()):
            span = m.info.nonempty_domain[0]
            stored[span] = stored.get(span, 0) + m.info.nbytes
        heights = self._all_heights() if bookkeeping and self.coeffs.shape[0] else np.zeros(0)
        out = History()
        for m in bookkeeping:
            info = m.info
            lo, hi = info.nonempty_domain[0]
            consolidated = bool(m.replaces) or replaces_others(m.name)
            out.append(Commit(utc(info.timestamp),
                              info.timestamp, "consolidate" if consolidated else "append",
                              0 if consolidated else int(np.count_nonzero(heights[lo:hi + 1])),
                              0, "images", info.nbytes + stored.get((lo, hi), 0)))
        return out

    def _describe(self) -> str:
        count = len(self.ids()) if self.coeffs.shape[0] else 0
        at = ("" if self.coeffs.timestamp is None
              else f", at {iso(self.coeffs.timestamp)}")
        kind = ("gray" if self.fmt.colour == "gray"
                else "RGB 4:2:0" if self.fmt.subsampled else "RGB")
        return (f"{self.url} {self.size[0]}x{self.size[1]} {kind}, {count} "
                f"image{'s' if count != 1 else ''}, group {self.group}{at}")

    def __repr__(self) -> str:
        return f"<tessera.ImageColumns {self._describe()}>"

    def _repr_html_(self) -> str:
        """A notebook's view: the set's description and its first images decoded at a few
        k, as PNG thumbnails."""
        ids = self.ids()[:THUMB_IMAGES] if self.coeffs.shape[0] else np.zeros(0, np.int64)
        ks = sorted({min(k, self.fmt.k_max) for k in THUMB_K})
        rows = []
        for k in ks:
            pixels = self.read(ids, k=k) if len(ids) else []
            cells = "".join(f'<td><img src="data:image/png;base64,{png(p)}" '
                            f'alt="image {i} at k={k}"></td>'
                            for i, p in zip(ids, pixels, strict=True))
            rows.append(f"<tr><th>k={k}</th>{cells}</tr>")
        return (f"<div><b>tessera.ImageColumns</b> {html.escape(self._describe())}"
                f"<table>{''.join(rows)}</table></div>")


def png(pixels: np.ndarray, edge: int = THUMB_EDGE) -> str:
    """A thumbnail of ``pixels`` ((H, W, 3) or (H, W) uint8) at most ``edge`` pixels wide
    or high, as base64 PNG."""
    from PIL import Image

    image = Image.fromarray(np.ascontiguousarray(pixels).squeeze())
    image.thumbnail((edge, edge))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()
