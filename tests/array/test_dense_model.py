"""Property test: dense arrays behave like a numpy model of the same write history."""

from __future__ import annotations

import uuid

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
from tessera.array.commits import META_CACHE

DTYPES = ["int32", "uint8", "float64", "int16", "complex64", "(3,)u1"]
CODECS = [None, "zstd", "lz4", "gzip:1", "blosc"]


@st.composite
def schemas(draw: st.DrawFn) -> tessera.ArraySchema:
    ndim = draw(st.integers(1, 4))
    max_size = {1: 40, 2: 14, 3: 7, 4: 5}[ndim]
    dims = []
    for i in range(ndim):
        lo = draw(st.integers(-5, 5))
        size = draw(st.integers(1, max_size))
        tile = draw(st.integers(1, size))
        dims.append(tessera.Dim(f"d{i}", (lo, lo + size - 1), tile))
    n_attrs = draw(st.integers(1, 2))
    attrs = [tessera.Attr(f"a{j}", draw(st.sampled_from(DTYPES)),
                          draw(st.sampled_from([None, 7])), draw(st.sampled_from(CODECS)))
             for j in range(n_attrs)]
    return tessera.ArraySchema(dims, attrs,
                               cell_order=draw(st.sampled_from(["row-major", "col-major"])),
                               tile_order=draw(st.sampled_from(["row-major", "col-major"])),
                               attr_layout=draw(st.sampled_from(["attr-major", "tile-major"])))


def _box(draw: st.DrawFn, schema: tessera.ArraySchema) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lo, hi = [], []
    for d in schema.dims:
        a = draw(st.integers(d.domain[0], d.domain[1]))
        b = draw(st.integers(a, d.domain[1]))
        lo.append(a)
        hi.append(b)
    return tuple(lo), tuple(hi)


def _selection(draw: st.DrawFn, schema: tessera.ArraySchema) -> tuple:
    sel = []
    for d in schema.dims:
        lo, hi = d.domain
        kind = draw(st.sampled_from(["slice", "step", "int", "list", "full"]))
        if kind == "full":
            sel.append(slice(None))
        elif kind == "int":
            sel.append(draw(st.integers(lo, hi)))
        elif kind == "list":
            sel.append(draw(st.lists(st.integers(lo, hi), min_size=1, max_size=6)))
        else:
            a = draw(st.integers(lo, hi))
            b = draw(st.integers(a, hi + 1))
            step = draw(st.integers(1, 3)) if kind == "step" else 1
            sel.append(slice(a, b, step))
    return tuple(sel)


def _model_select(model: np.ndarray, sel: tuple, schema: tessera.ArraySchema) -> np.ndarray:
    """Orthogonal indexing on a numpy array indexed from each domain's lower bound: every
    dimension is selected independently, ints drop their dimension (zarr's ``oindex``)."""
    index, drop = [], []
    for s, d in zip(sel, schema.dims, strict=True):
        positions = np.arange(d.domain[0], d.domain[1] + 1)
        if isinstance(s, slice):
            index.append(np.arange(d.domain[0], d.domain[1] + 1)[
                slice(None if s.start is None else s.start - d.domain[0],
                      None if s.stop is None else s.stop - d.domain[0], s.step)] - d.domain[0])
        elif isinstance(s, list):
            index.append(np.array(s, dtype=np.int64) - d.domain[0])
        else:
            index.append(np.array([s - positions[0]]))
        drop.append(not isinstance(s, (slice, list)))
    out = model[np.ix_(*index)]
    return out[tuple(0 if dr else slice(None) for dr in drop)]


def _random_values(rng: np.random.Generator, shape: tuple[int, ...], attr: tessera.Attr):
    full = shape + attr.cell_shape
    dt = attr.np_dtype
    if dt.kind == "c":
        return (rng.normal(size=full) + 1j * rng.normal(size=full)).astype(dt)
    if dt.kind == "f":
        return rng.normal(size=full).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), size=full).astype(dt)


def _cells(draw: st.DrawFn, schema: tessera.ArraySchema) -> tuple[np.ndarray, ...]:
    n = draw(st.integers(1, 12))
    return tuple(np.array([draw(st.integers(d.domain[0], d.domain[1])) for _ in range(n)])
                 for d in schema.dims)


def _op(draw: st.DrawFn, schema: tessera.ArraySchema) -> tuple:
    kind = draw(st.sampled_from(["box", "box", "cells", "delete", "consolidate", "vacuum"]))
    if kind == "box":
        return ("box", _box(draw, schema))
    if kind in ("consolidate", "vacuum"):
        return (kind, None)
    return (kind, _cells(draw, schema))


@st.composite
def histories(draw: st.DrawFn):
    schema = draw(schemas())
    writes = [_op(draw, schema) for _ in range(draw(st.integers(0, 5)))]
    selections = [_selection(draw, schema) for _ in range(3)]
    seed = draw(st.integers(0, 2**32 - 1))
    return schema, writes, selections, seed


def _check(url: str, options: dict, history, methods: tuple[str, ...] = ("auto",)) -> None:
    schema, writes, selections, seed = history
    rng = np.random.default_rng(seed)
    arr = tessera.create_array(f"{url.rstrip('/')}/{uuid.uuid4().hex[:10]}", schema,
                               storage_options=options)
    model = {a.name: np.full(schema.shape + a.cell_shape, a.fill_value, a.np_dtype)
             for a in schema.attrs}
    snapshots = []
    for kind, spec in writes:
        if kind == "box":
            lo, hi = spec
            shape = tuple(h - lw + 1 for lw, h in zip(lo, hi, strict=True))
            values = {a.name: _random_values(rng, shape, a) for a in schema.attrs}
            info = arr.write(values, origin=lo)
            idx = tuple(slice(lw - d.domain[0], h - d.domain[0] + 1)
                        for lw, h, d in zip(lo, hi, schema.dims, strict=True))
            for name, v in values.items():
                model[name][idx] = v
        elif kind == "cells":
            n = len(spec[0])
            values = {a.name: _random_values(rng, (n,), a) for a in schema.attrs}
            info = arr.write_cells(spec, values)
            for i in range(n):  # one at a time: of repeated coordinates the last one wins
                cell = tuple(int(c[i]) - d.domain[0] for c, d in zip(spec, schema.dims,
                                                                      strict=True))
                for name, v in values.items():
                    model[name][cell] = v[i]
        elif kind == "consolidate":
            if not arr.fragments:
                continue
            names = [f.name for f in arr.fragments]
            subset = [n for n in names if rng.random() < 0.6] or names
            arr.consolidate(subset if rng.random() < 0.5 else None)
            continue  # the model does not change
        elif kind == "vacuum":
            arr.vacuum(orphan_grace_s=0, force=True)
            continue
        else:
            info = arr.delete_cells(spec)
            cell_idx = tuple(np.asarray(c) - d.domain[0] for c, d in zip(spec, schema.dims,
                                                                         strict=True))
            for a in schema.attrs:
                model[a.name][cell_idx] = a.fill_value
        snapshots.append((info.timestamp, {k: v.copy() for k, v in model.items()}))
    names = [a.name for a in schema.attrs]
    for sel in selections:
        for method in methods:
            got = arr.read(sel, attrs=names, method=method)
            for name in names:
                np.testing.assert_array_equal(got[name],
                                              _model_select(model[name], sel, schema))
    META_CACHE().clear()  # a fresh handle: dense fragments pending until a read meets them
    fresh = tessera.open_array(arr.uri, storage_options=options)
    for sel in selections:
        got = fresh.read(sel, attrs=names)
        for name in names:
            np.testing.assert_array_equal(got[name], _model_select(model[name], sel, schema))
    for ts, past in snapshots:  # time travel to every earlier write
        try:  # (a handle at a time lists what it sees when it opens)
            old = tessera.open_array(arr.uri, at=ts, storage_options=options)
            got = old.read(..., attrs=names)
        except tessera.HistoryVacuumedError:
            continue  # consolidated and vacuumed since: refusing is the contract
        for name in names:
            np.testing.assert_array_equal(got[name], past[name])


PROFILE = settings(max_examples=40, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                          HealthCheck.function_scoped_fixture])


@PROFILE
@given(history=histories())
def test_dense_arrays_match_numpy_memory(history) -> None:
    _check("memory://prop-dense", {}, history)


@settings(PROFILE, max_examples=15)
@given(history=histories())
def test_dense_arrays_match_numpy_file(tmp_path_factory, history) -> None:
    _check(tmp_path_factory.mktemp("prop").as_uri(), {}, history)


@settings(PROFILE, max_examples=15)
@given(history=histories())
def test_dense_arrays_match_numpy_file_in_local_batches(monkeypatch, tmp_path_factory,
                                                        history) -> None:
    """The same histories on a folder store with every whole-tile read of a layered read
    made in batches on worker threads (normally from 1 MiB of tiles on), raw tiles in
    slabs of one slowest-axis slice each."""
    from tessera.array.read import local as reader

    monkeypatch.setattr(reader, "LOCAL_BATCH_BYTES", 0)
    monkeypatch.setattr(reader, "STREAM_SLAB_BYTES", 1)
    _check(tmp_path_factory.mktemp("prop-batch").as_uri(), {}, history)


@settings(PROFILE, max_examples=10)
@given(history=histories())
def test_dense_arrays_match_numpy_s3(s3_server, history) -> None:
    _check(s3_server.unique_url("prop"), s3_server.storage_options(), history)


@settings(PROFILE, max_examples=30)
@given(history=histories())
def test_dense_arrays_match_numpy_with_the_update_index(monkeypatch, history) -> None:
    """The same histories with every trailing run of small updates read through the
    per-handle merged index (normally built from 8 fragments on)."""
    from tessera.array.read import updates as update_index

    monkeypatch.setattr(update_index, "MIN_FRAGMENTS", 1)
    _check("memory://prop-dense-index", {}, history)


@settings(PROFILE, max_examples=30)
@given(history=histories(), block_bytes=st.sampled_from([0, 1, 5, 16, 48]))
def test_dense_arrays_match_numpy_with_small_blocks(monkeypatch, history, block_bytes) -> None:
    """The same histories with compressed tiles in blocks of a few bytes (cells straddle
    blocks; normally 64 KiB, so these small tiles would be one block), or not blocked."""
    monkeypatch.setenv("TESSERA_WRITE_BLOCK_BYTES", str(block_bytes))
    _check("memory://prop-dense-blocks", {}, history, methods=("auto", "fetch", "merge"))
