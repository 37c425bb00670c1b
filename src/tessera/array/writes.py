"""The write side of an array handle (:class:`ArrayWrites`, a base of
:class:`~tessera.array.array.Array`): dense boxes, cells, deletions, consolidation and vacuum,
and the process-wide change numbers that tell other handles to list again.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tessera._sync import run_sync
from tessera.array.commits import write_dense_fragment
from tessera.array.fragment import FragmentInfo, FragmentMeta
from tessera.array.growth import claim, record_resize
from tessera.array.maintenance import vacuum, with_hidden
from tessera.array.metadata import ArrayMetadata
from tessera.array.read.sparse import TOMBSTONE_ATTR, plan_cell_reads, read_sparse
from tessera.array.sparse import check_coords, write_sparse_fragment
from tessera.config import CastRule, WriteConfig
from tessera.errors import (
    InvalidArgumentError,
    ReadOnlyError,
    SchemaError,
    SelectionError,
)
from tessera.format.schema import ArraySchema
from tessera.format.selection import (
    SparseSelection,
    is_full_mask,
    normalize_selection,
    vectorized_points,
)
from tessera.format.values import as_values, check_cast_rule, fit_values
from tessera.storage.blocking import Store

#: Changes made by this process, per array URI: the latest commit or vacuum any handle here
#: made, as a number from ``CHANGE_NUMBERS``. A handle reusing its list of fragments (see
#: :class:`~tessera.config.ReadConfig`) drops the list when its array's number moved since it
#: listed, so the handles of one process see one another's writes at once.
CHANGE_NUMBERS = itertools.count(1)
LOCAL_CHANGES: dict[str, int] = {}


class ArrayWrites:
    """Writes, consolidation and vacuum of an array handle. The handle's state is
    :class:`~tessera.array.array.Array`'s; this base names what it uses of it."""

    schema: ArraySchema
    mode: str
    timestamp: int | None
    writes: WriteConfig
    _store: Store
    _metas: dict[str, FragmentMeta]
    _last_visible: list[FragmentMeta] | None
    _listed: tuple[float, int, list[FragmentMeta]] | None
    _created: ArraySchema
    _snapshot: list[FragmentMeta] | None

    if TYPE_CHECKING:
        @property
        def uri(self) -> str:
            """The array's URI."""

        @property
        def ndim(self) -> int:
            """Number of dimensions."""

        def read(self, sel: Any = ..., *, attrs: list[str] | None = None) -> Any:
            """A read (see :meth:`Array.read`)."""

        async def _visible_metas(self, cached_ok: bool = True,
                                 lazy: bool = False) -> list[FragmentMeta]:
            """The fragments a read sees."""

        async def _committed_metas(self) -> list[FragmentMeta]:
            """Every committed fragment."""

        @property
        def metadata(self) -> ArrayMetadata:
            """The array's metadata."""

        def _refresh_extent(self, force: bool = False) -> None:
            """Bring a growable array's shape up to date."""

        def _at(self, timestamp: int) -> ArrayWrites:
            """A read-only handle on the same array at ``timestamp``."""

    def __setitem__(self, sel: Any, values: Any) -> None:
        """Write ``values`` (broadcast to the selection's shape) into a selection: a box
        (ints and slices of step 1) becomes one dense fragment; any other orthogonal
        selection (steps, integer lists, 1-D boolean masks) and a full-shape boolean mask
        become one fragment of cells (:meth:`write_cells`). A selection of no cells writes
        nothing, as numpy. Values are converted under the handle's ``writes.cast`` rule
        (:class:`~tessera.config.WriteConfig`; default: refuse values that would change)."""
        if self.schema.sparse:
            raise SchemaError("sparse arrays take cells: use arr.write_cells(coords, values)")
        self._refresh_extent()
        if is_full_mask(sel, self.schema):
            self.write_points(sel, values)
            return
        selection = normalize_selection(sel, self.schema)
        shaped = self._broadcast(values, selection.shape, selection.full_shape)
        if selection.empty:
            return
        if all(d.ascending_run for d in selection.dims):  # a box: one dense fragment
            self.write(shaped, origin=tuple(int(d.coords[0]) for d in selection.dims))
            return
        grids = np.meshgrid(*[d.coords for d in selection.dims], indexing="ij")
        self.write_cells(tuple(g.ravel() for g in grids),
                         {n: v.reshape((-1, *self.schema.attr(n).cell_shape))
                          for n, v in shaped.items()})

    def write_points(self, sel: Any, values: Any, *, cast: CastRule | None = None,
                     ) -> FragmentInfo | None:
        """Write ``values`` (broadcast to the selection's shape) at a vectorised selection
        (``arr.vindex[...] = values``: one integer array per dimension, broadcast together,
        or a boolean mask of the array's shape) as one fragment of cells; of repeated
        points the last wins, as numpy. ``None`` when no cell is selected."""
        points, shape = vectorized_points(sel, self.schema)
        if not len(points.coords[0]):
            return None
        return self.write_cells(points.coords, self._broadcast(values, shape, (-1,)),
                                cast=cast)

    def _broadcast(self, values: Any, shape: tuple[int, ...], target: tuple[int, ...],
                   ) -> dict[str, np.ndarray]:
        """``values`` (an ndarray for the first attribute, or a dict per attribute), each
        broadcast to a selection's ``shape`` (plus its cell shape) and reshaped to
        ``target`` (plus its cell shape)."""
        vals = values if isinstance(values, dict) else {self.schema.attrs[0].name: values}
        out = {}
        for name, v in vals.items():
            cell = self.schema.attr(name).cell_shape
            arr = as_values(v, self.schema.attr(name).np_dtype)
            try:
                out[name] = np.broadcast_to(arr, shape + cell).reshape(target + cell)
            except ValueError:
                raise InvalidArgumentError(
                    f"values for attribute {name!r} have shape {arr.shape}; the selection "
                    f"needs {shape + cell}") from None
        return out

    def write(self, values: Any, origin: tuple[int, ...] | None = None, *,
              cast: CastRule | None = None) -> FragmentInfo:
        """Write a dense box as one new fragment; cells outside it keep their older values.

        Args:
            values: an ndarray (single-attribute arrays) or a dict attribute -> ndarray, all
                of the same shape (plus each attribute's cell shape).
            origin: the box's first coordinate per dimension, integers (default: the
                domain's start).
            cast: how values are converted to each attribute's dtype (default: the
                handle's ``writes.cast``, ``"checked"`` unless configured): see
                :mod:`tessera.format.values`. Under ``"checked"`` an integer outside the
                attribute's range raises :class:`~tessera.errors.InvalidTypeError`.
        """
        self._check_writable()
        self._refresh_extent()
        if self.schema.sparse:
            raise SchemaError("dense box writes need a dense array; this one is sparse")
        vals = values if isinstance(values, dict) else {self.schema.attrs[0].name: values}
        unknown = set(vals) - {a.name for a in self.schema.attrs}
        if unknown:
            raise SchemaError(f"no attribute {sorted(unknown)[0]!r} in {self.uri}")
        missing = [a.name for a in self.schema.attrs if a.name not in vals]
        if missing:
            raise InvalidArgumentError(f"a dense write needs every attribute; missing {missing}")
        rule = self._cast(cast)
        arrays = {a.name: fit_values(vals[a.name], a.np_dtype, a.name, cast=rule)
                  for a in self.schema.attrs}
        shapes = {n: v.shape[:self.ndim] for n, v in arrays.items()}
        shape = next(iter(shapes.values()))
        if len(set(shapes.values())) != 1:
            raise InvalidArgumentError(f"all attributes must have the same shape, got {shapes}")
        for name, arr in arrays.items():
            if arr.ndim != self.ndim + len(self.schema.attr(name).cell_shape):
                raise InvalidArgumentError(
                    f"values for {name!r} have {arr.ndim} dimensions; the array has "
                    f"{self.ndim} (plus cell shape {self.schema.attr(name).cell_shape})")
        start = self.schema.lower if origin is None else _origin(origin, self.ndim)
        if len(start) != self.ndim:
            raise SelectionError(f"origin needs {self.ndim} coordinates, got {len(start)}")
        for d, o, n in zip(self.schema.dims, start, shape, strict=True):
            if n == 0:
                raise InvalidArgumentError(f"nothing to write: dimension {d.name!r} has length 0")
            if o < d.domain[0] or o + n - 1 > d.domain[1]:
                raise SelectionError(
                    f"write box [{o}, {o + n - 1}] leaves dimension {d.name!r}'s domain "
                    f"[{d.domain[0]}, {d.domain[1]}]")
        meta = run_sync(write_dense_fragment(self._store.aio, self.schema, arrays, start,
                                             block_bytes=self.writes.block_bytes))
        self._committed(meta)
        return meta.info

    def write_cells(self, coords: Any, values: Any, *, cast: CastRule | None = None,
                    ) -> FragmentInfo:
        """Write individual cells as one sparse fragment (on a dense array: a sparse update).

        Args:
            coords: a tuple of 1-D coordinate arrays, one per dimension (unsorted is fine; of
                repeated coordinates the last one given wins).
            values: an ndarray of one value per cell (single-attribute arrays), or a dict
                attribute -> ndarray covering every attribute.
            cast: how values are converted (as :meth:`write`'s).
        """
        self._check_writable()
        self._refresh_extent()
        cells = check_coords(self.schema, coords)
        if not len(cells):
            raise InvalidArgumentError("write_cells got no cells")
        vals = values if isinstance(values, dict) else {self.schema.attrs[0].name: values}
        missing = [a.name for a in self.schema.attrs if a.name not in vals]
        unknown = sorted(set(vals) - {a.name for a in self.schema.attrs})
        if unknown:
            raise SchemaError(f"no attribute {unknown[0]!r} in {self.uri}")
        if missing:
            raise InvalidArgumentError(f"write_cells needs every attribute; missing {missing}")
        rule = self._cast(cast)
        arrays = {}
        for attr in self.schema.attrs:
            arr = fit_values(vals[attr.name], attr.np_dtype, attr.name, cast=rule)
            want = (len(cells), *attr.cell_shape)
            if arr.shape != want:
                raise InvalidArgumentError(f"values for {attr.name!r} have shape {arr.shape}; "
                                           f"{len(cells)} cells need {want}")
            arrays[attr.name] = arr
        meta = run_sync(write_sparse_fragment(self._store.aio, self.schema, cells, arrays))
        self._committed(meta)
        return meta.info

    def delete_cells(self, coords: Any) -> FragmentInfo:
        """Delete cells with tombstones (one fragment): on a dense array they read as the
        fill value again, on a sparse array they disappear."""
        self._check_writable()
        cells = check_coords(self.schema, coords)
        if not len(cells):
            raise InvalidArgumentError("delete_cells got no cells")
        meta = run_sync(write_sparse_fragment(self._store.aio, self.schema, cells, {},
                                              kind="delete"))
        self._committed(meta)
        return meta.info

    def resize(self, shape: Sequence[int]) -> None:
        """Change the array's shape within the ``maxshape`` it was created with (as h5py's
        ``Dataset.resize``): growing shows fill values in the new region until it is
        written; shrinking hides the cells beyond the new shape (time travel still sees
        them). Recorded as a timestamped change (:mod:`tessera.array.growth`)."""
        self._check_writable()
        self._need_growable("resize")
        run_sync(record_resize(self._store.aio, self._created, tuple(shape), self.uri))
        self._changed()
        self._refresh_extent(force=True)

    def append(self, values: Any, axis: int = 0, *, cast: CastRule | None = None,
               ) -> FragmentInfo:
        """Append ``values`` at the end of ``axis`` (as zarr's ``append``): their other
        dimensions must match the array's. The range is claimed first with a create-only
        put, so appenders in many processes get disjoint ranges and never overwrite each
        other; then the values are written there as one fragment. Returns its info. The
        values are checked (``cast``, as :meth:`write`'s) before the range is claimed, so a
        refused append leaves no hole behind.

        >>> import numpy as np, tessera
        >>> schema = tessera.ArraySchema([tessera.Dim("t", (0, 0), 4), tessera.Dim("x", (0, 2), 3)],
        ...                              [tessera.Attr("v", "i4")], maxshape=(None, 3))
        >>> arr = tessera.create_array("memory://doc-append", schema)
        >>> _ = arr.append(np.ones((2, 3), np.int32))
        >>> arr.shape, arr[:, 0].tolist()
        ((3, 3), [0, 1, 1])
        """
        self._check_writable()
        self._need_growable("append")
        if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < self.ndim:
            raise InvalidArgumentError(f"axis must be an integer in [0, {self.ndim}), got "
                                       f"{axis!r}")
        vals = values if isinstance(values, dict) else {self.schema.attrs[0].name: values}
        unknown = sorted(set(vals) - {a.name for a in self.schema.attrs})
        if unknown:
            raise SchemaError(f"no attribute {unknown[0]!r} in {self.uri}")
        rule = self._cast(cast)
        arrays = {n: fit_values(v, self.schema.attr(n).np_dtype, n, cast=rule)
                  for n, v in vals.items()}
        self._refresh_extent(force=True)
        shape = self.schema.shape
        count = None
        for name, arr in arrays.items():
            cell = self.schema.attr(name).cell_shape
            if arr.ndim != self.ndim + len(cell) or any(
                    arr.shape[d] != shape[d] for d in range(self.ndim) if d != axis):
                raise InvalidArgumentError(
                    f"append along axis {axis}: values for {name!r} have shape {arr.shape}; "
                    f"the other dimensions must match the array's {shape} (plus cell shape "
                    f"{cell})")
            count = arr.shape[axis] if count is None else count
            if arr.shape[axis] != count:
                raise InvalidArgumentError("append: every attribute needs the same length "
                                           f"along axis {axis}")
        if not count:
            raise InvalidArgumentError("append got no values along the axis")
        start, extent = run_sync(claim(self._store.aio, self._created, axis, count, self.uri))
        grown = list(extent.shape)
        grown[axis] = max(grown[axis], start + count)
        self.schema = self._created.with_shape(grown)
        origin = list(self.schema.lower)
        origin[axis] += start
        return self.write(arrays, origin=tuple(origin), cast=rule)

    def _need_growable(self, what: str) -> None:
        if self._created.maxshape is None:
            raise InvalidArgumentError(f"{what} needs an array created with maxshape=... "
                                       f"(the most cells per dimension); {self.uri} has a "
                                       "fixed shape")

    def consolidate(self, fragments: list[str] | None = None) -> FragmentInfo | None:
        """Merge fragments (default: all visible ones) into one; readers and writers go on.

        ``fragments`` takes fragment names (``arr.fragments[i].name``). Returns the new
        fragment's info; the merged ones stay readable for time travel until :meth:`vacuum`.
        With nothing to merge (an array without fragments, or ``fragments=[]``) it returns
        ``None`` and writes nothing, as TileDB's consolidation does; a single dense fragment
        is already consolidated and its info is returned. The array's metadata objects are
        consolidated too (:meth:`~tessera.array.metadata.ArrayMetadata.consolidate`: the
        newest value of every key in one object).

        >>> import numpy as np, tessera
        >>> schema = tessera.ArraySchema([tessera.Dim("x", (0, 3), 2)], [tessera.Attr("v", "i4")])
        >>> empty = tessera.create_array("memory://doc-consolidate-empty", schema)
        >>> print(empty.consolidate())
        None
        """
        self._check_writable()
        if fragments is None:
            self.metadata.consolidate()
        metas = run_sync(self._visible_metas())
        if fragments is None:
            chosen = metas
        else:
            by_name = {m.name: m for m in metas}
            unknown = [n for n in fragments if n not in by_name]
            if unknown:
                raise InvalidArgumentError(f"cannot consolidate {unknown[0]!r}: not a visible "
                                           f"fragment of {self.uri}")
            chosen = [by_name[n] for n in dict.fromkeys(fragments)]
        if not chosen:
            return None  # nothing to do, as TileDB: no fragment is written
        if len(chosen) == 1 and chosen[0].is_dense:
            return chosen[0].info  # already one dense fragment: nothing to merge
        # What the new fragment holds: what a reader sees, inside the merged box, of the
        # fragments ranked up to the highest one merged. It outranks exactly those (the
        # others it saw there as ``covers``); any fragment it did not see ranks above it.
        merged = {m.name for m in chosen}
        top = max(i for i, m in enumerate(metas) if m.name in merged)
        below = metas[:top + 1]
        if any(m.replaces for m in metas[top + 1:]):  # consolidations above it may hide some
            below = with_hidden(below, run_sync(self._committed_metas()), metas[top].name)
        covers = tuple(m.name for m in below if m.name not in merged)
        t_max = max(m.timestamp for m in below)
        snapshot = self._at(t_max)
        snapshot._metas = self._metas
        snapshot._snapshot = below
        if self.schema.sparse:
            return self._consolidate_sparse(chosen, snapshot, covers, t_max)
        lo = tuple(min(int(np.floor(m.subarray[0][d])) for m in chosen) for d in range(self.ndim))
        hi = tuple(max(int(np.ceil(m.subarray[1][d])) for m in chosen) for d in range(self.ndim))
        lo = tuple(max(a, int(d.domain[0])) for a, d in zip(lo, self.schema.dims, strict=True))
        hi = tuple(min(b, int(d.domain[1])) for b, d in zip(hi, self.schema.dims, strict=True))
        box = tuple(slice(a, b + 1) for a, b in zip(lo, hi, strict=True))
        names = [a.name for a in self.schema.attrs]
        values = snapshot.read(box, attrs=names)
        meta = run_sync(write_dense_fragment(
            self._store.aio, self.schema, values, lo, kind="consolidated",
            replaces=tuple(m.name for m in chosen), covers=covers, timestamp=t_max,
            block_bytes=self.writes.block_bytes))
        self._committed(meta)
        return meta.info

    def _consolidate_sparse(self, chosen: list[FragmentMeta], snapshot: ArrayWrites,
                            covers: tuple[str, ...], t_max: int) -> FragmentInfo:
        """Sparse consolidation: the live cells ``snapshot`` (the fragments ranked up to the
        highest merged one) sees inside the merged fragments' box, plus tombstones where an
        older fragment outside the merge still holds a deleted cell (with no such fragment,
        deletions are purged)."""
        nd = self.ndim
        lo = tuple(min(m.subarray[0][d] for m in chosen) for d in range(nd))
        hi = tuple(max(m.subarray[1][d] for m in chosen) for d in range(nd))
        box = SparseSelection(lo, hi, (False,) * nd, (None,) * nd)
        metas = run_sync(snapshot._visible_metas())
        names = [a.name for a in self.schema.attrs]
        result, dead = run_sync(read_sparse(self._store.aio, self.schema, box,
                                            plan_cell_reads(box, metas, names), names,
                                            self.uri, keep_tombstones=True))
        merged = {m.name for m in chosen}
        others = [m for m in metas if m.name not in merged and m.kind != "delete"
                  and all(m.subarray[0][d] <= hi[d] and m.subarray[1][d] >= lo[d]
                          for d in range(nd))]
        if not others:
            dead = dead[:0]
        coords = np.concatenate([np.stack(result.coords, axis=1).reshape(-1, nd), dead])
        values: dict[str, np.ndarray] = {}
        for attr in self.schema.attrs:
            filler = np.full((len(dead), *attr.cell_shape), attr.fill_value, attr.np_dtype)
            values[attr.name] = np.concatenate([result.values[attr.name], filler])
        if len(dead):
            values[TOMBSTONE_ATTR] = np.concatenate([np.zeros(len(result), np.uint8),
                                                     np.ones(len(dead), np.uint8)])
        meta = run_sync(write_sparse_fragment(
            self._store.aio, self.schema, coords, values, kind="consolidated",
            replaces=tuple(m.name for m in chosen), covers=covers, timestamp=t_max))
        self._committed(meta)
        return meta.info

    def vacuum(self, *, orphan_grace_s: float = 3600.0, force: bool = False) -> int:
        """Remove fragments that a consolidation replaced, and objects of writers that died
        before committing (once older than ``orphan_grace_s``). Returns objects removed:
        0, quietly, when there is nothing to remove (no fragments, or nothing replaced).

        A grace shorter than the longest a commit may take (:meth:`min_orphan_grace_s`: the
        last requests of a commit under the store's timeout and retries) is refused unless
        ``force=True``. Even then a commit in flight is never broken: a writer whose objects
        a vacuum removed finds out before its write returns, takes its commit back and
        raises :class:`~tessera.errors.CommitConflictError`.

        Time travel into the span a vacuum removed raises
        :class:`~tessera.array.maintenance.HistoryVacuumedError` from then on.
        """
        self._check_writable()
        if not isinstance(orphan_grace_s, (int, float)) or isinstance(orphan_grace_s, bool) \
                or not orphan_grace_s >= 0:
            raise InvalidArgumentError(f"orphan_grace_s must be a number of seconds >= 0, got "
                                       f"{orphan_grace_s!r}")
        least = self.min_orphan_grace_s()
        if orphan_grace_s < least and not force:
            raise InvalidArgumentError(
                f"vacuum(orphan_grace_s={orphan_grace_s}) is shorter than a commit to "
                f"{self.uri} may take ({least:g} s under the store's request timeout and "
                "retries): a slow writer would lose its write (it raises CommitConflictError "
                "instead of committing). Pass force=True if no writer is at work")
        metas = run_sync(self._committed_metas())
        removed = run_sync(vacuum(self._store.aio, metas, orphan_grace_s))
        removed += self.metadata.vacuum()
        self._changed()
        return removed

    def min_orphan_grace_s(self) -> float:
        """The shortest ``orphan_grace_s`` :meth:`vacuum` takes without ``force``: how long
        the last requests of a commit (bookkeeping, marker, check) may take at worst under
        the store's ``request_timeout_s`` and retries."""
        cfg = self._store.aio.config
        return 3 * cfg.request_timeout_s * cfg.retry.max_attempts

    def _committed(self, meta: FragmentMeta) -> None:
        """Note a fragment this handle committed (see :meth:`_changed`)."""
        self._metas[meta.name] = meta
        self._last_visible = None
        self._changed()

    def _changed(self) -> None:
        """Note that this handle changed the array: the next read of every handle of this
        process on it, this one included, lists the commit markers (its reused list no
        longer matches the array's change number)."""
        LOCAL_CHANGES[self.uri] = next(CHANGE_NUMBERS)

    def _cast(self, cast: CastRule | None) -> CastRule:
        """A write's cast rule: its own, else the handle's ``writes.cast``."""
        return self.writes.cast if cast is None else check_cast_rule(cast)

    def _check_writable(self) -> None:
        if self.mode != "w":
            raise ReadOnlyError(f"{self.uri} is open read-only; open it with mode='w' to write")
        if self.timestamp is not None:
            raise ReadOnlyError(f"{self.uri} is open at a past timestamp; writes need a "
                                "handle opened without one")
        self._last_visible = None  # this handle changes the array: next read lists first
        self._listed = None  # ... and lists, whatever reads.refresh_s allows


def _origin(origin: Any, ndim: int) -> tuple[int, ...]:
    """A write's origin as integers; anything else (a fraction, NaN, a bool, a string)
    raises :class:`~tessera.errors.SelectionError` instead of being truncated."""
    if not isinstance(origin, (tuple, list)):
        raise SelectionError(f"origin must be a tuple of {ndim} integers, got {origin!r:.80}")
    for i, o in enumerate(origin):
        if isinstance(o, (bool, np.bool_)) or not isinstance(o, (int, np.integer)):
            raise SelectionError(f"origin[{i}] must be an integer, got {o!r:.80} (a write "
                                 "starts at a cell; fractional coordinates are not truncated)")
    return tuple(int(o) for o in origin)
