"""tessera.dask: dask arrays over Tessera arrays, read through the planner, written one
fragment per block, on the threaded scheduler and on a distributed.LocalCluster."""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import tessera  # noqa: E402
from tessera.dask import from_array, to_array  # noqa: E402


@pytest.fixture(scope="module")
def cluster_client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        yield client  # not the default: other tests here use memory:// stores in-process


def test_from_array_chunks_are_tiles_and_values_match(store_url):
    url, options = store_url
    data = np.random.default_rng(3).integers(-50, 50, (45, 37), dtype=np.int32)
    uri = f"{url.rstrip('/')}/a"
    tessera.from_numpy(uri, data, tile=(16, 10), storage_options=options)
    x = from_array(uri, storage_options=options)
    assert x.chunks == ((16, 16, 13), (10, 10, 10, 7))
    assert x.dtype == np.int32
    np.testing.assert_array_equal(x.compute(), data)
    np.testing.assert_array_equal(x[3:40:3, 5].compute(), data[3:40:3, 5])
    assert int((x.T @ x)[0, 0].compute()) == int((data.T @ data)[0, 0])


def test_from_array_offsets_domains_and_pins_its_snapshot():
    schema = tessera.ArraySchema([tessera.Dim("y", (100, 119), 8)],
                                 [tessera.Attr("v", "float64", -1.0, None)])
    arr = tessera.create_array("memory://dask-offset", schema)
    arr[100:110] = np.arange(10.0)
    x = from_array(arr)
    arr[100:120] = np.zeros(20)  # after the dask array was made: not seen
    np.testing.assert_array_equal(x.compute(), np.r_[np.arange(10.0), -np.ones(10)])


def test_to_array_writes_one_fragment_per_block(tmp_path):
    x = da.random.default_rng(5).integers(0, 1000, (50, 40), chunks=(20, 15))
    want = x.compute()
    out = to_array(x, (tmp_path / "out").as_uri(), codec="zstd")
    np.testing.assert_array_equal(out[...], want)
    assert len(out.fragments) == 3 * 3
    assert tuple(d.tile for d in out.schema.dims) == (20, 15)
    with pytest.raises(tessera.ArrayExistsError):
        to_array(x, (tmp_path / "out").as_uri())


def test_distributed_cluster_reads_and_writes(cluster_client, tmp_path):
    data = np.arange(60 * 48, dtype=np.float32).reshape(60, 48)
    src = (tmp_path / "src").as_uri()
    tessera.from_numpy(src, data, tile=(16, 16))
    x = from_array(src)
    assert float(cluster_client.compute(x.sum()).result()) == float(data.sum())
    job = to_array(x + 1, (tmp_path / "dst").as_uri(), compute=False)
    names = cluster_client.compute(job).result()
    assert len(names) == 4 * 3 and len(set(names)) == 12  # one fragment per block
    out = tessera.open_array((tmp_path / "dst").as_uri())
    np.testing.assert_array_equal(out[...], data + 1)
    assert len(out.fragments) == 12


def test_vector_cells_are_refused():
    schema = tessera.ArraySchema([tessera.Dim("y", (0, 3), 2)],
                                 [tessera.Attr("rgb", "3u1", 0, None)])
    tessera.create_array("memory://dask-rgb", schema)
    with pytest.raises(TypeError, match="scalar cells"):
        from_array("memory://dask-rgb")


def test_distributed_cluster_reads_tensors_and_images(cluster_client, s3_server):
    pytest.importorskip("deltalake")
    from tessera.dask import from_images, from_tensor
    from tessera.images import ImageColumns
    from tessera.tables import TensorTable

    options = dict(s3_server.storage_options())
    table_url = s3_server.unique_url("dask-table")
    x = np.random.default_rng(1).normal(size=(40, 6)).astype(np.float32)
    TensorTable.create(table_url, storage_options=options).write("x", x)
    t = from_tensor(table_url, "x", chunks=16, storage_options=options)
    np.testing.assert_allclose(cluster_client.compute(t[5:37].sum(axis=0)).result(),
                               x[5:37].sum(axis=0), rtol=1e-5)
    images_url = s3_server.unique_url("dask-images")
    cols = ImageColumns.create(images_url, size=(32, 32), group=4, storage_options=options)
    pixels = np.random.default_rng(2).integers(0, 256, (10, 32, 32, 3), dtype=np.uint8)
    cols.append(pixels)
    d = from_images(images_url, k=8, storage_options=options)
    assert d.shape == (10, 32, 32, 3) and d.chunks[0] == (4, 4, 2)  # one chunk per group
    want = cols.read(list(range(10)), k=8)
    np.testing.assert_array_equal(cluster_client.compute(d[2:9]).result(), want[2:9])
    c = from_images(images_url, k=3, output="coefficients", storage_options=options)
    np.testing.assert_array_equal(cluster_client.compute(c[7]).result(),
                                  cols.read([7], k=3, output="coefficients")[0])
    assert d.dtype == np.uint8 and c.dtype == np.int8
