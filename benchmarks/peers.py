"""The systems Tessera is measured against, on the same S3 test server and emulated link:
zarr v3 (through its obstore-backed store), TileDB-Py dense (in a child process: TileDB holds
the GIL during queries, which would stall the link emulator's thread), whole-object
downloads and exact byte ranges on a raw object.

Each reader returns the selection's cells as an ndarray; the caller checks them against the
numpy truth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from obstore.store import S3Store

import tessera
from tessera.testing import S3TestServer

WORKER = Path(__file__).with_name("_tiledb_worker.py")


def obstore_s3(server: S3TestServer, endpoint: str, prefix: str) -> S3Store:
    """An obstore S3 store on the test server's bucket, reached at ``endpoint``."""
    return S3Store(server.bucket, prefix=prefix, endpoint=endpoint, region=server.region,
                   access_key_id=server.access_key_id,
                   secret_access_key=server.secret_access_key,
                   client_options={"allow_http": True})


# -- zarr -------------------------------------------------------------------------------------
def zarr_write(server: S3TestServer, name: str, data: np.ndarray, chunks: tuple[int, ...],
               codec: str | None, shards: tuple[int, ...] | None = None) -> None:
    """Write ``data`` as a zarr v3 array (``codec``: None or ``zstd``; ``shards``: shard
    shape, with ``chunks`` as the inner chunks)."""
    store = zarr.storage.ObjectStore(obstore_s3(server, server.endpoint, name))
    compressors = None if codec is None else zarr.codecs.ZstdCodec(level=3)
    arr = zarr.create_array(store, shape=data.shape, dtype=data.dtype, chunks=chunks,
                            shards=shards, compressors=compressors, overwrite=True)
    arr[...] = data


def zarr_open(server: S3TestServer, endpoint: str, name: str) -> Any:
    """A zarr array read through ``endpoint`` (the link)."""
    store = zarr.storage.ObjectStore(obstore_s3(server, endpoint, name), read_only=True)
    return zarr.open_array(store, mode="r")


# -- whole objects and exact ranges -------------------------------------------------------------
def raw_write(server: S3TestServer, key: str, data: np.ndarray) -> None:
    """The array as one raw C-order object."""
    tessera.open_store(server.url(""), **server.storage_options()).put(key, data)


def whole_read(store: tessera.Store, key: str, shape: tuple[int, ...], dtype: Any,
               sel: Any) -> np.ndarray:
    """Download the whole object, then slice it."""
    full = np.frombuffer(memoryview(store.get(key)), dtype).reshape(shape)
    out: np.ndarray = full[sel].copy()
    return out


def exact_ranges(shape: tuple[int, int], itemsize: int, rows: np.ndarray,
                 cols: slice) -> list[tuple[int, int]]:
    """The exact byte ranges of ``rows`` x a column slice (step 1) in a C-order 2-D object,
    contiguous runs merged."""
    c0, c1, _ = cols.indices(shape[1])
    width = (c1 - c0) * itemsize
    if c0 == 0 and c1 == shape[1]:  # full rows: runs of consecutive rows are one range
        rows = np.sort(rows)
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        return [(int(r[0]) * shape[1] * itemsize, len(r) * width)
                for r in np.split(rows, breaks)]
    return [((int(r) * shape[1] + c0) * itemsize, width) for r in rows]


def ranges_read(store: tessera.Store, key: str, shape: tuple[int, int], dtype: Any,
                rows: np.ndarray, cols: slice) -> np.ndarray:
    """Fetch exactly the bytes of ``rows`` x ``cols`` (one request per contiguous run)."""
    dt = np.dtype(dtype)
    ranges = exact_ranges(shape, dt.itemsize, rows, cols)
    bufs = store.get_ranges(key, ranges)
    flat = np.frombuffer(b"".join(bytes(b) for b in bufs), dt)
    c0, c1, _ = cols.indices(shape[1])
    return flat.reshape(len(rows), c1 - c0)


# -- TileDB -----------------------------------------------------------------------------------
def tiledb_config(server: S3TestServer, endpoint: str, concurrency: int | None) -> dict[str, str]:
    host = endpoint.removeprefix("http://")
    cfg = {"vfs.s3.endpoint_override": host, "vfs.s3.scheme": "http",
           "vfs.s3.use_virtual_addressing": "false", "vfs.s3.region": server.region,
           "vfs.s3.aws_access_key_id": server.access_key_id,
           "vfs.s3.aws_secret_access_key": server.secret_access_key}
    if concurrency:
        cfg.update({"sm.io_concurrency_level": str(concurrency),
                    "sm.compute_concurrency_level": str(concurrency),
                    "vfs.s3.max_parallel_ops": str(concurrency)})
    return cfg


def _run_worker(spec: dict[str, Any], timeout_s: float = 1800) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tiledb-") as tmp:
        path = Path(tmp) / "spec.json"
        spec = {**spec, "out": tmp}
        path.write_text(json.dumps(spec))
        done = subprocess.run([sys.executable, str(WORKER), str(path)], capture_output=True,
                              text=True, timeout=timeout_s, env={**os.environ})
        if done.returncode != 0:
            raise RuntimeError(f"TileDB worker failed: {done.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        result["arrays"] = [np.load(Path(tmp) / f"r{i}.npy") for i in
                            range(result.get("count", 0))]
        return result


def tiledb_write(server: S3TestServer, name: str, data: np.ndarray,
                 tile: tuple[int, ...]) -> None:
    """Write ``data`` as a TileDB dense array (no filters) straight to the store."""
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "data.npy", data)
        _run_worker({"op": "write", "uri": f"s3://{server.bucket}/{name}",
                     "config": tiledb_config(server, server.endpoint, None),
                     "data": str(Path(tmp) / "data.npy"), "tile": list(tile)})


def tiledb_read(server: S3TestServer, endpoint: str, name: str, selections: list[Any],
                concurrency: int | None) -> tuple[list[float], list[np.ndarray]]:
    """Run ``selections`` (tuples of slices / index lists) on the TileDB array, timed one by
    one inside the child process; returns the seconds and the results."""
    encoded = [[_encode(s) for s in sel] for sel in selections]
    result = _run_worker({"op": "read", "uri": f"s3://{server.bucket}/{name}",
                          "config": tiledb_config(server, endpoint, concurrency),
                          "selections": encoded})
    return result["seconds"], result["arrays"]


def _encode(item: Any) -> Any:
    if isinstance(item, slice):
        return {"slice": [item.start, item.stop]}
    return {"index": [int(i) for i in np.asarray(item).ravel()]}
