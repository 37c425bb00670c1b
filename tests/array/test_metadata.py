"""Array metadata (``arr.metadata``): a mapping of JSON values with time travel, concurrent
writers that never lose each other's keys, consolidation and vacuum, and the importers and
the h5 facade carrying attributes through it."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

import tessera
from tessera.errors import (
    HistoryVacuumedError,
    InvalidTypeError,
    NameNotFoundError,
    ReadOnlyError,
)

WRITER = """
import sys, tessera
uri, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
options = dict(kv.split("=", 1) for kv in sys.argv[4:])
options = {k: (v == "true") if v in ("true", "false") else v for k, v in options.items()}
arr = tessera.open_array(uri, mode="w", storage_options=options)
for i in range(n):
    arr.metadata[f"{who}-{i}"] = {"writer": who, "i": i}
    arr.metadata["shared"] = who
print("done", who)
"""


def _array(url: str, options: dict | None = None) -> tessera.Array:
    return tessera.from_numpy(url, np.zeros((4, 4), np.int32), tile=(2, 2),
                              storage_options=options or {})


def test_a_mapping_of_json_values() -> None:
    arr = _array("memory://meta-basic")
    assert dict(arr.metadata) == {} and len(arr.metadata) == 0
    arr.metadata["units"] = "m/s"
    arr.metadata.update({"scale": 0.5, "labels": ("a", "b")}, nested={"k": [1, None, True]})
    assert dict(arr.metadata) == {"labels": ["a", "b"], "nested": {"k": [1, None, True]},
                                  "scale": 0.5, "units": "m/s"}
    assert "units" in arr.metadata and arr.metadata.get("missing", 7) == 7
    del arr.metadata["units"]
    assert "units" not in arr.metadata and len(arr.metadata) == 3
    arr.metadata["units"] = "km"  # a deleted key can come back
    assert arr.metadata["units"] == "km"
    fresh = tessera.open_array("memory://meta-basic")
    assert fresh.metadata.to_dict() == arr.metadata.to_dict()
    objects = arr.store.list("__meta/")
    assert len(objects) == 4  # one object per assignment, update and deletion


def test_bad_metadata_gets_clear_errors() -> None:
    arr = _array("memory://meta-bad")
    with pytest.raises(NameNotFoundError, match="no metadata key 'nope'") as err:
        arr.metadata["nope"]
    assert isinstance(err.value, KeyError)
    with pytest.raises(NameNotFoundError):
        del arr.metadata["nope"]
    with pytest.raises(InvalidTypeError, match=r"'x' is not JSON.*\.tolist\(\)"):
        arr.metadata["x"] = np.float32(1.5)
    with pytest.raises(InvalidTypeError, match="'nan' is not JSON"):
        arr.metadata["nan"] = float("nan")
    with pytest.raises(InvalidTypeError, match="keys are strings"):
        arr.metadata[3] = "three"  # type: ignore[index]
    reader = tessera.open_array("memory://meta-bad")
    with pytest.raises(ReadOnlyError, match="mode='w'"):
        reader.metadata["k"] = 1
    assert dict(arr.metadata) == {}  # nothing was written


def test_time_travel_sees_the_metadata_of_its_time() -> None:
    arr = _array("memory://meta-travel")
    arr.metadata["version"] = 1
    arr.metadata["gone-later"] = True
    t1 = time.time_ns()
    arr.metadata["version"] = 2
    del arr.metadata["gone-later"]
    t2 = time.time_ns()
    arr.metadata["added"] = "late"
    at = {t: tessera.open_array("memory://meta-travel", at=t).metadata.to_dict()
          for t in (t1, t2)}
    assert at[t1] == {"version": 1, "gone-later": True}
    assert at[t2] == {"version": 2}
    assert arr.metadata.to_dict() == {"version": 2, "added": "late"}
    with pytest.raises(ReadOnlyError, match="past timestamp"):
        tessera.open_array("memory://meta-travel", mode="w", at=t1).metadata["x"] = 1


def test_consolidation_keeps_the_newest_and_vacuum_ends_old_time_travel() -> None:
    arr = _array("memory://meta-consolidate")
    for v in range(5):
        arr.metadata["v"] = v
    arr.metadata["other"] = "x"
    del arr.metadata["other"]
    t_before = time.time_ns()
    arr.metadata["w"] = "last"
    middle = tessera.open_array("memory://meta-consolidate", at=t_before)
    assert middle.metadata.to_dict() == {"v": 4}
    arr.consolidate()  # fragments and metadata
    objects = arr.store.list("__meta/")
    assert len(objects) == 9  # eight changes and the consolidated object
    fresh = tessera.open_array("memory://meta-consolidate")
    with tessera.collect_stats() as stats:
        assert fresh.metadata.to_dict() == {"v": 4, "w": "last"}
    assert stats.by_method["get"].requests == 1  # only the consolidated object is read
    # before vacuum, time travel into the consolidated span still works
    assert tessera.open_array("memory://meta-consolidate",
                              at=t_before).metadata.to_dict() == {"v": 4}
    assert arr.vacuum() >= 8
    assert len(arr.store.list("__meta/")) == 1
    assert arr.metadata.to_dict() == {"v": 4, "w": "last"}
    with pytest.raises(HistoryVacuumedError, match="consolidated and vacuumed"):
        tessera.open_array("memory://meta-consolidate", at=t_before).metadata.to_dict()
    # a consolidated object is consolidated again with the changes after it
    arr.metadata["v"] = 5
    arr.consolidate()
    assert tessera.open_array("memory://meta-consolidate").metadata.to_dict() == {
        "v": 5, "w": "last"}


def _concurrent(uri: str, options: dict) -> None:
    args = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in options.items()]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, uri, f"w{w}", "10", *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    meta = tessera.open_array(uri, storage_options=options).metadata.to_dict()
    for w in range(4):
        for i in range(10):
            assert meta[f"w{w}-{i}"] == {"writer": f"w{w}", "i": i}
    assert meta["shared"] in {"w0", "w1", "w2", "w3"}  # the last writer of that key
    assert len(meta) == 41


def test_four_concurrent_writers_lose_no_key_folder(tmp_path) -> None:
    uri = (tmp_path / "meta-concurrent").as_uri()
    _array(uri)
    _concurrent(uri, {})


def test_four_concurrent_writers_lose_no_key_s3(s3_server) -> None:
    uri = s3_server.unique_url("meta-concurrent")
    _array(uri, s3_server.storage_options())
    _concurrent(uri, s3_server.storage_options())


def test_the_h5_facade_keeps_dataset_attributes_in_the_metadata(tmp_path) -> None:
    import tessera.h5 as h5

    uri = (tmp_path / "f").as_uri()
    with h5.File(uri, "w") as f:
        d = f.create_dataset("x", data=np.arange(6).reshape(2, 3))
        d.attrs["units"] = "m"
        d.attrs["scale"] = np.float32(0.25)
        d.attrs["ticks"] = np.array([1, 2, 3], dtype=np.int16)
        d.array.metadata["plain"] = [1, 2]
    arr = tessera.open_array(f"{uri}/x")
    meta = arr.metadata.to_dict()
    assert meta["units"] == "m" and meta["plain"] == [1, 2]
    assert meta["scale"] == {"dtype": "<f4", "shape": [], "data": [0.25]}
    with h5.File(uri, "r") as f:
        attrs = f["x"].attrs
        assert attrs["units"] == "m" and attrs["plain"] == [1, 2]
        assert attrs["scale"].dtype == np.float32 and attrs["ticks"].dtype == np.int16
        assert sorted(attrs) == ["plain", "scale", "ticks", "units"]


def test_importers_carry_hdf5_and_zarr_attributes(tmp_path) -> None:
    h5py = pytest.importorskip("h5py")
    zarr = pytest.importorskip("zarr")
    from tessera.importers import import_hdf5, import_zarr

    src = tmp_path / "src.h5"
    with h5py.File(src, "w") as f:
        d = f.create_dataset("temps", data=np.arange(12.0).reshape(3, 4))
        d.attrs["units"] = "K"
        d.attrs["offset"] = np.int32(-3)
    import_hdf5(src, (tmp_path / "h5out").as_uri())
    meta = tessera.open_array((tmp_path / "h5out").as_uri() + "/temps").metadata.to_dict()
    assert meta["units"] == "K" and meta["offset"]["data"] == [-3]

    group = zarr.open_group(str(tmp_path / "src.zarr"), mode="w")
    z = group.create_array("labels", shape=(4,), dtype="i4")
    z[:] = [1, 2, 3, 4]
    z.attrs["classes"] = ["cat", "dog"]
    import_zarr(tmp_path / "src.zarr", (tmp_path / "zout").as_uri())
    meta = tessera.open_array((tmp_path / "zout").as_uri() + "/labels").metadata.to_dict()
    assert meta["classes"] == {"strs": ["cat", "dog"], "shape": [2]}


def test_dataset_attributes_of_the_earlier_layout_still_read(tmp_path) -> None:
    """Attributes an earlier tessera.h5 kept in a dataset's __attrs.json read as before and
    move to the metadata when changed."""
    import json

    import tessera.h5 as h5

    uri = (tmp_path / "f").as_uri()
    with h5.File(uri, "w") as f:
        d = f.create_dataset("x", data=np.arange(3))
        d.array.store.put("__attrs.json", json.dumps({"old": {"str": "kept"}}).encode())
        assert d.attrs["old"] == "kept" and sorted(d.attrs) == ["old"]
        d.attrs["old"] = "moved"
        assert d.array.metadata["old"] == "moved" and d.attrs["old"] == "moved"
        del d.attrs["old"]
        assert "old" not in d.attrs
