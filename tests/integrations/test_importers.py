"""Importers copy HDF5, zarr and npy data into Tessera exactly, keeping what they can."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import tessera
import tessera.h5
from tessera.cli.main import app
from tessera.importers import arrays as importers

h5py = pytest.importorskip("h5py")
zarr = pytest.importorskip("zarr")


@pytest.fixture
def small_slabs(monkeypatch):
    """Slabs of 512 bytes, so that small sources are copied in several fragments."""
    monkeypatch.setattr(importers, "SLAB_BYTES", 512)


def make_h5(path):
    rng = np.random.default_rng(1)
    data = {"images": rng.integers(0, 255, (20, 16, 3), dtype=np.uint8),
            "grp/temps": rng.normal(size=(33, 7)).astype(">f8"),  # big-endian source
            "grp/deep/ids": np.arange(50, dtype=np.int64)}
    with h5py.File(path, "w") as f:
        f.attrs["site"] = "north"
        f.create_dataset("images", data=data["images"], chunks=(8, 8, 3),
                         compression="gzip", compression_opts=6)
        f.create_dataset("grp/temps", data=data["grp/temps"], chunks=(10, 7),
                         compression="lzf")
        f.create_dataset("grp/deep/ids", data=data["grp/deep/ids"])
        f["grp"].attrs["scale"] = np.float32(0.5)
        f["images"].attrs["layout"] = "HWC"
        f.create_dataset("names", data=np.array([b"a", b"b"]))
        f.create_dataset("scalar", data=3.0)
    return data


def test_import_hdf5_keeps_data_chunks_compression_and_attrs(store_url, tmp_path,
                                                             small_slabs):
    url, options = store_url
    data = make_h5(tmp_path / "src.h5")
    target = f"{url.rstrip('/')}/imported"
    report = importers.import_hdf5(tmp_path / "src.h5", target, storage_options=options)
    assert sorted(report.imported) == ["/grp/deep/ids", "/grp/temps", "/images"]
    assert dict(report.skipped) == {"names": "dtype |S1 is not numeric",
                                    "scalar": "scalar dataset"}
    assert any("lzf" in note for _, note in report.notes)
    f = tessera.h5.File(target, "r", storage_options=options)
    for name, want in data.items():
        np.testing.assert_array_equal(f[name][...], want)
    assert f["images"].chunks == (8, 8, 3)
    assert (f["images"].compression, f["images"].compression_opts) == ("gzip", 6)
    assert f["grp/temps"].compression is None
    assert f.attrs["site"] == "north" and f["grp"].attrs["scale"] == np.float32(0.5)
    assert f["images"].attrs["layout"] == "HWC"
    assert len(f["grp/temps"].array.fragments) > 1  # copied in slabs


def test_import_zarr_group(tmp_path, small_slabs):
    src = tmp_path / "src.zarr"
    g = zarr.open_group(src, mode="w")
    g.attrs["who"] = "zarr"
    a = g.create_array("sub/x", shape=(30, 12), chunks=(8, 4), dtype="i4")
    a[:] = np.arange(360).reshape(30, 12)
    a.attrs["unit"] = "K"
    b = g.create_array("y", shape=(9,), chunks=(4,), dtype="f4",
                       compressors=zarr.codecs.GzipCodec(level=3))
    b[:] = np.linspace(0, 1, 9)
    target = (tmp_path / "out").as_uri()
    report = importers.import_zarr(src, target)
    assert sorted(report.imported) == ["/sub/x", "/y"]
    f = tessera.h5.File(target, "r")
    np.testing.assert_array_equal(f["sub/x"][:], a[:])
    np.testing.assert_array_equal(f["y"][:], b[:])
    assert f["sub/x"].chunks == (8, 4) and f["sub/x"].compression == "zstd"
    assert (f["y"].compression, f["y"].compression_opts) == ("gzip", 3)
    assert f.attrs["who"] == "zarr" and f["sub/x"].attrs["unit"] == "K"


def test_import_npy_and_npz(tmp_path, small_slabs):
    values = np.arange(1000, dtype=np.int16).reshape(40, 25)
    np.save(tmp_path / "a.npy", values)
    uri = (tmp_path / "a").as_uri()
    report = importers.import_npy(tmp_path / "a.npy", uri, tile=(8, 25), codec="zstd")
    assert report.nbytes == values.nbytes
    arr = tessera.open_array(uri)
    np.testing.assert_array_equal(arr[:], values)
    assert arr.schema.attrs[0].codec == "zstd"
    np.savez(tmp_path / "b.npz", first=values, second=np.ones(3))
    importers.import_npy(tmp_path / "b.npz", (tmp_path / "b").as_uri())
    f = tessera.h5.File((tmp_path / "b").as_uri(), "r")
    assert sorted(f.keys()) == ["first", "second"]
    np.testing.assert_array_equal(f["first"][:], values)
    with pytest.raises(tessera.ArrayExistsError):
        importers.import_npy(tmp_path / "a.npy", uri)


def test_import_npy_refuses_pickled_objects(tmp_path):
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="pickle"):
        importers.import_npy(tmp_path / "o.npy", (tmp_path / "o").as_uri())


def test_cli_imports(tmp_path):
    make_h5(tmp_path / "src.h5")
    np.save(tmp_path / "a.npy", np.arange(12).reshape(3, 4))
    runner = CliRunner()
    done = runner.invoke(app, ["import", "hdf5", str(tmp_path / "src.h5"),
                               (tmp_path / "h").as_uri()])
    assert done.exit_code == 0, done.output
    assert "imported 3 dataset(s)" in done.output and "skipped names" in done.output
    done = runner.invoke(app, ["import", "npy", str(tmp_path / "a.npy"), (tmp_path / "n").as_uri(),
                               "--tile", "2,2"])
    assert done.exit_code == 0, done.output
    assert tessera.open_array((tmp_path / "n").as_uri()).schema.dims[0].tile == 2
    z = zarr.open_array(tmp_path / "z.zarr", mode="w", shape=(5,), chunks=(2,), dtype="u1")
    z[:] = [1, 2, 3, 4, 5]
    done = runner.invoke(app, ["import", "zarr", str(tmp_path / "z.zarr"),
                               (tmp_path / "zt").as_uri()])
    assert done.exit_code == 0, done.output
    assert tessera.h5.File((tmp_path / "zt").as_uri())["data"][:].tolist() == [1, 2, 3, 4, 5]
