"""Model test of concurrency: random interleavings of writers, consolidators and vacuums,
with and without slow requests, on memory, folder and S3 stores. After each run every write
that returned is visible with its values, no write that raised is, and the array reads
without error (then again after one more consolidation and vacuum).

Interleavings are made deterministic by holding a chosen request of an operation at a gate
(:func:`tessera.testing.pausing.pause_requests`) and letting it go at a chosen step: the
bookkeeping PUT, the commit marker PUT, the writer's look for a vacuum's doom mark, or a
vacuum's second look at the markers. No sleeps decide anything.

What "visible" means between writes that overlap in time is what a linearizable store
allows: the value read at a cell comes from one of the returned writes covering it, and no
returned write covering it *started after that one returned*.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
from tessera.errors import CommitConflictError
from tessera.testing.pausing import Gate, after_doom_mark, pause_requests

N, TILE = 40, 5
HOLDS: dict[str, Callable[[str, str], bool]] = {
    "meta": lambda kind, key: kind == "put" and key.endswith("/__meta.json"),
    "marker": lambda kind, key: kind == "put" and key.startswith("__commits/"),
    "check": lambda kind, key: kind == "head" and key.startswith("__doomed/"),
}


@dataclasses.dataclass
class Op:
    kind: str
    value: int = 0
    lo: int = 0
    hi: int = 0
    start: int = 0
    end: int | None = None
    error: BaseException | None = None
    thread: threading.Thread | None = None
    gate: Gate | None = None


@st.composite
def programs(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    steps = []
    for _ in range(draw(st.integers(2, 12))):
        what = draw(st.sampled_from(["write", "write", "write", "consolidate", "subset",
                                     "vacuum", "release"]))
        hold = draw(st.sampled_from([None, None, "meta", "marker", "check"]))
        if what == "write":
            lo = draw(st.integers(0, N - 1))
            steps.append(("write", lo, draw(st.integers(lo, min(N - 1, lo + 12))), hold))
        elif what == "consolidate":
            steps.append(("consolidate", hold))
        elif what == "subset":
            steps.append(("subset", draw(st.integers(0, 2**16)), hold))
        elif what == "vacuum":
            steps.append(("vacuum", draw(st.booleans())))  # True: its second look held
        else:
            steps.append(("release", draw(st.integers(0, 20))))
    return steps


class Run:
    """One program on one array; ``clock`` orders starts and ends of operations."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self.url, self.options = url, options
        schema = tessera.ArraySchema([tessera.Dim("x", (0, N - 1), TILE)],
                                     [tessera.Attr("v", "i4", fill=0)])
        tessera.create_array(url, schema, storage_options=options)
        self.clock = itertools.count(1)
        self.lock = threading.Lock()
        self.ops: list[Op] = []
        self.held: list[Op] = []

    def tick(self) -> int:
        with self.lock:
            return next(self.clock)

    def handle(self) -> tessera.Array:
        return tessera.open_array(self.url, "w", storage_options=self.options)

    def launch(self, op: Op, fn: Callable[[tessera.Array], Any], arr: tessera.Array,
               hold: Callable[[str, str], bool] | None) -> None:
        """Run ``fn(arr)``; with ``hold``, on a thread whose matching request waits at a gate
        until a later step releases it (or the operation ends without making it)."""
        self.ops.append(op)

        def run() -> None:
            try:
                fn(arr)
            except CommitConflictError as err:
                op.error = err
            except BaseException as err:  # reported by check()
                op.error = err
            op.end = self.tick()

        op.start = self.tick()
        if hold is None:
            run()
            return
        op.gate = pause_requests(arr._store.aio, hold)
        op.thread = threading.Thread(target=run)
        op.thread.start()
        while not op.gate.reached.wait(0.01):
            if not op.thread.is_alive():
                break
        if op.thread.is_alive():
            self.held.append(op)

    def release(self, k: int) -> None:
        if self.held:
            op = self.held.pop(k % len(self.held))
            assert op.gate is not None and op.thread is not None
            op.gate.release()
            op.thread.join(60)
            assert not op.thread.is_alive(), f"{op.kind} did not finish once released"

    def step(self, i: int, step: tuple[Any, ...]) -> None:
        kind = step[0]
        if kind == "write":
            _, lo, hi, hold = step
            op = Op("write", value=i + 1, lo=lo, hi=hi)
            self.launch(op, lambda a: a.write(np.full(hi - lo + 1, op.value, np.int32),
                                              origin=(lo,)),
                        self.handle(), HOLDS.get(hold or ""))
        elif kind == "consolidate":
            self.launch(Op("consolidate"), lambda a: a.consolidate(), self.handle(),
                        HOLDS.get(step[1] or ""))
        elif kind == "subset":
            _, seed, hold = step
            arr = self.handle()
            names = [f.name for f in arr.fragments]
            rng = np.random.default_rng(seed)
            chosen = [n for n in names if rng.random() < 0.5] or names[:1]
            self.launch(Op("consolidate"), lambda a: a.consolidate(chosen), arr,
                        HOLDS.get(hold or ""))
        elif kind == "vacuum":
            arr = self.handle()
            self.launch(Op("vacuum"), lambda a: a.vacuum(orphan_grace_s=0, force=True), arr,
                        after_doom_mark() if step[1] else None)
        else:
            self.release(step[1])

    def finish(self) -> None:
        while self.held:
            self.release(0)

    def check(self) -> np.ndarray:
        for op in self.ops:
            if op.error is not None and not isinstance(op.error, CommitConflictError):
                raise AssertionError(f"{op.kind} raised {op.error!r}") from op.error
        got = tessera.open_array(self.url, storage_options=self.options)[:]
        writes = [op for op in self.ops if op.kind == "write"]
        for c in range(N):
            covering = [w for w in writes if w.lo <= c <= w.hi and w.error is None]
            failed = {w.value for w in writes if w.lo <= c <= w.hi and w.error is not None}
            v = int(got[c])
            assert v not in failed, f"cell {c}: {v} is the value of a write that raised"
            if not covering:
                assert v == 0, f"cell {c}: {v}, but no write that returned covers it"
                continue
            source = next((w for w in covering if w.value == v), None)
            assert source is not None, (
                f"cell {c} reads {v}; the writes that returned there wrote "
                f"{[w.value for w in covering]}: a write that returned is hidden")
            later = [w.value for w in covering if w.start > (source.end or 0)]
            assert not later, (f"cell {c} reads {v}, but writes {later} started after it "
                               "returned: they are hidden")
        return got


def _check(url: str, options: dict[str, Any], program: list[tuple[Any, ...]]) -> None:
    run = Run(url, options)
    try:
        for i, step in enumerate(program):
            run.step(i, step)
    finally:
        run.finish()
    got = run.check()
    final = tessera.open_array(url, "w", storage_options=options)
    final.consolidate()
    final.vacuum(orphan_grace_s=0, force=True)
    np.testing.assert_array_equal(tessera.open_array(url, storage_options=options)[:], got)


PROFILE = settings(max_examples=60, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow,
                                          HealthCheck.function_scoped_fixture])


@PROFILE
@given(program=programs())
def test_commits_stay_committed_memory(program) -> None:
    _check(f"memory://concurrency-{uuid.uuid4().hex[:12]}", {}, program)


@settings(PROFILE, max_examples=25)
@given(program=programs())
def test_commits_stay_committed_folder(tmp_path_factory, program) -> None:
    _check(tmp_path_factory.mktemp("concurrency").as_uri(), {}, program)


@settings(PROFILE, max_examples=10)
@given(program=programs())
def test_commits_stay_committed_s3(s3_server, program) -> None:
    _check(s3_server.unique_url("concurrency"), s3_server.storage_options(), program)


def test_the_slow_commit_and_consolidation_program_of_the_bug(tmp_path) -> None:
    """The first bug the model found, as a fixed program: an older write, a slow write
    over it, a later write elsewhere and a consolidation, then the slow write returns."""
    _check(tmp_path.as_uri(), {}, [("write", 0, 9, None), ("write", 0, 9, "meta"),
                                   ("write", 20, 29, None), ("consolidate", None),
                                   ("release", 0)])


@pytest.mark.parametrize("hold", ["meta", "marker", "check"])
def test_a_vacuum_while_a_write_is_held(tmp_path, hold) -> None:
    _check(tmp_path.as_uri(), {}, [("write", 0, 9, None), ("write", 5, 14, hold),
                                   ("vacuum", False), ("release", 0), ("vacuum", True),
                                   ("consolidate", None)])
