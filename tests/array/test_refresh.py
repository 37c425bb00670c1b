"""How handles see new commits: a handle reuses its list of fragments for ``refresh_s``
(1 s by default; 0: a listing of the commit markers at every read), sees the writes of every
handle of its own process at once, and lists again after ``refresh()``.

A commit made by another process is simulated by :func:`_elsewhere`, which hides a write from
this process's register of changes; one test writes from a real second process."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tessera
from tessera.array import writes as writes_mod
from tessera.errors import ConfigError

StoreLocation = tuple[str, dict[str, Any]]


def _lists(arr: tessera.Array) -> int:
    """LIST requests the handle's latest read made."""
    assert arr.last_read is not None
    stats = arr.last_read.stats.by_method.get("list")
    return 0 if stats is None else stats.requests


def _pair(store_url: StoreLocation, refresh_s: float | None,
          sparse: bool = False) -> tuple[tessera.Array, tessera.Array]:
    """A writer handle on a new 1-D array with one fragment, and a reader beside it."""
    url, options = store_url
    uri = f"{url.rstrip('/')}/r"
    schema = tessera.ArraySchema([tessera.Dim("i", (0, 7), 4)],
                                 [tessera.Attr("v", "<i4", fill=-1)], sparse=sparse)
    writer = tessera.create_array(uri, schema, storage_options=options)
    writer.write_cells((np.arange(8),), np.zeros(8, np.int32)) if sparse else \
        writer.write(np.zeros(8, np.int32))
    reader = tessera.open_array(uri, storage_options=options, refresh_s=refresh_s)
    return writer, reader


@contextlib.contextmanager
def _elsewhere() -> Iterator[None]:
    """Writes made inside look to this process's handles like another process's: the
    register of this process's changes is put back as it was."""
    before = dict(writes_mod.LOCAL_CHANGES)
    try:
        yield
    finally:
        writes_mod.LOCAL_CHANGES.clear()
        writes_mod.LOCAL_CHANGES.update(before)


def _values(arr: tessera.Array) -> list[int]:
    if arr.schema.sparse:
        return arr.read((slice(None),)).values["v"].tolist()
    return arr[:].tolist()


def test_by_default_a_handle_reuses_its_list_for_a_second(store_url) -> None:
    _, reader = _pair(store_url, None)
    assert reader.reads.refresh_s == 1.0
    t0 = time.monotonic()
    assert _values(reader) == [0] * 8
    assert _lists(reader) == 1
    _values(reader)
    if time.monotonic() - t0 >= 1.0:
        pytest.skip("the machine stalled past refresh_s between the two reads")
    assert _lists(reader) == 0


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_with_refresh_s_0_every_read_lists_and_sees_every_commit(store_url, sparse) -> None:
    writer, reader = _pair(store_url, 0, sparse)
    assert _values(reader) == [0] * 8
    _values(reader)
    assert _lists(reader) == 1
    with _elsewhere():
        writer.write_cells((np.array([3]),), np.array([5], np.int32))
    assert _values(reader)[3] == 5


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_a_handle_reuses_its_list_until_refreshed(store_url, sparse) -> None:
    writer, reader = _pair(store_url, float("inf"), sparse)
    assert _values(reader) == [0] * 8
    with _elsewhere():
        writer.write_cells((np.array([3]),), np.array([5], np.int32))
    assert _values(reader) == [0] * 8  # the list of fragments from the first read
    assert _lists(reader) == 0
    assert len(reader.fragments) == 1
    reader.refresh()
    assert _values(reader)[3] == 5
    assert _lists(reader) == 1
    assert len(reader.fragments) == 2


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_writes_of_any_handle_of_this_process_are_seen_at_once(store_url, sparse) -> None:
    writer, reader = _pair(store_url, float("inf"), sparse)
    assert _values(reader) == [0] * 8
    writer.write_cells((np.array([3]),), np.array([5], np.int32))
    assert _values(reader)[3] == 5
    assert _lists(reader) == 1
    assert _values(reader)[3] == 5
    assert _lists(reader) == 0
    writer.consolidate()
    assert [f.kind for f in reader.fragments] == ["consolidated"]
    writer.vacuum(orphan_grace_s=0, force=True)
    assert _values(reader)[3] == 5
    assert _lists(reader) == 1


def test_the_list_is_reused_for_refresh_s_seconds(store_url) -> None:
    writer, reader = _pair(store_url, 0.3)
    reader[:]
    with _elsewhere():
        writer.write_cells((np.array([1]),), np.array([9], np.int32))
    if reader[1] != 0:  # the machine stalled past refresh_s between the two reads
        pytest.skip("the first reads took longer than refresh_s")
    time.sleep(0.35)
    assert reader[1] == 9
    assert _lists(reader) == 1


def test_a_handle_sees_its_own_writes_at_once(store_url) -> None:
    _, options = store_url
    writer, _ = _pair(store_url, None)
    arr = tessera.open_array(writer.uri, mode="w", storage_options=options,
                             refresh_s=float("inf"))
    assert arr[:].tolist() == [0] * 8
    arr[2:4] = np.array([7, 8], np.int32)
    assert arr[:].tolist() == [0, 0, 7, 8, 0, 0, 0, 0]
    arr.write_cells((np.array([0]),), np.array([1], np.int32))
    assert arr[0] == 1
    arr.consolidate()
    assert [f.kind for f in arr.fragments] == ["consolidated"]


def test_points_and_unions_use_the_reused_list(store_url) -> None:
    writer, reader = _pair(store_url, float("inf"))
    reader[:]
    with _elsewhere():
        writer.write_cells((np.array([3]),), np.array([5], np.int32))
    assert reader.read(tessera.Points((np.array([3]),))).tolist() == [0]
    assert _lists(reader) == 0
    boxes = reader.read(tessera.Hyperslabs([(slice(0, 2),), (slice(3, 5),)]))
    assert [b.tolist() for b in boxes] == [[0, 0], [0, 0]]
    assert _lists(reader) == 0


def test_refresh_s_comes_from_the_environment_and_is_checked(monkeypatch, store_url) -> None:
    writer, _ = _pair(store_url, None)
    options = store_url[1]
    monkeypatch.setenv("TESSERA_READ_REFRESH_S", "12.5")
    assert tessera.open_array(writer.uri, storage_options=options).reads.refresh_s == 12.5
    assert tessera.open_array(writer.uri, storage_options=options,
                              refresh_s=0).reads.refresh_s == 0.0
    monkeypatch.setenv("TESSERA_READ_REFRESH_S", "soon")
    with pytest.raises(ConfigError, match="TESSERA_READ_REFRESH_S"):
        tessera.open_array(writer.uri, storage_options=options)
    monkeypatch.delenv("TESSERA_READ_REFRESH_S")
    for bad in (-1.0, float("nan"), "x"):
        with pytest.raises(ConfigError, match="refresh_s must be"):
            tessera.open_array(writer.uri, storage_options=options, refresh_s=bad)


WRITE_ONE_CELL = """
import sys, numpy as np, tessera
arr = tessera.open_array(sys.argv[1], mode="w")
arr.write_cells((np.array([int(sys.argv[2])]),), np.array([int(sys.argv[3])], np.int32))
"""


def test_a_commit_from_another_process_shows_once_the_list_is_old(tmp_path: Path) -> None:
    writer, reader = _pair((tmp_path.as_uri(), {}), 60.0)
    assert reader[:].tolist() == [0] * 8
    subprocess.run([sys.executable, "-c", WRITE_ONE_CELL, writer.uri, "6", "4"], check=True,
                   capture_output=True, timeout=120)
    assert reader[6] == 0  # within refresh_s: the list of the first read
    reader.reads = tessera.ReadConfig(refresh_s=0.0)  # now older than refresh_s
    assert reader[6] == 4
    writer.refresh()
    assert writer[6] == 4
