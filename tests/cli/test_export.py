"""``tessera export npy|safetensors|images`` through the installed executable: the files
other tools read back equal what Tessera stores."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import tessera
from tessera.cli import exports

EXE = shutil.which("tessera", path=str(Path(sys.executable).parent)) or "tessera"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "TESSERA_DEBUG": "0"}
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


def test_export_npy_whole_and_a_slice(tmp_path: Path) -> None:
    values = np.arange(40 * 6, dtype=np.int32).reshape(40, 6)
    arr = tessera.from_numpy((tmp_path / "a").as_uri(), values, tile=(4, 6))
    arr[0:2, 0:2] = np.full((2, 2), -1, np.int32)
    first = arr.history()[0].when.isoformat()
    done = _run("export", "npy", "a", "a.npy", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert np.array_equal(np.load(tmp_path / "a.npy"), arr[...])
    again = _run("export", "npy", "a", "a.npy", cwd=tmp_path)
    assert again.returncode == 1 and "--force" in again.stderr
    part = _run("export", "npy", "a", "a.npy", "1:3, 4:", "--force", "--at", first,
                cwd=tmp_path)
    assert part.returncode == 0, part.stderr
    assert np.array_equal(np.load(tmp_path / "a.npy"), values[1:3, 4:])


def test_export_npy_reads_a_whole_array_slab_by_slab(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from tessera.cli.main import app

    values = np.random.default_rng(0).random((30, 5))
    arr = tessera.from_numpy((tmp_path / "a").as_uri(), values, tile=(4, 5))
    monkeypatch.setattr(exports, "SLAB_BYTES", 200)  # one tile (160 bytes) per slab
    reads: list[object] = []
    original = type(arr).read

    def counted(self, *args, **kwargs):
        reads.append(args[0] if args else None)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(arr), "read", counted)
    done = CliRunner().invoke(app, ["export", "npy", str(tmp_path / "a"),
                                    str(tmp_path / "a.npy"), "-q"])
    assert done.exit_code == 0, done.output
    assert np.array_equal(np.load(tmp_path / "a.npy"), values)
    assert len(reads) == 8  # 30 rows in slabs of 4


def test_export_safetensors_round_trips(tmp_path: Path) -> None:
    from safetensors.numpy import load_file

    table = tessera.create_table((tmp_path / "t").as_uri())
    table.write("run1/w", np.arange(6.0).reshape(2, 3))
    table.write("run1/b", np.ones(3, np.float32))
    table.write("other", np.zeros(2))
    done = _run("export", "safetensors", "t", "run1.safetensors", "--prefix", "run1/",
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    got = load_file(str(tmp_path / "run1.safetensors"))
    assert set(got) == {"w", "b"} and np.array_equal(got["w"], np.arange(6.0).reshape(2, 3))
    missing = _run("export", "safetensors", "t", "x.safetensors", "--prefix", "nope",
                   cwd=tmp_path)
    assert missing.returncode == 1 and "starts with 'nope'" in missing.stderr


def test_export_images_as_png_by_class(tmp_path: Path) -> None:
    cols = tessera.create_images((tmp_path / "s").as_uri(), size=(32, 32), fit="pad")
    cols.set_classes(["cat", "dog"])
    rng = np.random.default_rng(0)
    pictures = rng.integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    cols.append(pictures, labels=[0, 1, 1])
    cols.append([rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)], labels=[0])
    done = _run("export", "images", "s", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    files = sorted(p.relative_to(tmp_path / "out").as_posix()
                   for p in (tmp_path / "out").rglob("*.png"))
    # ids as the set gives them: an append starts a new group of 32
    assert files == ["cat/000000.png", "cat/000032.png", "dog/000001.png", "dog/000002.png"]
    small = np.asarray(Image.open(tmp_path / "out" / "cat" / "000032.png"))
    assert small.shape == (20, 24, 3)  # cut to its true size
    full = np.asarray(Image.open(tmp_path / "out" / "dog" / "000001.png"))
    assert np.array_equal(full, cols.read([1])[0])
    low = _run("export", "images", "s", "low", "-k", "1", "--first", "1", cwd=tmp_path)
    assert low.returncode == 0 and len(list((tmp_path / "low").rglob("*.png"))) == 1
    busy = _run("export", "images", "s", "out", cwd=tmp_path)
    assert busy.returncode == 1 and "not empty" in busy.stderr


@pytest.mark.parametrize("name", ["npy", "safetensors", "images"])
def test_export_help_has_examples(name: str) -> None:
    from tessera.cli.main import app  # noqa: F401 - the group is registered

    assert "Examples" in str(getattr(exports, name).__doc__)


def test_export_npy_of_a_sparse_array_writes_its_cells(tmp_path: Path) -> None:
    schema = tessera.ArraySchema([tessera.Dim("x", (0, 9), 5), tessera.Dim("y", (0, 9), 5)],
                                 [tessera.Attr("v", "f4")], sparse=True)
    arr = tessera.create_array((tmp_path / "sp").as_uri(), schema)
    arr.write_cells((np.array([1, 7]), np.array([2, 8])), np.array([5.0, 6.0], np.float32))
    done = _run("export", "npy", "sp", "cells.npy", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cells = np.load(tmp_path / "cells.npy")
    assert cells.dtype.names == ("d0", "d1", "v") and cells.tolist() == [(1, 2, 5.0),
                                                                        (7, 8, 6.0)]
    bad = _run("export", "npy", "nothing", "x.npy", cwd=tmp_path)
    assert bad.returncode == 1 and not (tmp_path / "x.npy").exists()
    assert not list(tmp_path.glob(".*.partial"))
