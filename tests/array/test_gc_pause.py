"""Reads over many tiles run with the cyclic garbage collector paused (tessera._gc), smaller
ones do not; the collector comes back as it was, after errors too, and nested or concurrent
pauses share one; a listing that finds the fragments it found before keeps its list (what a
read planned over it is then used, not planned again)."""

from __future__ import annotations

import gc
import threading
from typing import Any

import numpy as np
import pytest

import tessera
from tessera._gc import collector_paused
from tessera._sync import run_sync
from tessera.array.array import Array
from tessera.errors import ConfigError


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the collector was enabled at each read's planning on the calling thread."""
    states: list[bool] = []
    original = Array._read_now

    def spy(self: Array, *args: Any) -> Any:
        states.append(gc.isenabled())
        return original(self, *args)

    monkeypatch.setattr(Array, "_read_now", spy)
    return states


def test_a_read_over_many_tiles_pauses_the_collector(seen: list[bool]) -> None:
    arr = tessera.from_numpy("memory://gc-pause", np.arange(64 * 64).reshape(64, 64),
                             tile=(4, 4))  # 256 tiles
    arr.reads = tessera.ReadConfig(gc_pause_tiles=100)
    np.testing.assert_array_equal(arr[:, :], np.arange(64 * 64).reshape(64, 64))
    assert arr[0:8, 0:8].shape == (8, 8)  # 4 tiles
    assert seen == [False, True]
    assert gc.isenabled()
    arr.reads = tessera.ReadConfig(gc_pause_tiles=0)
    arr[:, :]
    assert seen[-1] is True


def test_explain_and_unions_pause_it_too(monkeypatch: pytest.MonkeyPatch) -> None:
    arr = tessera.from_numpy("memory://gc-pause-explain", np.zeros((64, 64)), tile=(4, 4))
    arr.reads = tessera.ReadConfig(gc_pause_tiles=100)
    states = []

    def spy(name: str) -> None:
        original = getattr(Array, name)

        def planning(self: Array, *args: Any, **kwargs: Any) -> Any:
            states.append((name, gc.isenabled()))
            return original(self, *args, **kwargs)

        monkeypatch.setattr(Array, name, planning)

    spy("_plan_needs")
    spy("_whole_read")  # (the whole array's 256 tiles are planned in columns)
    arr.explain()
    arr.explain((slice(0, 4), slice(0, 4)))
    arr.read(tessera.Hyperslabs([(slice(0, 64), slice(0, 32)), (slice(0, 8), 3)]))
    assert states == [("_whole_read", False), ("_whole_read", True), ("_plan_needs", True),
                      ("_plan_needs", False)]
    assert gc.isenabled()


def test_the_collector_comes_back_as_it_was() -> None:
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("a read failed")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # disabled by the user before: left so
    finally:
        gc.enable()
    with collector_paused(pause=False):
        assert gc.isenabled()


def test_nested_and_concurrent_pauses_share_one() -> None:
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    with collector_paused():
        thread.start()
        assert inside.wait(10)
        with collector_paused():
            assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's pause goes on
    leave.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_bad_setting_says_what_to_give() -> None:
    with pytest.raises(ConfigError, match="gc_pause_tiles must be a whole number"):
        tessera.ReadConfig(gc_pause_tiles=-1)
    with pytest.raises(ConfigError, match="TESSERA_READ_GC_PAUSE_TILES"):
        tessera.ReadConfig.from_env({"TESSERA_READ_GC_PAUSE_TILES": "many"})
    assert tessera.ReadConfig.from_env(
        {"TESSERA_READ_GC_PAUSE_TILES": "0"}).gc_pause_tiles == 0


def test_a_listing_of_the_same_fragments_keeps_its_list() -> None:
    arr = tessera.from_numpy("memory://gc-same-list", np.zeros((8, 8)), tile=(4, 4))
    first = run_sync(arr._visible_metas(cached_ok=False))
    again = run_sync(arr._visible_metas(cached_ok=False))
    assert again is first
    other = tessera.open_array("memory://gc-same-list", mode="w")
    other[0:2, 0:2] = np.ones((2, 2))
    changed = run_sync(arr._visible_metas(cached_ok=False))
    assert changed is not first and len(changed) == len(first) + 1
