"""Property test: sparse arrays behave like a dict {coordinates: values} with the same history."""

from __future__ import annotations

import uuid

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
from tessera.array.sparse import global_order


@st.composite
def sparse_schemas(draw: st.DrawFn) -> tessera.ArraySchema:
    ndim = draw(st.integers(1, 3))
    floats = draw(st.booleans())
    dims = []
    for i in range(ndim):
        lo = draw(st.integers(-20, 5))
        size = draw(st.integers(1, 30))
        if floats:
            dims.append(tessera.Dim(f"d{i}", (float(lo), float(lo + size)),
                                    draw(st.sampled_from([None, 2.5, 7.0]))))
        else:
            dims.append(tessera.Dim(f"d{i}", (lo, lo + size - 1), draw(st.integers(1, size))))
    return tessera.ArraySchema(
        dims, [tessera.Attr("v", draw(st.sampled_from(["int32", "float64"])),
                            codec=draw(st.sampled_from([None, "zstd"])))],
        sparse=True, capacity=draw(st.integers(1, 5)),
        cell_order=draw(st.sampled_from(["row-major", "col-major"])),
        tile_order=draw(st.sampled_from(["row-major", "col-major"])))


def _coord(draw: st.DrawFn, d: tessera.Dim):
    lo, hi = d.domain
    if d.is_integer:
        return draw(st.integers(lo, hi))
    return draw(st.sampled_from([lo, hi, (lo + hi) / 2, lo + 0.25, hi - 0.5]))


@st.composite
def sparse_histories(draw: st.DrawFn):
    schema = draw(sparse_schemas())
    ops = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["cells", "cells", "delete", "consolidate", "vacuum"]))
        if kind in ("cells", "delete"):
            n = draw(st.integers(1, 10))
            ops.append((kind, tuple(np.array([_coord(draw, d) for _ in range(n)])
                                    for d in schema.dims)))
        else:
            ops.append((kind, None))
    boxes = []
    for _ in range(3):
        sel = []
        for d in schema.dims:
            a, b = sorted([_coord(draw, d), _coord(draw, d)])
            sel.append(draw(st.sampled_from([slice(None), slice(a, b), a])))
        boxes.append(tuple(sel))
    return schema, ops, boxes, draw(st.integers(0, 2**31))


def _selected(key: tuple, sel: tuple) -> bool:
    for c, s in zip(key, sel, strict=True):
        if isinstance(s, slice):
            if s.start is not None and not (s.start <= c < s.stop):
                return False
        elif c != s:
            return False
    return True


def _check(url: str, options: dict, history) -> None:
    schema, ops, boxes, seed = history
    rng = np.random.default_rng(seed)
    arr = tessera.create_array(f"{url.rstrip('/')}/{uuid.uuid4().hex[:10]}", schema,
                               storage_options=options)
    model: dict[tuple, float] = {}
    snapshots = []
    dtype = schema.attrs[0].np_dtype
    for kind, spec in ops:
        if kind == "cells":
            values = rng.integers(-100, 100, len(spec[0])).astype(dtype)
            info = arr.write_cells(spec, values)
            for i in range(len(values)):
                model[tuple(c[i].item() for c in spec)] = values[i]
        elif kind == "delete":
            info = arr.delete_cells(spec)
            for i in range(len(spec[0])):
                model.pop(tuple(c[i].item() for c in spec), None)
        elif kind == "consolidate":
            if arr.fragments:
                names = [f.name for f in arr.fragments]
                arr.consolidate([n for n in names if rng.random() < 0.6] or names)
            continue
        else:
            arr.vacuum(orphan_grace_s=0, force=True)
            continue
        snapshots.append((info.timestamp, dict(model)))
    for sel in boxes:
        got = arr[sel]
        keys = [tuple(c[i].item() for c in got.coords) for i in range(len(got))]
        assert len(set(keys)) == len(keys)
        assert dict(zip(keys, got.values["v"].tolist(), strict=True)) == {
            k: v for k, v in model.items() if _selected(k, sel)}
        if len(got):  # results come in the global cell order
            stacked = np.stack(got.coords, axis=1)
            assert (global_order(schema, stacked) == np.arange(len(got))).all()
    for ts, past in snapshots:
        try:
            got = tessera.open_array(arr.uri, at=ts, storage_options=options)[...]
        except tessera.HistoryVacuumedError:
            continue
        keys = [tuple(c[i].item() for c in got.coords) for i in range(len(got))]
        assert dict(zip(keys, got.values["v"].tolist(), strict=True)) == past


PROFILE = settings(max_examples=50, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                          HealthCheck.function_scoped_fixture])


@PROFILE
@given(history=sparse_histories())
def test_sparse_arrays_match_a_dict_memory(history) -> None:
    _check("memory://prop-sparse", {}, history)


@settings(PROFILE, max_examples=15)
@given(history=sparse_histories())
def test_sparse_arrays_match_a_dict_file(tmp_path_factory, history) -> None:
    _check(tmp_path_factory.mktemp("sprop").as_uri(), {}, history)


@settings(PROFILE, max_examples=8)
@given(history=sparse_histories())
def test_sparse_arrays_match_a_dict_s3(s3_server, history) -> None:
    _check(s3_server.unique_url("sprop"), s3_server.storage_options(), history)
