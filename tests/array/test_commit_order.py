"""Commits stay committed: a consolidation never hides a write it did not see, however slow
that write's requests were. The races are made deterministic by holding chosen requests
(:func:`tessera.testing.pausing.pause_requests`), not by timing."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tessera
from tessera.testing.pausing import after_doom_mark, pause_requests


def _schema(n: int = 100, tile: int = 10) -> tessera.ArraySchema:
    return tessera.ArraySchema([tessera.Dim("x", (0, n - 1), tile)],
                               [tessera.Attr("v", "i4", fill=0)])


def _slow_commit(arr: tessera.Array, values: np.ndarray, origin: tuple[int, ...],
                 key_part: str) -> tuple[threading.Thread, list[BaseException]]:
    """Start ``arr.write`` in a thread with its first put whose key holds ``key_part``
    held at a gate; returns the thread and a list that collects its exception."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            arr.write(values, origin=origin)
        except BaseException as exc:
            errors.append(exc)

    gate = pause_requests(arr._store.aio, lambda kind, key: kind == "put" and key_part in key)
    t = threading.Thread(target=run)
    t.start()
    assert gate.wait_reached()
    t.gate = gate  # type: ignore[attr-defined]
    return t, errors


@pytest.mark.parametrize("held", ["__meta.json", "__commits/"])
def test_consolidation_does_not_hide_a_slow_commit(tmp_path, held):
    url = (tmp_path / "a").as_uri()
    tessera.create_array(url, _schema())
    w = tessera.open_array(url, "w")
    d = tessera.open_array(url, "w")
    d.write(np.full(10, 7, np.int32), origin=(0,))        # an older value in W's box
    t, errors = _slow_commit(w, np.full(10, 111, np.int32), (0,), held)
    d.write(np.full(10, 222, np.int32), origin=(50,))     # a later commit ...
    d.consolidate()                                      # ... and a consolidation of both
    t.gate.release()                                      # type: ignore[attr-defined]
    t.join()
    assert not errors
    fresh = tessera.open_array(url)
    assert fresh[0:10].tolist() == [111] * 10, "a write that returned was hidden"
    assert fresh[50:60].tolist() == [222] * 10
    # ... and it stays visible after the next consolidation and a vacuum
    d.consolidate()
    d.vacuum(orphan_grace_s=3600)
    again = tessera.open_array(url)
    assert again[0:10].tolist() == [111] * 10
    assert again[50:60].tolist() == [222] * 10


def _in_thread(fn) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    return t, errors


def test_vacuum_cannot_eat_a_commit_in_flight(tmp_path):
    """vacuum(grace 0) removes the objects of a writer whose marker is still on its way:
    the writer finds out, takes its marker back and raises; the array stays readable."""
    url = (tmp_path / "a").as_uri()
    tessera.create_array(url, _schema())
    w = tessera.open_array(url, "w")
    m = tessera.open_array(url, "w")
    m.write(np.full(10, 7, np.int32), origin=(0,))
    gate = pause_requests(w._store.aio, lambda kind, key: kind == "put"
                          and key.startswith("__commits/"))
    t, errors = _in_thread(lambda: w.write(np.full(10, 111, np.int32), origin=(0,)))
    assert gate.wait_reached()
    assert m.vacuum(orphan_grace_s=0, force=True) > 0    # takes the writer for dead
    retract = pause_requests(w._store.aio, lambda kind, key: kind == "delete"
                             and key.startswith("__commits/"))
    gate.release()
    assert retract.wait_reached()           # the void marker is visible; readers skip it
    assert tessera.open_array(url)[0:10].tolist() == [7] * 10
    retract.release()
    t.join()
    assert len(errors) == 1 and isinstance(errors[0], tessera.errors.CommitConflictError)
    assert isinstance(errors[0], RuntimeError) and "orphan_grace_s" in str(errors[0])
    fresh = tessera.open_array(url)
    assert fresh[0:10].tolist() == [7] * 10            # the write did not happen, visibly
    assert len(fresh.fragments) == 1


def test_vacuum_spares_a_writer_that_committed_meanwhile(tmp_path):
    """The other interleaving: the marker lands between vacuum's doom mark and its second
    look at the markers; vacuum spares the fragment and the write returns."""
    url = (tmp_path / "a").as_uri()
    tessera.create_array(url, _schema())
    w = tessera.open_array(url, "w")
    m = tessera.open_array(url, "w")
    w_gate = pause_requests(w._store.aio, lambda kind, key: kind == "put"
                            and key.startswith("__commits/"))
    t, errors = _in_thread(lambda: w.write(np.full(10, 111, np.int32), origin=(0,)))
    assert w_gate.wait_reached()
    # vacuum marks the writer doomed, then waits before its second listing of markers
    relist = pause_requests(m._store.aio, after_doom_mark())
    v, v_errors = _in_thread(lambda: m.vacuum(orphan_grace_s=0, force=True))
    assert relist.wait_reached()                        # doomed, second look held
    w_gate.release()
    t.join()
    relist.release()
    v.join()
    assert not v_errors
    # the writer saw the doom mark (it was there when it looked) and took its commit back;
    # vacuum, looking after the marker came and went, finds no marker and removes the
    # objects: nothing broken, and the writer was told
    assert len(errors) == 1 and isinstance(errors[0], tessera.errors.CommitConflictError)
    fresh = tessera.open_array(url)
    assert fresh[0:10].tolist() == [0] * 10
    assert fresh.fragments == []


def test_vacuum_spares_a_marker_it_sees(tmp_path):
    """The third interleaving: the marker lands after vacuum's doom mark but before its
    second look, and the writer's check waits until vacuum is done: vacuum sees the marker,
    spares the fragment and takes its mark back; the write returns, intact."""
    url = (tmp_path / "a").as_uri()
    tessera.create_array(url, _schema())
    w = tessera.open_array(url, "w")
    m = tessera.open_array(url, "w")
    marker = pause_requests(w._store.aio, lambda kind, key: kind == "put"
                            and key.startswith("__commits/"))
    t, errors = _in_thread(lambda: w.write(np.full(10, 111, np.int32), origin=(0,)))
    assert marker.wait_reached()
    check = pause_requests(w._store.aio, lambda kind, key: kind == "head"
                           and key.startswith("__doomed/"))
    relist = pause_requests(m._store.aio, after_doom_mark())
    v, v_errors = _in_thread(lambda: m.vacuum(orphan_grace_s=0, force=True))
    assert relist.wait_reached()
    marker.release()
    assert check.wait_reached()                          # the marker is in; check held
    relist.release()
    v.join()
    assert not v_errors
    check.release()
    t.join()
    assert not errors
    assert tessera.open_array(url)[0:10].tolist() == [111] * 10
    assert not tessera.open_store(url).list("__doomed")  # the mark was taken back


def test_short_grace_is_refused_unless_forced(tmp_path):
    url = (tmp_path / "a").as_uri()
    arr = tessera.create_array(url, _schema())
    with pytest.raises(tessera.errors.InvalidArgumentError, match="force=True"):
        arr.vacuum(orphan_grace_s=1)
    with pytest.raises(ValueError, match="orphan_grace_s"):
        arr.vacuum(orphan_grace_s=float("nan"))
    assert arr.vacuum(orphan_grace_s=arr.min_orphan_grace_s()) == 0
    assert arr.vacuum(orphan_grace_s=0, force=True) == 0


def test_two_maintainers_leave_a_readable_array(tmp_path):
    """A consolidation in flight and another process's vacuum with grace 0: the
    consolidation's objects are taken for a dead writer's; it raises, nothing breaks."""
    url = (tmp_path / "a").as_uri()
    tessera.create_array(url, _schema())
    a = tessera.open_array(url, "w")
    b = tessera.open_array(url, "w")
    for i in range(4):
        a.write(np.full(10, i + 1, np.int32), origin=(10 * i,))
    gate = pause_requests(a._store.aio, lambda kind, key: kind == "put"
                          and key.startswith("__commits/"))
    t, errors = _in_thread(a.consolidate)
    assert gate.wait_reached()
    b.consolidate()
    b.vacuum(orphan_grace_s=0, force=True)
    gate.release()
    t.join()
    assert all(isinstance(e, tessera.errors.CommitConflictError) for e in errors)
    fresh = tessera.open_array(url)
    assert fresh[0:40].tolist() == np.repeat(np.arange(1, 5), 10).tolist()
