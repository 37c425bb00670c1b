"""How an array handle shows itself (:class:`ArrayFace`, a base of
:class:`~tessera.array.array.Array`): its URL, the fragments it sees, their stored bytes,
its history of commits, and a one-line ``repr`` and an HTML summary for notebooks, as the
tensor tables and image sets show theirs.

>>> import numpy as np, tessera
>>> arr = tessera.from_numpy("memory://doc-face", np.zeros((4, 6), np.int16), tile=(2, 3))
>>> arr
<tessera.Array memory://doc-face shape=(4, 6) int16 tiles=(2, 3) mode='w' 1 fragment>
>>> [c.operation for c in arr.history()], arr.history()[0].unit
(['write'], 'fragments')
>>> "<table" in arr._repr_html_()
True
"""

from __future__ import annotations

import html
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from tessera._sync import run_sync
from tessera.array.fragment import FragmentInfo, FragmentMeta
from tessera.array.names import replaces_others
from tessera.format.schema import ArraySchema
from tessera.when import Commit, History, iso, utc


class ArrayFace:
    """Description of an array handle (state and listing are
    :class:`~tessera.array.array.Array`'s)."""

    schema: ArraySchema
    mode: str
    timestamp: int | None

    if TYPE_CHECKING:
        @property
        def uri(self) -> str:
            """The array's URL."""

        @property
        def shape(self) -> tuple[int, ...]:
            """Cells per dimension."""

        def _visible_metas(self, cached_ok: bool = True, lazy: bool = False,
                           ) -> Coroutine[Any, Any, list[FragmentMeta]]:
            """The fragments reads use."""

        def _committed_metas(self) -> Coroutine[Any, Any, list[FragmentMeta]]:
            """Every committed fragment at the handle's timestamp."""

    @property
    def url(self) -> str:
        """The array's URL (as given to :func:`~tessera.open_array`, normalised)."""
        return self.uri

    def stored_bytes(self) -> dict[str, int]:
        """Stored (encoded) bytes per attribute over the fragments this handle sees, from
        their bookkeeping: no data is read.

        >>> import numpy as np, tessera
        >>> tessera.from_numpy("memory://doc-stored", np.zeros((4, 4), np.int32),
        ...                    tile=(2, 2)).stored_bytes()
        {'data': 64}
        """
        totals = {a.name: 0 for a in self.schema.attrs}
        for meta in run_sync(self._visible_metas()):
            for name, tiles in meta.attrs.items():
                if name in totals:
                    totals[name] += int(tiles.sizes.sum())
        return totals

    @property
    def fragments(self) -> list[FragmentInfo]:
        """The fragments this handle sees, oldest first."""
        return [m.info for m in run_sync(self._visible_metas())]

    def history(self) -> History:
        """Every commit this handle can see (as of its ``at`` time), oldest first: writes
        and consolidations, each with the fragments it added and replaced and the bytes it
        stored. Fragments removed by :meth:`~tessera.Array.vacuum` are no longer listed."""
        out = History()
        for m in run_sync(self._committed_metas()):
            info = m.info
            out.append(Commit(utc(info.timestamp),
                              info.timestamp,
                              "consolidate" if m.replaces or replaces_others(m.name)
                              else "write" if info.kind == "dense" else info.kind,
                              1, len(m.replaces), "fragments", info.nbytes))
        return out

    def __repr__(self) -> str:
        s = self.schema
        dtype = s.attrs[0].dtype if len(s.attrs) == 1 else f"{len(s.attrs)} attributes"
        count = len(self.fragments)
        at = "" if self.timestamp is None else f" at {iso(self.timestamp)}"
        return (f"<tessera.Array {self.uri} shape={self.shape} {_dtype(dtype)} "
                f"tiles={s.tile_shape}{' sparse' if s.sparse else ''} mode={self.mode!r}"
                f"{at} {count} fragment{'s' if count != 1 else ''}>")

    def _repr_html_(self) -> str:
        """A notebook's view: the schema (dimensions, tiles, attributes, codecs) and the
        fragments with their sizes."""
        s = self.schema
        frags = self.fragments
        dims = "".join(f"<tr><td>{html.escape(d.name)}</td><td>{d.domain[0]}..{d.domain[1]}"
                       f"</td><td>{d.extent}</td></tr>" for d in s.dims)
        attrs = "".join(f"<tr><td>{html.escape(a.name)}</td><td>{_dtype(a.dtype)}</td>"
                        f"<td>{html.escape(str(a.codec or 'none'))}</td></tr>"
                        for a in s.attrs)
        total = sum(f.nbytes for f in frags)
        return (f"<div><b>tessera.Array</b> <code>{html.escape(self.uri)}</code> "
                f"shape {self.shape}, mode {self.mode!r}"
                f"{'' if self.timestamp is None else ' at ' + iso(self.timestamp)}<br>"
                f"<table><thead><tr><th>dimension</th><th>domain</th><th>tile</th></tr>"
                f"</thead><tbody>{dims}</tbody></table>"
                f"<table><thead><tr><th>attribute</th><th>dtype</th><th>codec</th></tr>"
                f"</thead><tbody>{attrs}</tbody></table>"
                f"{len(frags)} fragment(s), {total:,} bytes stored</div>")


def _dtype(dtype: Any) -> str:
    import numpy as np

    try:
        return str(np.dtype(dtype))
    except TypeError:
        return str(dtype)
