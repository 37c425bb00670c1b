"""The storage formats of tensor tables as pure functions: every format x dtype x rank round
trips bit for bit, slices equal numpy's on the dense tensor (hypothesis), and a read asks
only for the rows that hold its slice."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.errors import FormatError
from tessera.tables.layouts import LAYOUTS, get_layout
from tessera.tables.layouts.base import EncodeOptions, Header, Need, aux_layout, parse_aux
from tessera.tables.tensors import DTYPES, CooTensor, DenseTensor, canonical, dense_tensor

SPARSE_DTYPES = [d for d in DTYPES if d not in ("complex64", "complex128")]


def _header(t, fmt: str, enc, id_: str = "t") -> Header:
    blob, layout = aux_layout(enc.aux, enc.params)  # through the stored form
    aux, params = parse_aux(blob, layout)
    return Header(id_, "w", fmt, t.dtype, t.shape, t.nnz, 0, enc.chunk_dim_count,
                  enc.flattened_shape, enc.block_shape, aux, params)


def _store(t, fmt: str, **opts):
    options = EncodeOptions(chunk_bytes=opts.pop("chunk_bytes", 64),
                            max_row_bytes=1 << 20, **opts)
    enc = get_layout(fmt).encode(t, options)
    asked: list[Need] = []

    def fetch(need: Need):
        asked.append(need)
        lo, hi = {"lead": ("lo", "hi"), "chunk": ("chunk_index", "chunk_index"),
                  "pos": ("start", "stop")}[need.key]
        return [r for r in enc.rows if r.part == need.part and need.wants(
            getattr(r, lo), getattr(r, hi) - (1 if need.key == "pos" else 0))]

    return enc, _header(t, fmt, enc), fetch, asked


def _dense(result) -> np.ndarray:
    return result.array if isinstance(result, DenseTensor) else result.to_dense().array


def _full(shape):
    return tuple(np.arange(n) for n in shape)


def _random(shape, dtype: str, density: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    bits = DTYPES[dtype]
    mask = rng.random(shape) < density
    if dtype == "bool":
        return mask
    if dtype == "bfloat16":
        vals = rng.integers(1, 0x7F80, shape).astype(np.uint16)
    elif bits.kind == "c":
        vals = (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(bits)
    elif bits.kind == "f":
        vals = rng.normal(size=shape).astype(bits)
    else:
        info = np.iinfo(bits)
        vals = rng.integers(max(info.min, -1000), min(info.max, 1000), shape, endpoint=True
                            ).astype(bits)
        vals[vals == 0] = 1
    return np.where(mask, vals, 0).astype(bits)


@pytest.mark.parametrize("fmt", sorted(LAYOUTS))
@pytest.mark.parametrize("rank", [0, 1, 2, 3, 4, 5])
def test_every_format_dtype_and_rank_round_trips_bit_for_bit(fmt: str, rank: int) -> None:
    shape = (3, 1, 4, 2, 3)[:rank]
    for dtype in (DTYPES if fmt == "ftsf" else SPARSE_DTYPES):
        x = _random(shape, dtype, 0.3, seed=rank)
        t = dense_tensor(x, dtype)
        _, header, fetch, _ = _store(t, fmt)
        got = _dense(get_layout(fmt).read(header, _full(shape), fetch))
        assert got.dtype == DTYPES[dtype] and got.shape == shape
        assert got.tobytes() == x.astype(DTYPES[dtype]).tobytes(), (fmt, dtype, rank)


@pytest.mark.parametrize("fmt", sorted(LAYOUTS))
def test_no_non_zero_keeps_the_shape(fmt: str) -> None:
    t = dense_tensor(np.zeros((3, 0, 2) if fmt == "ftsf" else (3, 4, 2), np.float32))
    _, header, fetch, _ = _store(t, fmt)
    got = _dense(get_layout(fmt).read(header, _full(t.shape), fetch))
    assert got.shape == t.shape and not got.any()


@st.composite
def cases(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(rank))
    sel = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "all"]))
        if kind == "int":
            sel.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.none() | st.integers(-n - 1, n + 1))
            stop = draw(st.none() | st.integers(-n - 1, n + 1))
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
            sel.append(slice(start, stop, step))
        else:
            sel.append(slice(None))
    return shape, tuple(sel), draw(st.sampled_from(sorted(LAYOUTS))), draw(st.integers(0, 99))


@settings(max_examples=150, deadline=None)
@given(cases())
def test_slices_equal_numpy(case) -> None:
    shape, sel, fmt, seed = case
    x = _random(shape, "float32", 0.3, seed)
    _, header, fetch, _ = _store(dense_tensor(x), fmt)
    index = tuple(np.arange(n)[s] if isinstance(s, slice) else np.array([s % n])
                  for s, n in zip(sel, shape, strict=True))
    got = _dense(get_layout(fmt).read(header, index, fetch))
    want = x[tuple(np.ix_(*index))] if index else x
    assert np.array_equal(got, want)


@pytest.mark.parametrize("fmt", ["ftsf", "coo", "csr", "csf", "bsgs"])
def test_a_leading_slice_asks_only_for_its_rows(fmt: str) -> None:
    x = _random((40, 6, 5), "float64", 0.05 if fmt != "ftsf" else 1.0, seed=3)
    enc, header, fetch, asked = _store(dense_tensor(x), fmt, chunk_bytes=256)
    sel = (np.arange(10, 13), np.arange(6), np.arange(5))
    got = _dense(get_layout(fmt).read(header, sel, fetch))
    assert np.array_equal(got, x[10:13])
    fetched = [r for need in asked for r in enc.rows if r.part == need.part and need.wants(
        *((r.lo, r.hi) if need.key == "lead" else (r.chunk_index, r.chunk_index)
          if need.key == "chunk" else (r.start, r.stop - 1)))]
    assert 0 < len(fetched) < len(enc.rows) / 2, (len(fetched), len(enc.rows))


def test_csf_keeps_dimension_zero_at_the_root_and_follows_a_mode_order() -> None:
    x = _random((5, 4, 3, 2), "int32", 0.2, seed=9)
    _, header, _, _ = _store(dense_tensor(x), "csf")
    assert header.aux["fid0"].tolist() == sorted(set(np.nonzero(x)[0].tolist()))
    for order in [(2, 0, 1, 3), (3, 2, 1, 0)]:
        _, h2, f2, _ = _store(dense_tensor(x), "csf", mode_order=order)
        sel = (np.array([1, 3]), *(np.arange(n) for n in x.shape[1:]))
        assert np.array_equal(_dense(get_layout("csf").read(h2, sel, f2)), x[[1, 3]])
    with pytest.raises(FormatError, match="permutation"):
        _store(dense_tensor(x), "csf", mode_order=(0, 0, 1, 2))


def test_bsgs_searches_a_block_shape_and_clips_edge_blocks() -> None:
    x = np.zeros((8, 30, 30), np.float32)
    x[:, 10:14, 20:24] = 1.0  # 4 x 4 clusters
    x[:, 29, 29] = 2.0  # an edge cell
    enc, header, fetch, _ = _store(dense_tensor(x), "bsgs", chunk_bytes=1 << 20)
    assert enc.block_shape[0] == 1 and math.prod(enc.block_shape) > 1
    assert np.array_equal(_dense(get_layout("bsgs").read(header, _full(x.shape), fetch)), x)
    with pytest.raises(FormatError, match="block_shape must be 3 positive"):
        _store(dense_tensor(x), "bsgs", block_shape=(1, 2))


def test_bad_inputs_name_what_is_wrong() -> None:
    with pytest.raises(FormatError, match="unknown format 'dense'"):
        get_layout("dense")
    with pytest.raises(FormatError, match=r"chunk_dim must be 1\.\.3"):
        _store(dense_tensor(np.zeros((2, 2, 2))), "ftsf", chunk_dim=4)
    with pytest.raises(FormatError, match=r"flatten_at must be 1\.\.2"):
        _store(dense_tensor(np.zeros((2, 2, 2))), "csr", flatten_at=3)
    with pytest.raises(FormatError, match="object, string"):
        canonical(np.array(["a"]))
    with pytest.raises(FormatError, match="outside the shape"):
        from tessera.tables.tensors import coo_tensor

        coo_tensor((2, 2), np.array([[0, 2]]), np.array([1.0]))
    with pytest.raises(FormatError, match="row limit"):
        get_layout("ftsf").encode(dense_tensor(np.zeros((2, 1 << 11), np.float64)),
                                  EncodeOptions(chunk_bytes=64, max_row_bytes=1024))


def test_duplicates_are_summed_and_zeros_dropped() -> None:
    from tessera.tables.tensors import coo_tensor

    t = coo_tensor((3, 3), np.array([[1, 1], [0, 2], [1, 1], [2, 0]]),
                   np.array([1.0, 0.0, 2.0, -0.0]))
    assert isinstance(t, CooTensor)
    assert t.coords.tolist() == [[1, 1]] and t.values.tolist() == [3.0]
