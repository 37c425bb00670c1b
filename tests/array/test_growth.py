"""Growing arrays: ``maxshape`` at create time, ``resize`` and ``append`` recorded as
timestamped changes (time travel sees the old shape), the grown region reading as the fill
value until written, and concurrent appenders in many processes getting disjoint ranges."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

import tessera
from tessera.errors import InvalidArgumentError, SchemaError

APPENDER = """
import sys, numpy as np, tessera
uri, who, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
options = dict(kv.split("=", 1) for kv in sys.argv[4:])
options = {k: (v == "true") if v in ("true", "false") else v for k, v in options.items()}
arr = tessera.open_array(uri, mode="w", storage_options=options)
for i in range(n):
    arr.append(np.full((1, 8), who * 1000 + i, np.int64))
print("done", who)
"""


def _rows(uri: str, options: dict | None = None) -> tessera.Array:
    schema = tessera.ArraySchema([tessera.Dim("row", (0, -1), 16), tessera.Dim("col", (0, 7), 8)],
                                 [tessera.Attr("v", "int64", fill=-1)], maxshape=(None, 8))
    return tessera.create_array(uri, schema, storage_options=options or {})


def test_append_resize_and_time_travel() -> None:
    arr = _rows("memory://grow-basic")
    assert arr.shape == (0, 8) and len(arr) == 0 and arr[:].shape == (0, 8)
    arr.append(np.zeros((3, 8), np.int64))
    t3 = time.time_ns()
    arr.append(np.ones((2, 8), np.int64))
    assert arr.shape == (5, 8) and arr[:, 0].tolist() == [0, 0, 0, 1, 1]
    t5 = time.time_ns()
    arr.resize((9, 8))  # grown: the new region reads as the fill value until written
    assert arr.shape == (9, 8) and arr[5:, 0].tolist() == [-1] * 4
    arr[7] = np.full(8, 7, np.int64)
    assert arr[:, 0].tolist() == [0, 0, 0, 1, 1, -1, -1, 7, -1]
    arr.resize((4, 8))  # shrunk: the cells beyond are hidden
    assert arr[:, 0].tolist() == [0, 0, 0, 1]
    with pytest.raises(IndexError, match="domain"):
        arr[6]
    arr.append(np.full((1, 8), 2, np.int64))  # appends go after the shrunk end
    assert arr[:, 0].tolist() == [0, 0, 0, 1, 2]
    for t, shape in ((t3, (3, 8)), (t5, (5, 8))):
        old = tessera.open_array("memory://grow-basic", at=t)
        assert old.shape == shape and old[:, 0].tolist() == [0] * 3 + [1] * (shape[0] - 3)
    other = tessera.open_array("memory://grow-basic")
    assert other.shape == (5, 8)
    arr.append(np.full((2, 8), 3, np.int64))
    other.refresh()  # another handle sees the growth at its next look
    assert other.shape == (7, 8) and other[-1, 0] == 3


def test_from_numpy_and_the_schema_keep_maxshape() -> None:
    arr = tessera.from_numpy("memory://grow-numpy", np.arange(6).reshape(2, 3), tile=(4, 3),
                             maxshape=(10, 3))
    assert arr.schema.maxshape == (10, 3) and arr.tile == (4, 3)
    arr.append(np.arange(6).reshape(2, 3))
    assert arr[:].tolist() == [[0, 1, 2], [3, 4, 5]] * 2
    again = tessera.ArraySchema.from_json(arr.schema.to_json())
    assert again.maxshape == (10, 3)
    assert '"version": 2' in arr.schema.to_json()  # older Tessera refuses it, clearly
    assert '"version": 1' in tessera.from_numpy("memory://grow-fixed",
                                                np.zeros(2)).schema.to_json()
    with pytest.raises(InvalidArgumentError, match="maxshape allows 10"):
        arr.append(np.zeros((7, 3), np.int64))
    with pytest.raises(InvalidArgumentError, match="cannot grow along axis 1"):
        arr.append(np.zeros((4, 1), np.int64), axis=1)


def test_a_shape_at_its_maxshape_can_shrink_and_grow_back() -> None:
    arr = tessera.from_numpy("memory://grow-at-max", np.arange(6), tile=(2,), maxshape=(6,))
    arr.resize((4,))
    assert arr.shape == (4,) and arr[:].tolist() == [0, 1, 2, 3]
    arr.resize((6,))  # hidden, not erased (see docs/arrays.md)
    assert arr[:].tolist() == [0, 1, 2, 3, 4, 5]


def test_growth_errors_say_what_to_do() -> None:
    fixed = tessera.from_numpy("memory://grow-err-fixed", np.zeros(4))
    with pytest.raises(InvalidArgumentError, match="created with maxshape"):
        fixed.append(np.ones(2))
    with pytest.raises(InvalidArgumentError, match="created with maxshape"):
        fixed.resize((8,))
    arr = _rows("memory://grow-err")
    with pytest.raises(InvalidArgumentError, match=r"must match the array's \(0, 8\)"):
        arr.append(np.zeros((2, 7), np.int64))
    with pytest.raises(InvalidArgumentError, match="no values"):
        arr.append(np.zeros((0, 8), np.int64))
    with pytest.raises(InvalidArgumentError, match="axis must be"):
        arr.append(np.zeros((1, 8), np.int64), axis=2)
    with pytest.raises(InvalidArgumentError, match="exceed the maxshape 8"):
        arr.resize((4, 9))
    with pytest.raises(InvalidArgumentError, match="needs 2 sizes"):
        arr.resize((4,))
    with pytest.raises(tessera.ReadOnlyError):
        tessera.open_array("memory://grow-err").append(np.zeros((1, 8), np.int64))
    dim = tessera.Dim("x", (0, 3), 2)
    attr = [tessera.Attr("v", "i4")]
    with pytest.raises(SchemaError, match="one entry per dimension"):
        tessera.ArraySchema([dim], attr, maxshape=(4, 4))
    with pytest.raises(SchemaError, match=">= the dimension's size 4"):
        tessera.ArraySchema([dim], attr, maxshape=(2,))
    with pytest.raises(SchemaError, match="needs a tile extent"):
        tessera.ArraySchema([tessera.Dim("x", (0, 3))], attr, maxshape=(None,))
    with pytest.raises(SchemaError, match="sparse arrays"):
        tessera.ArraySchema([dim], attr, sparse=True, maxshape=(None,))
    with pytest.raises(SchemaError, match="hi is below lo"):
        tessera.ArraySchema([tessera.Dim("x", (0, -2), 2)], attr)  # (0, -1): empty, allowed


def _append_concurrently(uri: str, options: dict, procs: int, blocks: int) -> None:
    args = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in options.items()]
    running = [subprocess.Popen([sys.executable, "-c", APPENDER, uri, str(w), str(blocks),
                                 *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for w in range(procs)]
    for p in running:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    arr = tessera.open_array(uri, storage_options=options)
    assert arr.shape == (procs * blocks, 8)
    rows = arr[:]
    assert (rows == rows[:, :1]).all()  # every row is one block, whole
    assert sorted(rows[:, 0].tolist()) == sorted(w * 1000 + i for w in range(procs)
                                                 for i in range(blocks))


def test_four_processes_append_fifty_blocks_each_folder(tmp_path) -> None:
    uri = (tmp_path / "grow-concurrent").as_uri()
    _rows(uri)
    _append_concurrently(uri, {}, 4, 50)


def test_four_processes_append_concurrently_s3(s3_server) -> None:
    uri = s3_server.unique_url("grow-concurrent")
    _rows(uri, s3_server.storage_options())
    _append_concurrently(uri, s3_server.storage_options(), 4, 50)
