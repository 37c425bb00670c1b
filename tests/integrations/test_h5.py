"""tessera.h5: a plain h5py script gives identical arrays with h5py on a local file and with
the facade on every backend; unsupported h5py features fail clearly."""

from __future__ import annotations

import numpy as np
import pytest

import tessera
import tessera.h5

h5py = pytest.importorskip("h5py")


def h5py_script(h5, where):
    """An ordinary h5py script: create, write, read slices, attrs, iterate. Returns what it
    read."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (40, 30, 3), dtype=np.uint8)
    out = {}
    with h5.File(where, "w") as f:
        f.attrs["title"] = "camera traps"
        f.attrs["version"] = 3
        grp = f.create_group("train")
        grp.attrs["mean"] = np.array([0.5, 0.25, 0.125])
        dset = grp.create_dataset("images", data=image, chunks=(16, 16, 3),
                                  compression="gzip", compression_opts=4)
        dset.attrs["layout"] = "HWC"
        labels = f.create_dataset("train/labels", shape=(40,), dtype="int64")
        labels[:] = np.arange(40) % 3
        labels[5:10] = 7
        labels[::4] = -1                         # a stepped write
        temps = f.create_dataset("meta/temps", (6, 5), dtype="f4", fillvalue=1.5)
        temps[2:4, 1:3] = 9.0
        temps[[0, 5], 4] = [3.0, 4.0]            # a list write
        f["loose"] = np.linspace(0, 1, 7)
    with h5.File(where, "r") as f:
        out["keys"] = sorted(f.keys())
        out["train_keys"] = list(f["train"].keys())
        out["title"] = f.attrs["title"]
        out["version"] = f.attrs["version"]
        out["mean"] = f["train"].attrs["mean"]
        d = f["train/images"]
        out["shape"], out["dtype"], out["chunks"] = d.shape, d.dtype, d.chunks
        out["layout"] = d.attrs["layout"]
        out["crop"] = d[5:17, 3:29:2, :]
        out["pixel"] = d[3, 4]
        out["col"] = d[:, 7, 1]
        out["labels"] = f["train/labels"][...]
        out["labels_some"] = f["train/labels"][[1, 3, 8]]
        out["temps"] = f["meta/temps"][:]
        out["fill"] = f["meta/temps"].fillvalue
        out["loose"] = f["loose"][()]
        buf = np.zeros((4, 5), np.float32)
        f["meta/temps"].read_direct(buf, np.s_[1:5], np.s_[0:4])
        out["direct"] = buf
        out["rows"] = [row.sum() for row in f["meta/temps"]]
        out["f64"] = f["train/labels"].astype("f8")[:3]
        names = []
        f.visititems(lambda name, obj: names.append(
            (name, "group" if isinstance(obj, h5.Group) else "dataset")))
        out["visit"] = names
        out["contains"] = ("train/images" in f, "nope" in f)
    return out


def test_h5py_script_gives_identical_arrays(store_url, tmp_path):
    url, options = store_url
    want = h5py_script(h5py, str(tmp_path / "ref.h5"))

    class Facade:
        Group = tessera.h5.Group

        @staticmethod
        def File(where, mode):
            return tessera.h5.File(where, mode, storage_options=options)

    got = h5py_script(Facade, f"{url.rstrip('/')}/file.h5")
    assert got.keys() == want.keys()
    for key in want:
        if key == "chunks":
            assert got[key] == want[key]
            continue
        np.testing.assert_equal(got[key], want[key], err_msg=key)
        if isinstance(want[key], np.ndarray):
            assert got[key].dtype == want[key].dtype, key


def test_modes(tmp_path):
    uri = (tmp_path / "f").as_uri()
    with pytest.raises(FileNotFoundError, match=r"no tessera\.h5 file"):
        tessera.h5.File(uri, "r")
    with tessera.h5.File(uri, "a") as f:
        f["x"] = np.arange(3)
    with pytest.raises(FileExistsError, match="already holds a file"):
        tessera.h5.File(uri, "w-")
    with tessera.h5.File(uri, "r+") as f:
        f["x"][0] = 10
    f = tessera.h5.File(uri, "r")
    assert f["x"][:].tolist() == [10, 1, 2]
    with pytest.raises(tessera.ReadOnlyError):
        f["x"][0] = 1
    with pytest.raises(tessera.ReadOnlyError):
        f.attrs["a"] = 1
    with pytest.raises(ValueError, match="no write intent"):  # h5py's class
        f.create_group("g")
    with pytest.raises(KeyError, match="no write intent"):
        del f["x"]
    f.close()
    with pytest.raises(ValueError, match="closed"):
        f["x"]
    with tessera.h5.File(uri, "w") as f:  # truncates
        assert list(f.keys()) == []
    with pytest.raises(ValueError, match="Invalid mode"):
        tessera.h5.File(uri, "rw")
    other = tessera.open_store((tmp_path / "other").as_uri())
    other.put("keep.txt", b"precious")
    with pytest.raises(FileExistsError, match="nothing was deleted"):
        tessera.h5.File((tmp_path / "other").as_uri(), "w")
    assert bytes(other.get("keep.txt")) == b"precious"


def test_groups_and_deletion(tmp_path):
    with tessera.h5.File((tmp_path / "f").as_uri(), "w") as f:
        f.create_group("a/b/c")
        assert sorted(f.keys()) == ["a"] and f["a/b"].name == "/a/b"
        assert f["a"]["b/c"].parent.name == "/a/b"
        with pytest.raises(ValueError, match="already exists"):
            f.create_group("a/b")
        assert f.require_group("a/b").name == "/a/b"
        d = f.require_dataset("a/d", (4,), "i4")
        assert f.require_dataset("a/d", (4,), "i4") .name == d.name
        with pytest.raises(TypeError, match="Shapes do not match"):
            f.require_dataset("a/d", (5,), "i4")
        del f["a/b"]
        assert "a/b" not in f and "a/d" in f
        with pytest.raises(KeyError, match="doesn't exist"):
            f["a/b"]
        with pytest.raises(ValueError, match="reserved"):
            f.create_group("__x")


def test_resizable_datasets_as_h5py(tmp_path):
    """h5py's documented resize example: a dataset created with maxshape grows and shrinks."""
    with tessera.h5.File((tmp_path / "f").as_uri(), "w") as f:
        dset = f.create_dataset("unlimited", (10, 10), "i4", maxshape=(None, 10), chunks=(4, 4))
        assert dset.maxshape == (None, 10)
        dset[:] = np.arange(100).reshape(10, 10)
        dset.resize((20, 10))
        assert dset.shape == (20, 10) and dset[15].tolist() == [0] * 10
        dset.resize(5, axis=0)
        assert dset[...].tolist() == np.arange(50).reshape(5, 10).tolist()
        with pytest.raises(ValueError, match="exceed the maxshape"):
            dset.resize((5, 11))
        empty = f.create_dataset("rows", (0, 3), "f4", maxshape=(None, 3), chunks=(8, 3))
        assert empty.shape == (0, 3) and len(empty) == 0
        empty.array.append(np.ones((2, 3), np.float32))
        assert empty[:].tolist() == [[1.0] * 3] * 2


def test_unsupported_features_say_so(tmp_path):
    with tessera.h5.File((tmp_path / "f").as_uri(), "w") as f:
        d = f.create_dataset("x", data=np.arange(4))
        with pytest.raises(TypeError, match="maxshape"):  # resizable datasets need maxshape
            d.resize((8,))
        with pytest.raises(NotImplementedError, match="lzf"):
            f.create_dataset("z", (4,), "i4", compression="lzf")
        assert f.create_dataset("s", data=5)[()] == 5  # scalar datasets, as h5py's
        with pytest.raises(NotImplementedError, match="dtype"):
            f.create_dataset("t", data=np.array(["a", "b"]))
        with pytest.raises(NotImplementedError, match="shuffle"):
            f.create_dataset("u", (4,), "i4", shuffle=True)
        with pytest.raises(NotImplementedError, match="attribute"):
            f.attrs["c"] = {"a": 1}
        with pytest.raises(AttributeError):
            d.no_such_thing  # noqa: B018


def test_dataset_refresh_lists_the_fragments_again(tmp_path, monkeypatch):
    """As h5py's SWMR readers call ``refresh()`` to see another process's writes."""
    monkeypatch.setenv("TESSERA_READ_REFRESH_S", "inf")  # list once unless refreshed
    uri = (tmp_path / "f").as_uri()
    with tessera.h5.File(uri, "w") as f:
        f.create_dataset("x", data=np.arange(4))
    with tessera.h5.File(uri, "r") as f:
        d = f["x"]
        d[:]
        with tessera.collect_stats() as stats:
            d[:]
        assert "list" not in stats.by_method
        d.refresh()
        with tessera.collect_stats() as stats:
            assert d[:].tolist() == [0, 1, 2, 3]
        assert stats.by_method["list"].requests == 1
