"""Child process for TileDB-Py (see peers.py): writes an array or times a list of reads.

    python benchmarks/_tiledb_worker.py SPEC.json

The spec (JSON, written by peers.py) names the operation, the array URI, the TileDB config,
and for reads the selections; results go to ``r<i>.npy`` in the spec's ``out`` folder and
one JSON line on stdout.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import tiledb


def _decode(item: dict) -> object:
    if "slice" in item:
        return slice(*item["slice"])
    return np.asarray(item["index"], dtype=np.int64)


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    ctx = tiledb.Ctx(tiledb.Config(spec["config"]))
    if spec["op"] == "write":
        data = np.load(spec["data"])
        dims = [tiledb.Dim(name=f"d{i}", domain=(0, n - 1), tile=t, dtype=np.int64, ctx=ctx)
                for i, (n, t) in enumerate(zip(data.shape, spec["tile"], strict=True))]
        schema = tiledb.ArraySchema(domain=tiledb.Domain(*dims, ctx=ctx), sparse=False,
                                    attrs=[tiledb.Attr(name="v", dtype=data.dtype, ctx=ctx)],
                                    ctx=ctx)
        tiledb.DenseArray.create(spec["uri"], schema, ctx=ctx)
        with tiledb.DenseArray(spec["uri"], mode="w", ctx=ctx) as arr:
            arr[:] = data
        print(json.dumps({"count": 0}))
        return
    seconds = []
    with tiledb.DenseArray(spec["uri"], mode="r", ctx=ctx) as arr:
        _ = arr.schema  # the schema is fetched on open; reads below are timed alone
        for i, sel in enumerate(spec["selections"]):
            items = [_decode(s) for s in sel]
            t0 = time.perf_counter()
            if any(isinstance(s, np.ndarray) for s in items):
                out = arr.multi_index[tuple(s.tolist() if isinstance(s, np.ndarray) else
                                            slice(s.start, s.stop - 1) for s in items)]["v"]
            else:
                out = arr[tuple(items)]
                out = out["v"] if isinstance(out, dict) else out
            seconds.append(time.perf_counter() - t0)
            np.save(Path(spec["out"]) / f"r{i}.npy", out)
    print(json.dumps({"count": len(seconds), "seconds": seconds}))


if __name__ == "__main__":
    main()
