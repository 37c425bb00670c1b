"""Commits stay committed: a consolidation never hides a write it did not see, however slow
that write's requests were. The races are made deterministic by holding chosen requests
(:func:`tessera.testing.pausing.pause_requests`), not by timing."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tessera
from tessera.testing.pausing import pause_requests


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
