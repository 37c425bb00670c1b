"""``tessera ls`` and ``tessera history`` as scripts see them: the installed executable run
as a subprocess at 80 columns with its output piped (whole values, JSON lines)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tessera
import tessera.h5

EXE = shutil.which("tessera", path=str(Path(sys.executable).parent)) or "tessera"
COMMIT_FIELDS = {"when", "marker", "operation", "added", "removed", "unit", "nbytes"}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "TESSERA_DEBUG": "0"}
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120,
                          env=env)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli-data")
    arr = tessera.from_numpy((root / "frames").as_uri(), np.zeros((4, 4), np.int16))
    arr[0:2, 0:2] = np.ones((2, 2), np.int16)
    table = tessera.create_table((root / "tensors").as_uri())
    table.write("weights", np.ones(3))
    tessera.create_images((root / "photos").as_uri(), size=(32, 32)).append(
        np.zeros((2, 32, 32, 3), np.uint8))
    long = root / "notes" / ("a-rather-long-name-" * 6 + ".txt")
    long.parent.mkdir()
    long.write_text("x")
    return root


def test_ls_piped_at_80_columns_keeps_whole_keys_and_names_each_kind(folder) -> None:
    done = _run("ls", folder.as_uri())
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()
             if line.strip() and not line.startswith("key")}
    assert lines["frames/"] == ["array"] and lines["tensors/"] == ["tensor", "table"]
    assert lines["photos/"] == ["image", "set"] and lines["notes/"] == []
    deep = _run("ls", (folder / "notes").as_uri())
    assert "a-rather-long-name-" * 6 + ".txt" in deep.stdout


def test_ls_json_lines(folder) -> None:
    done = _run("ls", folder.as_uri(), "--json")
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert {r["key"]: r["kind"] for r in rows} == {
        "frames/": "array", "notes/": None, "photos/": "image set", "tensors/": "tensor table"}
    objects = [json.loads(line) for line in _run("ls", (folder / "frames").as_uri(), "-r",
                                                  "--json").stdout.splitlines()]
    assert objects and all(set(o) == {"key", "size", "modified"} for o in objects)


def test_ls_of_nothing_is_an_error(folder) -> None:
    done = _run("ls", (folder / "missing").as_uri())
    assert done.returncode == 1 and done.stderr.startswith("error: nothing at")


@pytest.mark.parametrize(("name", "unit", "count"), [("frames", "fragments", 2),
                                                     ("tensors", "files", 2),
                                                     ("photos", "images", 1)])
def test_history_of_each_kind(folder, name, unit, count) -> None:
    url = (folder / name).as_uri()
    done = _run("history", url, "--json")
    assert done.returncode == 0, done.stderr
    commits = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(commits) == count and all(set(c) == COMMIT_FIELDS for c in commits)
    assert {c["unit"] for c in commits} == {unit}
    assert commits == tessera.open(url).history().to_dicts()
    table = _run("history", url)
    assert table.returncode == 0 and f"{count} commit" in table.stdout
    first = _run("history", url, "--at", commits[0]["when"], "--json")
    assert [json.loads(line) for line in first.stdout.splitlines()] == commits[:1]


def test_history_refuses_what_has_none(folder) -> None:
    h5_url = (folder / "file").as_uri()
    with tessera.h5.File(h5_url, "w") as f:
        f["d"] = np.arange(3)
    done = _run("history", h5_url)
    assert done.returncode == 1 and "no history of its own" in done.stderr
    bad = _run("history", (folder / "frames").as_uri(), "--at", "soon")
    assert bad.returncode == 1 and "--at='soon'" in bad.stderr
