"""Array handles where numpy, h5py and zarr users reach: ``np.asarray``, ``len``, iteration,
``size``/``nbytes``/``tile``/``chunks``/``fill_value``, boolean masks (per axis and full
shape), ``oindex`` and ``vindex``, reads and writes, checked against numpy on memory, folder
and S3 stores."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
from tessera.errors import InvalidArgumentError, InvalidTypeError, SelectionError

PROFILE = settings(max_examples=25, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow,
                                          HealthCheck.function_scoped_fixture])


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    """A small array, and one selection of each new form on it."""
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, {1: 20, 2: 9, 3: 5}[ndim])) for _ in range(ndim))
    tile = tuple(draw(st.integers(1, n)) for n in shape)
    seed = draw(st.integers(0, 2**31))
    axes = []
    for n in shape:
        kind = draw(st.sampled_from(["mask", "list", "slice", "int"]))
        if kind == "mask":
            axes.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
        elif kind == "list":
            axes.append(draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=5)))
        elif kind == "slice":
            a = draw(st.integers(0, n - 1))
            axes.append(slice(a, draw(st.integers(a, n)), draw(st.integers(1, 3))))
        else:
            axes.append(draw(st.integers(-n, n - 1)))
    full = np.random.default_rng(seed).random(shape) < 0.3
    points = draw(st.integers(1, 6))
    vshape = draw(st.sampled_from([(points,), (2, points)]))
    rng = np.random.default_rng(seed + 1)
    vindex = tuple(rng.integers(-n, n, size=vshape) for n in shape)
    return {"shape": shape, "tile": tile, "seed": seed, "axes": tuple(axes), "full": full,
            "vindex": vindex}


def _orthogonal(model: np.ndarray, axes: tuple[Any, ...]) -> np.ndarray:
    """numpy's meaning of an orthogonal selection (each axis alone; ints drop the axis)."""
    index = [np.arange(n)[a] if isinstance(a, slice) else
             np.flatnonzero(a) if isinstance(a, np.ndarray) else np.atleast_1d(a)
             for a, n in zip(axes, model.shape, strict=True)]
    out = model[np.ix_(*index)]
    return out.reshape([len(i) for a, i in zip(axes, index, strict=True)
                        if not isinstance(a, (int, np.integer))])


def _check(url: str, options: dict[str, Any], case: dict[str, Any]) -> None:
    rng = np.random.default_rng(case["seed"])
    model = rng.integers(-1000, 1000, size=case["shape"]).astype(np.int32)
    arr = tessera.from_numpy(url, model, tile=case["tile"], storage_options=options)
    axes, full, vindex = case["axes"], case["full"], case["vindex"]
    # reads
    assert np.array_equal(arr[axes], _orthogonal(model, axes))
    assert np.array_equal(arr.oindex[axes], _orthogonal(model, axes))
    if model.ndim > 1:
        assert np.array_equal(arr[full], model[full])
    assert np.array_equal(arr.vindex[full], model[full])
    assert np.array_equal(arr.vindex[vindex], model[vindex])
    assert np.array_equal(np.asarray(arr), model) and len(arr) == len(model)
    assert all(np.array_equal(a, b) for a, b in zip(arr, model, strict=True))
    # writes through the same selections, in order, against the same writes to numpy
    expected = model.copy()
    ortho = _orthogonal(model, axes)
    arr.oindex[axes] = -ortho
    index = tuple(np.arange(n)[a] if isinstance(a, slice) else
                  np.flatnonzero(a) if isinstance(a, np.ndarray) else np.atleast_1d(a)
                  for a, n in zip(axes, model.shape, strict=True))
    expected[np.ix_(*index)] = -ortho.reshape([len(i) for i in index])
    arr[full] = 7 if model.ndim > 1 else arr[full]
    if model.ndim > 1:
        expected[full] = 7
    values = np.arange(vindex[0].size, dtype=np.int32).reshape(vindex[0].shape) + 5000
    arr.vindex[vindex] = values
    expected[vindex] = values
    assert np.array_equal(arr[...], expected)


@PROFILE
@given(case=cases())
def test_new_selections_match_numpy_memory(case) -> None:
    _check(f"memory://np-{uuid.uuid4().hex[:12]}", {}, case)


@PROFILE
@given(case=cases())
def test_new_selections_match_numpy_folder(tmp_path_factory, case) -> None:
    _check((tmp_path_factory.mktemp("np") / "a").as_uri(), {}, case)


@settings(PROFILE, max_examples=8)
@given(case=cases())
def test_new_selections_match_numpy_s3(s3_server, case) -> None:
    _check(s3_server.unique_url("np"), s3_server.storage_options(), case)


def test_vindex_writes_keep_the_last_of_repeated_points_as_numpy() -> None:
    arr = tessera.from_numpy("memory://np-repeat", np.zeros((3, 3), np.int32), tile=(2, 2))
    model = np.zeros((3, 3), np.int32)
    arr.vindex[[1, 1, 2], [0, 0, 2]] = [4, 5, 6]
    model[[1, 1, 2], [0, 0, 2]] = [4, 5, 6]
    assert np.array_equal(arr[:], model)


def test_properties_and_conversions() -> None:
    schema = tessera.ArraySchema([tessera.Dim("y", (0, 9), 4), tessera.Dim("x", (0, 5), 3)],
                                 [tessera.Attr("v", "f4", fill=-1.0)])
    arr = tessera.create_array("memory://np-props", schema)
    assert (arr.size, arr.nbytes, arr.tile, arr.chunks, arr.fill_value) == (
        60, 240, (4, 3), (4, 3), -1.0)
    assert np.array_equal(np.asarray(arr), np.full((10, 6), -1.0, np.float32))
    assert np.asarray(arr, dtype=np.int64).dtype == np.int64
    assert np.array(arr, copy=True).shape == (10, 6)
    with pytest.raises(InvalidArgumentError, match="copy=False"):
        np.asarray(arr, copy=False)
    two = tessera.create_array("memory://np-two-attrs", tessera.ArraySchema(
        [tessera.Dim("x", (0, 3), 2)], [tessera.Attr("a", "i4"), tessera.Attr("b", "f8")]))
    with pytest.raises(InvalidTypeError, match="single-attribute"):
        np.asarray(two)
    rows = list(two)  # several attributes: each row is a dict
    assert len(rows) == 4 and set(rows[0]) == {"a", "b"}


def test_iteration_reads_a_tile_row_at_a_time() -> None:
    data = np.arange(32 * 8).reshape(32, 8)
    arr = tessera.from_numpy("memory://np-iter", data, tile=(8, 4))
    reads = []
    real = arr.read

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(args[0] if args else None)
        return real(*args, **kwargs)

    arr.read = counted  # type: ignore[method-assign]
    assert [r.tolist() for r in arr] == data.tolist()
    assert reads == [slice(0, 8), slice(8, 16), slice(16, 24), slice(24, 32)]


def test_iteration_of_a_domain_not_starting_at_zero() -> None:
    schema = tessera.ArraySchema([tessera.Dim("t", (100, 104), 2)], [tessera.Attr("v", "i4")])
    arr = tessera.create_array("memory://np-iter-domain", schema)
    arr.write(np.arange(5, dtype=np.int32), origin=(100,))
    assert [int(v) for v in arr] == [0, 1, 2, 3, 4] and len(arr) == 5


def test_mask_errors_say_what_to_pass() -> None:
    arr = tessera.from_numpy("memory://np-bad", np.zeros((4, 5)), tile=(2, 2))
    with pytest.raises(SelectionError, match=r"one entry per cell \(5\), got shape \(4,\)"):
        arr[:, np.ones(4, bool)]
    with pytest.raises(SelectionError, match=r"must have the array's shape \(4, 5\)"):
        arr.vindex[np.ones((4, 4), bool)]
    with pytest.raises(SelectionError, match="do not broadcast"):
        arr.vindex[[0, 1, 2], [0, 1]]
    with pytest.raises(SelectionError, match="takes integer arrays"):
        arr.vindex[[0.5], [1]]
    with pytest.raises(SelectionError, match="outside dimension 'd1'"):
        arr.vindex[[0], [7]]
    with pytest.raises(InvalidArgumentError, match="the selection needs"):
        arr.vindex[[0, 1], [0, 1]] = np.zeros(3)


def test_a_mask_reads_no_more_than_the_equivalent_points() -> None:
    """The planner reads a mask selection with no more requests and bytes than the same
    cells given as a list of points (a full mask is planned as those points; a mask per
    axis as an orthogonal selection of the same cells)."""
    rng = np.random.default_rng(3)
    data = rng.integers(0, 100, size=(256, 256)).astype(np.int32)
    arr = tessera.from_numpy("memory://np-mask-plan", data, tile=(64, 64))
    full = rng.random(data.shape) < 0.002
    rows, cols = rng.random(256) < 0.05, rng.random(256) < 0.05
    for mask_sel, cells in ((full, np.nonzero(full)),
                            ((rows, cols), np.nonzero(np.outer(rows, cols)))):
        got = arr[mask_sel]
        mask_plan = arr.last_read.plan
        by_points = arr[tessera.Points(cells)]
        points_plan = arr.last_read.plan
        assert np.array_equal(got.ravel(), by_points)
        assert len(mask_plan.requests) <= len(points_plan.requests)
        assert mask_plan.totals.nbytes <= points_plan.totals.nbytes


def test_h5py_and_zarr_documented_examples_run_unchanged(tmp_path) -> None:
    import tessera.h5 as h5py  # the documented examples, with this one line changed

    # h5py, "Fancy indexing" and "Boolean masks" in the dataset docs
    with h5py.File((tmp_path / "f").as_uri(), "w") as f:
        arr = np.arange(100).reshape((10, 10))
        dset = f.create_dataset("MyDataset", data=arr)
        result = dset[arr > 50]
        assert result.shape == (49,)
        dset = f.create_dataset("fancy", data=np.arange(10 * 10).reshape(10, 10))
        assert dset[:, [1, 3, 8]].shape == (10, 3)
        assert len(dset) == 10 and dset.size == 100

    # zarr, "Advanced indexing" in the user guide (the array made by tessera)
    z = tessera.from_numpy("memory://np-zarr-doc", np.arange(15).reshape(3, 5), tile=(3, 5))
    sel = np.zeros_like(z, dtype=bool)
    sel[0, 0] = True
    sel[1, 1] = True
    assert z.vindex[sel].tolist() == [0, 6]
    z.vindex[sel] = [-1, -2]
    assert z[...].tolist() == [[-1, 1, 2, 3, 4], [5, -2, 7, 8, 9], [10, 11, 12, 13, 14]]
    z = tessera.from_numpy("memory://np-zarr-doc2", np.arange(15).reshape(3, 5), tile=(3, 5))
    assert z.oindex[[0, 2], :].tolist() == [[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]]
    assert z.oindex[[0, 2], [1, 3]].tolist() == [[1, 3], [11, 13]]
    z.oindex[[0, 2], [1, 3]] = [[-1, -2], [-3, -4]]
    assert z[...].tolist() == [[0, -1, 2, -2, 4], [5, 6, 7, 8, 9], [10, -3, 12, -4, 14]]
    z = tessera.from_numpy("memory://np-zarr-doc3", np.arange(15).reshape(3, 5), tile=(3, 5))
    assert z.vindex[[0, 2], [1, 3]].tolist() == [1, 13]
    sel0, sel1 = np.zeros(z.shape[0], dtype=bool), np.zeros(z.shape[1], dtype=bool)
    sel0[0] = sel0[2] = True
    sel1[1] = sel1[3] = True
    assert z.oindex[sel0, sel1].tolist() == [[1, 3], [11, 13]]


def test_sparse_arrays_say_how_to_read_them() -> None:
    schema = tessera.ArraySchema([tessera.Dim("x", (0.0, 10.0))], [tessera.Attr("v", "f4")],
                                 sparse=True)
    arr = tessera.create_array("memory://np-sparse", schema)
    with pytest.raises(InvalidTypeError, match="dense array"):
        np.asarray(arr)
    with pytest.raises(InvalidTypeError, match="by boxes"):
        iter(arr).__next__()
