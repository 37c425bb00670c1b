"""Tensors as tensor tables take and give them: one canonical form per kind (a dense numpy
array, or sorted, coalesced COO coordinates and values), every supported dtype, and the
conversions from numpy, PyTorch (strided and sparse COO/CSR/CSC/BSR), scipy.sparse and
pydata ``sparse``.

Values keep their bits: a dtype is carried by name (``"bfloat16"`` too, which numpy lacks and
which travels as ``uint16`` bits), and stored as raw little-endian bytes, so every supported
dtype round-trips exactly.

>>> import numpy as np
>>> t = canonical(np.array([[0, 2], [0, 0]], np.int16))
>>> t.dtype, t.shape, t.nnz
('int16', (2, 2), 1)
>>> s = t.to_coo()
>>> s.coords.tolist(), s.values.tolist()
([[0, 1]], [2])
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tessera.errors import FormatError

#: dtype name -> numpy dtype the bits travel in (little-endian).
DTYPES: dict[str, np.dtype[Any]] = {
    name: np.dtype(numpy).newbyteorder("<") for name, numpy in (
        ("bool", "bool"), ("int8", "i1"), ("int16", "i2"), ("int32", "i4"), ("int64", "i8"),
        ("uint8", "u1"), ("uint16", "u2"), ("uint32", "u4"), ("uint64", "u8"),
        ("float16", "f2"), ("bfloat16", "u2"), ("float32", "f4"), ("float64", "f8"),
        ("complex64", "c8"), ("complex128", "c16"))}
#: dtypes only dense (FTSF) tensors may have.
DENSE_ONLY = frozenset({"complex64", "complex128"})


def check_dtype(name: str) -> np.dtype[Any]:
    """The numpy dtype the bits of ``name`` travel in, or a ``FormatError`` listing the
    supported ones."""
    try:
        return DTYPES[name]
    except KeyError:
        raise FormatError(f"dtype {name!r} cannot be stored in a tensor table; supported: "
                          f"{', '.join(DTYPES)}") from None


@dataclasses.dataclass(frozen=True)
class DenseTensor:
    """A dense tensor: C-contiguous little-endian ``array`` holding the bits of ``dtype``."""

    array: np.ndarray
    dtype: str

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(n) for n in self.array.shape)

    @property
    def nnz(self) -> int:
        """Elements that are not zero (NaN counts; -0.0 does not)."""
        if self.dtype == "bfloat16":  # bits: +0 is 0x0000, -0 is 0x8000
            return int(np.count_nonzero(self.array & 0x7FFF))
        return int(np.count_nonzero(self.array))

    def to_coo(self) -> CooTensor:
        """The non-zeros in C order (a -0.0 is not one: it is dropped)."""
        mask = (self.array & 0x7FFF) != 0 if self.dtype == "bfloat16" else self.array != 0
        coords = np.argwhere(mask).astype(np.int64)
        return CooTensor(self.shape, coords, np.ascontiguousarray(self.array[mask]), self.dtype)


@dataclasses.dataclass(frozen=True)
class CooTensor:
    """A sparse tensor: ``coords`` (nnz, N) int64 in C order without duplicates, ``values``
    (nnz,) holding the bits of ``dtype``."""

    shape: tuple[int, ...]
    coords: np.ndarray
    values: np.ndarray
    dtype: str

    @property
    def nnz(self) -> int:
        return len(self.values)

    def to_dense(self) -> DenseTensor:
        out = np.zeros(self.shape, DTYPES[self.dtype])
        if self.nnz:
            out[tuple(self.coords.T)] = self.values
        return DenseTensor(out, self.dtype)


Tensor = DenseTensor | CooTensor


def canonical(x: Any) -> Tensor:
    """``x`` (numpy, torch, scipy.sparse, pydata sparse) as a :data:`Tensor`; a
    ``FormatError`` names what cannot be stored and how to convert it."""
    if isinstance(x, (DenseTensor, CooTensor)):
        return x
    module = type(x).__module__.split(".")[0]
    if module == "torch":
        return _from_torch(x)
    if module == "scipy":
        coo = x.tocoo()
        coords = np.stack([np.asarray(coo.row), np.asarray(coo.col)], axis=1)
        return coo_tensor(tuple(coo.shape), coords, np.asarray(coo.data))
    if module == "sparse" and hasattr(x, "coords") and hasattr(x, "data"):
        return coo_tensor(tuple(x.shape), np.asarray(x.coords).T, np.asarray(x.data))
    if isinstance(x, np.ndarray) or np.isscalar(x) or isinstance(x, (list, tuple)):
        return dense_tensor(np.asarray(x))
    raise FormatError(f"cannot store a {type(x).__module__}.{type(x).__name__}: give a numpy "
                      "array, a torch tensor, a scipy.sparse matrix or a pydata sparse array")


def dense_tensor(array: np.ndarray, dtype: str | None = None) -> DenseTensor:
    """``array`` as a :class:`DenseTensor` (copied to C order and little-endian if needed)."""
    name = dtype or _dtype_name(array.dtype)
    bits = check_dtype(name)
    # np.ascontiguousarray would make a 0-d array 1-d
    return DenseTensor(np.require(np.asarray(array), dtype=bits, requirements="C"), name)


def coo_tensor(shape: tuple[int, ...], coords: np.ndarray, values: np.ndarray,
               dtype: str | None = None) -> CooTensor:
    """A :class:`CooTensor` from coordinates ``(nnz, N)`` in any order, duplicates summed
    (as torch's ``coalesce``) and explicit zeros dropped; bad coordinates are refused."""
    name = dtype or _dtype_name(values.dtype)
    bits = check_dtype(name)
    shape = tuple(int(n) for n in shape)
    coords = np.asarray(coords)
    values = np.asarray(values)
    if coords.ndim != 2 or coords.shape[1] != len(shape) or len(values) != len(coords) \
            or values.ndim != 1:
        raise FormatError(f"sparse input: coordinates must be (nnz, {len(shape)}) and values "
                          f"(nnz,), got {coords.shape} and {values.shape}")
    if coords.size and coords.dtype.kind == "f" and not np.isfinite(coords).all():
        raise FormatError("sparse input: the coordinates hold NaN or infinity")
    if coords.size and coords.dtype.kind not in "iuf":
        raise FormatError(f"sparse input: coordinates must be integers, got {coords.dtype}")
    coords = coords.astype(np.int64)
    if coords.size and ((coords < 0).any() or (coords >= np.asarray(shape)).any()):
        bad = int(np.flatnonzero(((coords < 0) | (coords >= np.asarray(shape))).any(1))[0])
        raise FormatError(f"sparse input: coordinate {coords[bad].tolist()} is outside the "
                          f"shape {shape}")
    values = values.astype(bits)
    if not len(values):
        return CooTensor(shape, np.zeros((0, len(shape)), np.int64), values, name)
    linear = np.ravel_multi_index(tuple(coords.T), shape) if shape else np.zeros(len(values),
                                                                                  np.int64)
    order = np.argsort(linear, kind="stable")
    linear, values = linear[order], values[order]
    unique, first = np.unique(linear, return_index=True)
    if len(unique) != len(linear):
        if name == "bfloat16":
            raise FormatError("sparse bfloat16 input has duplicate coordinates; coalesce it "
                              "first (x.coalesce())")
        values = np.add.reduceat(values, first).astype(bits)
    keep = (values & 0x7FFF) != 0 if name == "bfloat16" else values != 0
    coords = np.stack(np.unravel_index(unique[keep], shape), axis=1).astype(np.int64) \
        if shape else np.zeros((int(keep.sum()), 0), np.int64)
    return CooTensor(shape, coords, np.ascontiguousarray(values[keep]), name)


def _dtype_name(dtype: np.dtype[Any]) -> str:
    if dtype.kind in "OUSVMm":
        raise FormatError(f"dtype {dtype} cannot be stored in a tensor table (object, string, "
                          f"void and datetime are not tensors); supported: {', '.join(DTYPES)}")
    name = "bool" if dtype == np.bool_ else dtype.newbyteorder("=").name
    check_dtype(name)
    return name


def _from_torch(x: Any) -> Tensor:
    import torch

    if x.is_quantized:
        raise FormatError("quantized torch tensors cannot be stored; call .dequantize() first")
    if getattr(x, "is_nested", False):
        raise FormatError("nested torch tensors cannot be stored; store each component")
    if x.device.type == "meta":
        raise FormatError("a torch tensor on the meta device has no data to store")
    x = x.detach().cpu()
    if x.layout != torch.strided:
        if x.layout != torch.sparse_coo:
            x = x.to_sparse_coo()
        x = x.coalesce()
        return coo_tensor(tuple(x.shape), _torch_numpy(x.indices()).T,
                          _torch_numpy(x.values()), _torch_dtype_name(x.dtype))
    return dense_tensor(_torch_numpy(x), _torch_dtype_name(x.dtype))


def _torch_dtype_name(dtype: Any) -> str:
    name = str(dtype).removeprefix("torch.")
    check_dtype(name)
    return name


def _torch_numpy(x: Any) -> np.ndarray:
    import torch

    if x.dtype == torch.bfloat16:
        return np.asarray(x.contiguous().view(torch.int16).numpy().view(np.uint16))
    return np.asarray(x.contiguous().numpy())
