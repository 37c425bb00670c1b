"""Importers: HDF5 files, zarr stores and ``.npy``/``.npz`` files into Tessera.

An HDF5 file or a zarr hierarchy becomes a :mod:`tessera.h5` file at the target URI: every
numeric dataset becomes a Tessera array at the same path, keeping its chunk shape as the
tile shape and its compression where Tessera has the codec (gzip, zstd, lz4, blosc; others
are stored uncompressed and reported), with its attributes and its groups' attributes.
A ``.npy`` file becomes one array at the URI; a ``.npz`` file a tessera.h5 file with one
dataset per member.

Data is copied in slabs of whole tile rows (about 64 MiB each, one fragment per slab), so
memory stays bounded whatever the source's size; sources are read, never unpickled
(``allow_pickle=False``). What cannot be imported (strings, compound or object dtypes,
scalars, empty datasets) is skipped and reported, not silently dropped.

>>> import numpy as np, tempfile, pathlib, tessera
>>> path = pathlib.Path(tempfile.mkdtemp()) / "x.npy"
>>> np.save(path, np.arange(20).reshape(4, 5))
>>> report = import_npy(path, "memory://doc-import-npy")
>>> report.imported, tessera.open_array("memory://doc-import-npy")[3, 1:3].tolist()
(['/'], [16, 17])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tessera.array.array import Array
from tessera.array.factories import create_array
from tessera.errors import InvalidArgumentError
from tessera.format.codecs import codec_names
from tessera.format.layout import default_tile
from tessera.format.schema import ArraySchema, Attr, Dim
from tessera.importers.report import ImportReport
from tessera.integrations import h5 as th5
from tessera.integrations.h5_attrs import AttributeManager

#: Bytes copied per slab (rounded to whole tile rows).
SLAB_BYTES = 64 << 20
#: ``progress(label, done_bytes, total_bytes)``
Progress = Callable[[str, int, int], None]


def _skip_reason(shape: tuple[int, ...], dtype: np.dtype[Any]) -> str | None:
    if not shape:
        return "scalar dataset"
    if 0 in shape:
        return f"empty dataset (shape {shape})"
    if dtype.kind not in "biufc":
        return f"dtype {dtype} is not numeric"
    return None


def copy_slabs(source: Any, target: Array, label: str, report: ImportReport,
               progress: Progress | None = None) -> None:
    """Copy ``source`` (anything sliced along its first axis into an ndarray) into
    ``target`` in slabs of whole tile rows, one fragment per slab."""
    shape = tuple(int(n) for n in source.shape)
    row_bytes = math.prod(shape[1:]) * np.dtype(source.dtype).itemsize
    tile0 = target.schema.dims[0].tile
    rows = max(tile0, (SLAB_BYTES // max(1, row_bytes)) // tile0 * tile0)
    total = math.prod(shape) * np.dtype(source.dtype).itemsize
    done = 0
    for start in range(0, shape[0], rows):
        stop = min(shape[0], start + rows)
        block = np.ascontiguousarray(source[start:stop])
        target.write(block.astype(block.dtype.newbyteorder("<"), copy=False),
                     origin=(start,) + (0,) * (len(shape) - 1))
        done += block.nbytes
        if progress is not None:
            progress(label, done, total)
    report.nbytes += done


def import_npy(source: str | Path, url: str, *, tile: tuple[int, ...] | None = None,
               codec: str | None = None, storage_options: dict[str, Any] | None = None,
               progress: Progress | None = None) -> ImportReport:
    """Import a ``.npy`` file as one array at ``url`` (memory-mapped, copied in slabs), or a
    ``.npz`` file as a tessera.h5 file with one dataset per member."""
    report = ImportReport(url=url)
    source = Path(source)
    if source.suffix == ".npz":
        with np.load(source, allow_pickle=False) as npz, \
                th5.File(url, "w-", storage_options=storage_options) as f:
            for name in npz.files:
                values = npz[name]
                reason = _skip_reason(values.shape, values.dtype)
                if reason:
                    report.skipped.append((name, reason))
                    continue
                dset = f.create_dataset(name, values.shape, values.dtype, chunks=tile,
                                        compression=codec)
                copy_slabs(values, dset.array, name, report, progress)
                report.imported.append("/" + name)
        return report
    try:
        values = np.load(source, mmap_mode="r", allow_pickle=False)
    except ValueError as err:
        raise InvalidArgumentError(f"cannot import {source}: {err} Tessera imports numeric "
                                   "arrays and never unpickles (object arrays are pickles)"
                                   ) from None
    reason = _skip_reason(values.shape, values.dtype)
    if reason:
        raise InvalidArgumentError(f"cannot import {source}: {reason}")
    extents = tile or default_tile(values.shape, values.dtype.itemsize)
    schema = ArraySchema([Dim(f"d{i}", (0, n - 1), min(int(t), n)) for i, (n, t) in
                          enumerate(zip(values.shape, extents, strict=True))],
                         [Attr("data", values.dtype.newbyteorder("<").str, None, codec)])
    arr = create_array(url, schema, storage_options=storage_options)
    copy_slabs(values, arr, source.name, report, progress)
    report.imported.append("/")
    return report


def import_hdf5(source: str | Path, url: str, *, storage_options: dict[str, Any] | None = None,
                progress: Progress | None = None) -> ImportReport:
    """Import every dataset (and group) of an HDF5 file into a tessera.h5 file at ``url``."""
    import h5py

    report = ImportReport(url=url)
    with h5py.File(source, "r") as src, \
            th5.File(url, "w-", storage_options=storage_options) as dst:
        _copy_attrs(src.attrs, dst.attrs, "/", report)
        items: list[tuple[str, Any]] = []
        src.visititems(lambda name, obj: items.append((name, obj)))
        for name, obj in items:
            if isinstance(obj, h5py.Group):
                grp = dst.require_group(name)
                _copy_attrs(obj.attrs, grp.attrs, name, report)
                continue
            if not isinstance(obj, h5py.Dataset):
                continue
            reason = _skip_reason(obj.shape, obj.dtype)
            if reason:
                report.skipped.append((name, reason))
                continue
            compression, level = obj.compression, obj.compression_opts
            if compression not in (None, "gzip"):
                report.notes.append((name, f"{compression} compression has no Tessera codec; "
                                           "stored uncompressed"))
                compression, level = None, None
            dset = dst.create_dataset(name, obj.shape, obj.dtype, chunks=obj.chunks,
                                      compression=compression, compression_opts=level,
                                      fillvalue=obj.fillvalue if obj.fillvalue else None)
            _copy_attrs(obj.attrs, dset.attrs, name, report)
            copy_slabs(obj, dset.array, name, report, progress)
            report.imported.append("/" + name)
    return report


#: zarr/numcodecs codec names (lower case) Tessera has, and its name for them.
_ZARR_CODECS = {"zstd": "zstd", "zstdcodec": "zstd", "gzip": "gzip", "gzipcodec": "gzip",
                "zlib": "gzip", "blosc": "blosc", "blosccodec": "blosc", "lz4": "lz4"}


def import_zarr(source: str | Path, url: str, *,
                storage_options: dict[str, Any] | None = None,
                progress: Progress | None = None) -> ImportReport:
    """Import a zarr array or group (v2 or v3; a path or a URL zarr can open) into a
    tessera.h5 file at ``url``."""
    import zarr

    report = ImportReport(url=url)
    root = zarr.open(str(source), mode="r")
    with th5.File(url, "w-", storage_options=storage_options) as dst:
        if isinstance(root, zarr.Array):
            members: list[tuple[str, Any]] = [("data", root)]
        else:
            _copy_attrs(root.attrs, dst.attrs, "/", report)
            members = sorted(root.members(max_depth=None), key=lambda m: m[0])
        for name, obj in members:
            if isinstance(obj, zarr.Group):
                grp = dst.require_group(name)
                _copy_attrs(obj.attrs, grp.attrs, name, report)
                continue
            dtype = np.dtype(obj.dtype)
            reason = _skip_reason(tuple(obj.shape), dtype)
            if reason:
                report.skipped.append((name, reason))
                continue
            compression, level = _zarr_codec(obj, name, report)
            dset = dst.create_dataset(name, tuple(obj.shape), dtype, chunks=obj.chunks,
                                      compression=compression, compression_opts=level)
            _copy_attrs(obj.attrs, dset.attrs, name, report)
            copy_slabs(obj, dset.array, name, report, progress)
            report.imported.append("/" + name)
    return report


def _zarr_codec(arr: Any, name: str, report: ImportReport) -> tuple[str | None, int | None]:
    codecs = list(getattr(arr, "compressors", None) or [])
    if not codecs:
        return None, None
    codec = codecs[0]
    kind = type(codec).__name__.lower()
    ours = _ZARR_CODECS.get(kind) or _ZARR_CODECS.get(str(getattr(codec, "codec_id", "")))
    if ours is None or ours not in codec_names() or len(codecs) > 1:
        report.notes.append((name, f"compressor {type(codec).__name__} has no Tessera codec; "
                                   "stored uncompressed"))
        return None, None
    level = getattr(codec, "level", None) if ours in ("zstd", "gzip") else None
    if ours == "gzip" and level is None:
        level = 4
    return ours, (None if level is None else int(level))


def _copy_attrs(src: Any, dst: AttributeManager, name: str,
                report: ImportReport) -> None:
    for key, value in dict(src).items():
        try:
            dst[key] = value
        except (NotImplementedError, TypeError, ValueError) as err:
            report.notes.append((name, f"attribute {key!r} not copied: {err}"))
