"""tessera.dask.from_tensor: a dask array of a table's tensor, chunked along the leading
dimension, equal to the tensor for dense and sparse formats, pinned to its version."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dask")

from tessera.dask import from_tensor
from tessera.errors import FormatError
from tessera.tables import TensorTable


def test_dask_arrays_of_dense_and_sparse_tensors(tmp_path) -> None:
    url = (tmp_path / "t").as_uri()
    tt = TensorTable.create(url)
    dense = np.random.default_rng(0).random((10, 6, 5))
    sparse = np.zeros((12, 40))
    sparse[[1, 5, 11], [3, 0, 39]] = [1.0, 2.0, 3.0]
    tt.write_many({"d": dense, "s": sparse})
    d = from_tensor(url, "d", chunks=(3, 6, 5))
    assert d.chunks[0] == (3, 3, 3, 1)
    assert np.array_equal(d.compute(), dense)
    assert np.allclose(d[2:9, ::2].sum(axis=0).compute(), dense[2:9, ::2].sum(axis=0))
    s = from_tensor(url, "s")
    assert tt["s"].layout == "bsgs" and np.array_equal(s.compute(), sparse)
    tt.write("d", np.zeros((10, 6, 5)), mode="overwrite")
    assert np.array_equal(d.compute(), dense)  # pinned to the version it was made at
    torch = pytest.importorskip("torch")
    tt.write("bf", torch.ones(3, dtype=torch.bfloat16))
    with pytest.raises(FormatError, match="bfloat16"):
        from_tensor(url, "bf")
