"""The verbs for anything at a URL as scripts use them (the installed executable at 80
columns, piped): ``--json`` of ls / info / history / explain against the schemas in
docs/cli.md, ``rm`` and ``cp`` of every kind, ``cat``, image imports that fail or append,
the older command names."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

import tessera
import tessera.h5

EXE = shutil.which("tessera", path=str(Path(sys.executable).parent)) or "tessera"
DOC = Path(__file__).parents[2] / "docs" / "cli.md"
TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,), "null": (type(None),)}


def _run(*args: str, cwd: Path | None = None,
         stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "TESSERA_DEBUG": "0"}
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd, input=stdin)


def _schemas() -> dict[str, dict[str, tuple[type, ...]]]:
    """The field tables of docs/cli.md's "JSON:" sections: field -> accepted types."""
    found: dict[str, dict[str, tuple[type, ...]]] = {}
    for block in DOC.read_text().split("### JSON: ")[1:]:
        name = block.splitlines()[0].strip()
        fields = {}
        for row in re.findall(r"^\| (\w+) \| ([a-z ]+) \|", block, re.M):
            if row[0] != "field":
                fields[row[0]] = sum((TYPES[t] for t in row[1].split(" or ")), ())
        found[name] = fields
    return found


def _check(doc: dict[str, Any], schema: dict[str, tuple[type, ...]], *,
           some: bool = False) -> None:
    """``doc`` has the schema's fields (``some``: a subset, as ls rows), with their types."""
    assert set(doc) <= set(schema) if some else set(doc) == set(schema), (doc, schema)
    for key, value in doc.items():
        types = schema[key]
        assert isinstance(value, types) and not (isinstance(value, bool)
                                                 and bool not in types), (key, value)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli-verbs")
    arr = tessera.from_numpy((root / "frames").as_uri(), np.arange(16, dtype=np.int16)
                             .reshape(4, 4), tile=(2, 2))
    arr[0:2, 0:2] = np.ones((2, 2), np.int16)
    table = tessera.create_table((root / "tensors").as_uri())
    table.write("weights", np.arange(6.0).reshape(2, 3))
    tessera.create_images((root / "photos").as_uri(), size=(32, 32)).append(
        np.zeros((2, 32, 32, 3), np.uint8))
    with tessera.h5.File((root / "scans").as_uri(), "w") as f:
        f.create_dataset("a/scan", data=np.arange(6.0))
    return root


def test_the_documented_schemas_are_found() -> None:
    assert set(_schemas()) == {"ls", "history", "info of an array", "info of a tensor table",
                               "info of an image set", "info of a tessera.h5 file",
                               "array explain", "table ls"}


def test_json_output_matches_the_documented_schemas(folder: Path) -> None:
    schemas = _schemas()
    for line in _run("ls", str(folder), "--json").stdout.splitlines():
        _check(json.loads(line), schemas["ls"], some=True)
    objects = [json.loads(line) for line in _run("ls", str(folder / "frames"), "-r",
                                                 "--json").stdout.splitlines()]
    assert objects and all(set(o) == {"key", "size", "modified"} for o in objects)
    for name, kind in (("frames", "an array"), ("tensors", "a tensor table"),
                       ("photos", "an image set"), ("scans", "a tessera.h5 file")):
        done = _run("info", str(folder / name), "--json")
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        _check(doc, schemas[f"info of {kind}"])
    for name in ("frames", "tensors", "photos"):
        lines = _run("history", str(folder / name), "--json").stdout.splitlines()
        assert lines
        for line in lines:
            _check(json.loads(line), schemas["history"])
    plan = json.loads(_run("array", "explain", str(folder / "frames"), "0:2, :",
                           "--json").stdout)
    _check(plan, schemas["array explain"])
    assert plan["tiles"] == 2 and plan["bytes"] > 0
    row = json.loads(_run("table", "ls", str(folder / "tensors"), "--json").stdout)
    _check(row, schemas["table ls"])
    assert row == {"id": "weights", "layout": row["layout"], "shape": [2, 3],
                   "dtype": "float64", "nnz": 5}


def test_info_piped_at_80_columns_keeps_every_column(folder: Path) -> None:
    done = _run("info", str(folder / "frames"))
    arr = tessera.open_array((folder / "frames").as_uri())
    rows = [line.split() for line in done.stdout.splitlines()
            if line.split() and line.split()[0] in ("0", "1") and len(line.split()) > 5]
    assert len(rows) == 2
    for row, f in zip(rows, arr.fragments, strict=True):
        assert row[1] == f.name and row[4] == f.kind and str(f.cell_count) in row


def test_info_and_history_take_a_date(folder: Path) -> None:
    arr = tessera.open_array((folder / "frames").as_uri())
    first = arr.history()[0].when.isoformat()
    doc = json.loads(_run("info", str(folder / "frames"), "--at", first, "--json").stdout)
    assert len(doc["fragments"]) == 1
    lines = _run("history", str(folder / "frames"), "--at", first, "--json").stdout
    assert len(lines.splitlines()) == 1


def test_cat_writes_npy_slices_and_objects(folder: Path, tmp_path: Path) -> None:
    done = subprocess.run([EXE, "cat", str(folder / "frames"), "1:3, 2:"],
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert np.load(io.BytesIO(done.stdout)).tolist() == [[6, 7], [10, 11]]
    out = tmp_path / "w.npy"
    assert _run("cat", str(folder / "tensors"), "--tensor", "weights", "--output",
                str(out)).returncode == 0
    assert np.load(out).tolist() == [[0, 1, 2], [3, 4, 5]]
    schema = _run("cat", str(folder / "frames" / "__schema.json"))
    assert json.loads(schema.stdout)["dims"]
    refused = _run("cat", str(folder / "photos"))
    assert refused.returncode == 1 and "is an image set" in refused.stderr


@pytest.mark.parametrize("name", ["frames", "tensors", "photos", "scans"])
def test_cp_then_rm_every_kind(folder: Path, tmp_path: Path, name: str) -> None:
    copy = tmp_path / name
    done = _run("cp", str(folder / name), str(copy))
    assert done.returncode == 0, done.stderr
    before = tessera.open((folder / name).as_uri())
    after = tessera.open(copy.as_uri())
    assert type(after) is type(before)
    if hasattr(before, "history"):
        assert [c.marker for c in after.history()] == [c.marker for c in before.history()]
    again = _run("cp", str(folder / name), str(copy))
    assert again.returncode == 1 and "already holds" in again.stderr
    unasked = _run("rm", str(copy))  # not a terminal, no --yes: refused, nothing removed
    assert unasked.returncode == 1 and "--yes" in unasked.stderr and copy.exists()
    gone = _run("rm", str(copy), "--yes")
    assert gone.returncode == 0, gone.stderr
    assert not copy.exists()  # no object and no empty folder left
    assert _run("ls", str(copy)).returncode == 1


def test_rm_refuses_a_place_that_is_no_dataset(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("x")
    refused = _run("rm", str(tmp_path / "notes"), "--yes")
    assert refused.returncode == 1 and "--recursive" in refused.stderr
    assert (tmp_path / "notes" / "a.txt").exists()
    assert _run("rm", str(tmp_path / "notes"), "--yes", "--recursive").returncode == 0
    assert not (tmp_path / "notes").exists()
    missing = _run("rm", str(tmp_path / "nothing"), "--yes")
    assert missing.returncode == 1 and missing.stderr.startswith("error: nothing at")


def _photos(root: Path, shape: tuple[int, int, int], count: int = 2) -> Path:
    for label in ("cat", "dog"):
        (root / label).mkdir(parents=True)
        for i in range(count):
            Image.fromarray(np.full(shape, 40 * i, np.uint8)).save(root / label / f"{i}.png")
    return root


def test_an_import_that_stores_nothing_leaves_nothing(tmp_path: Path) -> None:
    src = _photos(tmp_path / "big", (70, 80, 3))
    done = _run("import", "images", str(src), "set", "--size", "32", "--fit", "error",
                cwd=tmp_path)
    assert done.returncode == 1
    assert "70x80, the set holds 32x32" in done.stdout and "image 0" not in done.stdout
    assert "--fit resize" in done.stdout and "fit='" not in done.stdout + done.stderr
    assert done.stderr.startswith("error: no image of") and not (tmp_path / "set").exists()
    retry = _run("import", "images", str(src), "set", "--size", "32", cwd=tmp_path)
    assert retry.returncode == 0 and "4 images, 2 classes" in retry.stdout


def test_import_images_appends_to_a_set(tmp_path: Path) -> None:
    first = _photos(tmp_path / "a", (32, 32, 3))
    more = tmp_path / "b"
    (more / "dog").mkdir(parents=True)
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(more / "dog" / "x.png")
    assert _run("import", "images", str(first), "set", "--size", "32",
                cwd=tmp_path).returncode == 0
    done = _run("import", "images", str(more), "set", "--append", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cols = tessera.open_images((tmp_path / "set").as_uri())
    assert len(cols) == 5 and cols.labels(cols.ids()).tolist()[-1] == 1  # "dog" as before
    assert len(cols.history()) == 2
    (more / "bird").mkdir()
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(more / "bird" / "y.png")
    nowhere = _run("import", "images", str(more), "none", "--append", cwd=tmp_path)
    assert nowhere.returncode == 1 and "import without --append" in nowhere.stderr
    assert not (tmp_path / "none").exists()
    unknown = _run("import", "images", str(more), "set", "--append", cwd=tmp_path)
    assert unknown.returncode == 1 and "'bird'" in unknown.stderr
    assert len(tessera.open_images((tmp_path / "set").as_uri())) == 5


def test_older_names_still_work_with_a_note(folder: Path) -> None:
    done = _run("explain", str(folder / "frames"), "0:2, :")
    assert done.returncode == 0 and "tessera array explain" in done.stderr
    tables = _run("tables", "ls", str(folder / "tensors"))
    assert tables.returncode == 0 and "weights" in tables.stdout
    assert "tessera table" in tables.stderr
    assert "explain" not in _run("--help").stdout.split("Anything at a URL")[0]


def test_errors_name_flags_and_debug_shows_the_traceback(folder: Path) -> None:
    done = _run("array", "explain", str(folder / "frames"), "--method", "pushdown")
    assert done.returncode == 2 and "--pushdown" in done.stderr
    missing = _run("info", str(folder / "nothing"))
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1
    assert "tessera ls" in missing.stderr and "Traceback" not in missing.stderr
    debug = _run("--debug", "info", str(folder / "nothing"))
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_shell_completion_is_offered() -> None:
    done = _run("--show-completion", "bash")
    assert done.returncode == 0 and "complete" in done.stdout


def test_cp_and_rm_between_stores(folder: Path, s3_server) -> None:
    url = s3_server.unique_url("cli-cp")
    opts = s3_server.storage_options()
    target = [arg for key, value in opts.items()
              for arg in ("--target-option", f"{key}={str(value).lower()}")]
    done = _run("cp", str(folder / "frames"), url, *target)
    assert done.returncode == 0, done.stderr
    there = tessera.open_array(url, storage_options=opts)
    assert np.array_equal(there[:], tessera.open_array((folder / "frames").as_uri())[:])
    flags = [arg for key, value in opts.items()
             for arg in ("-o", f"{key}={str(value).lower()}")]
    assert _run("rm", url, "--yes", *flags).returncode == 0
    assert tessera.open_store(url, **opts).list() == []


def test_the_older_storage_flag_still_works(folder: Path) -> None:
    done = _run("ls", str(folder), "--option", "x=y")
    assert "--option is now --storage-option" in done.stderr
