"""Atomic visibility: killed writers leave nothing visible; concurrent writers lose nothing."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tessera

WRITER = str(Path(__file__).with_name("writer_process.py"))
SCHEMA = tessera.ArraySchema(
    [tessera.Dim("row", (0, 63), 8), tessera.Dim("col", (0, 255), 64)],
    [tessera.Attr("v", "int64", fill=-1, codec="zstd")])


def _options_args(options: dict) -> list[str]:
    return [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in options.items()]


def _committed(stdout: str) -> dict[str, int]:
    out = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "committed":
            out[parts[2]] = int(parts[1])
    return out


def _fragment_value(uri: str, options: dict, info: tessera.FragmentInfo) -> int:
    """The value a fragment holds, read through a snapshot at its timestamp; its row must be
    uniform (a partial fragment could not be)."""
    (r0, _), _ = info.nonempty_domain
    row = tessera.open_array(uri, at=info.timestamp, storage_options=options)[r0]
    assert len(set(row.tolist())) == 1, f"fragment {info.name} is partial: {row[:5]}"
    return int(row[0])


def _check_visible(uri: str, options: dict, printed: dict[str, int], deep: int) -> None:
    arr = tessera.open_array(uri, storage_options=options)
    infos = arr.fragments
    visible = {f.name for f in infos}
    assert set(printed) <= visible  # every fragment the writer saw committed is visible
    assert len(visible - set(printed)) <= 1  # plus at most the one committed at the kill
    for info in infos[-deep:]:  # the newest are the ones a kill could have torn
        value = _fragment_value(uri, options, info)
        if info.name in printed:
            assert value == printed[info.name]
    arr[:, :]  # every visible tile that a full read needs decodes and passes its checksum


def _wait_for_commit(proc: subprocess.Popen[str]) -> str:
    """The writer's next ``committed`` line (blocks until it prints one)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("committed"):
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"the writer stopped before committing: {line!r} {err[-2000:]}")
    return line


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_killed_writers_leave_no_partial_fragment(backend, tmp_path, s3_server) -> None:
    rng = random.Random(1234)
    trials = 20 if backend == "file" else 6
    for trial in range(trials):
        if backend == "file":
            uri, options = (tmp_path / f"crash{trial}").as_uri(), {}
        else:
            uri, options = s3_server.unique_url("crash"), dict(s3_server.storage_options())
        tessera.create_array(uri, SCHEMA, storage_options=options)
        proc = subprocess.Popen(
            [sys.executable, WRITER, uri, "1", "100000", *_options_args(options)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # A random moment in the middle of its writes: after a random number of commits (so
        # the kill lands mid-run however fast the machine is), then a random fraction of one
        # more write.
        seen = [_wait_for_commit(proc) for _ in range(rng.randint(1, 4))]
        time.sleep(rng.uniform(0.0, 0.03))
        proc.kill()
        stdout, _ = proc.communicate()
        assert proc.returncode == -signal.SIGKILL  # still writing when killed
        printed = _committed("".join(seen) + stdout)
        _check_visible(uri, options, printed, deep=3)


def test_concurrent_writers_lose_nothing(tmp_path) -> None:
    uri = (tmp_path / "concurrent").as_uri()
    tessera.create_array(uri, SCHEMA)
    procs = [subprocess.Popen([sys.executable, "-X", "faulthandler", WRITER, uri, str(w), "50"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(4)]
    reader = tessera.open_array(uri)
    seen_counts = []
    while any(p.poll() is None for p in procs):
        seen_counts.append(len(reader.fragments))
        reader[:, :8]  # reads go on while the writers commit
        time.sleep(0.05)
    printed: dict[str, int] = {}
    for p in procs:
        out, err = p.communicate()
        # Writers must also exit cleanly: an abort at interpreter exit (obstore's I/O
        # threads racing finalisation, see tessera._sync) once showed up here.
        assert p.returncode == 0, err[-4000:]
        printed.update(_committed(out))
    assert len(printed) == 200
    infos = tessera.open_array(uri).fragments
    assert {f.name for f in infos} == set(printed)
    for info in infos[::7]:
        assert _fragment_value(uri, {}, info) == printed[info.name]
    assert seen_counts == sorted(seen_counts)  # the fragment count only ever grows
    final = tessera.open_array(uri)[:, 0]
    # Each row's final value comes from the newest fragment that wrote it.
    by_row: dict[int, tuple[int, int]] = {}
    for info in final_infos(uri):
        (r0, _), _ = info.nonempty_domain
        by_row[r0] = (info.timestamp, printed[info.name])
    expected = np.full(64, -1)
    for row, (_, value) in by_row.items():
        expected[row] = value
    np.testing.assert_array_equal(final, expected)


def final_infos(uri: str) -> list[tessera.FragmentInfo]:
    return sorted(tessera.open_array(uri).fragments, key=lambda f: f.timestamp)
