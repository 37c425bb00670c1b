"""The command line: version, ls, stat, and readable errors instead of tracebacks."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

import tessera
from tessera.cli.main import app

runner = CliRunner()


def _tessera(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tessera.cli.main", *args],
                          capture_output=True, text=True, timeout=120)


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and tessera.__version__ in result.output


def test_ls_and_stat_on_a_folder(tmp_path) -> None:
    store = tessera.open_store(tmp_path.as_uri())
    store.put("images/0001.bin", b"x" * 2048)
    store.put("README", b"hi")
    result = runner.invoke(app, ["ls", tmp_path.as_uri()])
    assert result.exit_code == 0
    assert "images/" in result.output and "README" in result.output
    assert "1 objects" in result.output
    result = runner.invoke(app, ["ls", "-r", str(tmp_path)])
    assert "images/0001.bin" in result.output and "2.0 KiB" in result.output
    result = runner.invoke(app, ["store", "stat", (tmp_path / "images" / "0001.bin").as_uri()])
    assert result.exit_code == 0 and "2048 bytes" in result.output


def test_ls_and_stat_on_s3(s3_server) -> None:
    url = s3_server.unique_url("cli")
    tessera.open_store(url, **s3_server.storage_options()).put("a/b.bin", b"12345")
    common = ["--endpoint", s3_server.endpoint, "--allow-http", "--region", "us-east-1",
              "-o", "access_key_id=testing", "-o", "secret_access_key=testing"]
    result = runner.invoke(app, ["ls", "-r", url, *common])
    assert result.exit_code == 0 and "a/b.bin" in result.output
    result = runner.invoke(app, ["store", "stat", f"{url}/a/b.bin", *common])
    assert result.exit_code == 0 and "5 bytes" in result.output


@pytest.mark.parametrize("args,message", [
    (["store", "stat", "file:///definitely/not/here.bin"], "no such object"),
    (["ls", "ftp://host/x"], "unsupported store URL scheme"),
    (["store", "stat", "s3://only-a-bucket"], "names a bucket, not an object"),
])
def test_errors_are_one_readable_line(args: list[str], message: str) -> None:
    proc = _tessera(*args)
    assert proc.returncode == 1
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error:")


def test_bad_option_is_a_usage_error() -> None:
    result = runner.invoke(app, ["ls", "memory://", "-o", "no-equals-sign"])
    assert result.exit_code == 2 and "KEY=VALUE" in result.output


def test_info_prints_schema_and_fragments(tmp_path) -> None:
    import numpy as np

    uri = (tmp_path / "arr").as_uri()
    arr = tessera.from_numpy(uri, np.zeros((8, 8), np.int16), tile=(4, 4), codec="zstd")
    arr.write_cells((np.array([1]), np.array([2])), np.array([5], np.int16))
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["info", uri])
    assert result.exit_code == 0, result.output
    for text in ("dense", "d0", "[0, 7]", "zstd", "sparse", arr.fragments[1].name,
                 "2 fragments"):
        assert text in result.output
    old = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["info", uri, "--timestamp", str(arr.fragments[0].timestamp)])
    assert "1 fragment," in old.output
    first = arr.history()[0].when.isoformat()
    by_date = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["info", uri, "--at", first])
    assert by_date.exit_code == 0 and "1 fragment," in by_date.output, by_date.output
    before = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["info", uri, "--at", "2001-01-01"])
    assert before.exit_code != 0 and "did not exist yet at --at 2001-01-01" in str(before.exception)
    bad = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["info", uri, "--at", "yesterday"])
    assert "--at='yesterday' is not a point in time" in str(bad.exception)


def test_info_shows_metadata(tmp_path) -> None:
    import numpy as np

    uri = (tmp_path / "arr").as_uri()
    arr = tessera.from_numpy(uri, np.zeros(4, np.int16), tile=(4,))
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["info", uri])
    assert "value" not in result.output  # none yet: no metadata table
    arr.metadata.update(units="m/s", labels=["a", "b"])
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["info", uri])
    assert result.exit_code == 0, result.output
    assert "metadata" in result.output and '"m/s"' in result.output
    assert '["a", "b"]' in result.output
    grown = tessera.from_numpy((tmp_path / "grown").as_uri(), np.zeros((2, 3)), tile=(4, 3),
                               maxshape=(None, 3))
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["info", grown.uri])
    assert "shape (2, 3)," in result.output and "may grow to (unbounded, 3)" in result.output


def test_info_on_a_missing_array_is_one_line() -> None:
    proc = _tessera("info", "file:///definitely/not/an/array")
    assert proc.returncode == 1 and proc.stderr.startswith(
        "error: file:///definitely/not/an/array holds no array")


def test_explain_prints_the_plan(tmp_path) -> None:
    import numpy as np

    uri = (tmp_path / "arr").as_uri()
    tessera.from_numpy(uri, np.zeros((100, 100), np.int32), tile=(25, 25))
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["array", "explain", uri, "[10:30, 5]", "--method", "fetch"])
    assert result.exit_code == 0, result.output
    for text in ("read plan: method=fetch", "2 range", "20 requests", "80 bytes"):
        assert text in result.output


@pytest.mark.parametrize(("sel", "message"), [
    ("[10:30, 5", "unbalanced '['"),
    ("1:2:3:4", "at most start:stop:step"),
    ("a:b", "cannot read"),
])
def test_explain_reports_bad_selections_in_one_line(tmp_path, sel, message) -> None:
    import numpy as np

    uri = (tmp_path / "arr").as_uri()
    tessera.from_numpy(uri, np.zeros((10, 10), np.int32))
    proc = _tessera("array", "explain", uri, sel)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error:")


def test_profile_measures_saves_and_plots(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TESSERA_PROFILE_DIR", str(tmp_path / "profiles"))
    png = tmp_path / "bw.png"
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["store", "profile", (tmp_path / "scratch").as_uri(), "--quick", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert "request latency T_R" in result.output and "saved for endpoint file" in result.output
    assert "small reads on the calling thread" in result.output  # a folder's are timed
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(list((tmp_path / "profiles").glob("*.json"))) == 1
    assert not list((tmp_path / "scratch").iterdir())


def test_images_info(tmp_path) -> None:
    import numpy as np

    from tessera.images import ImageColumns

    url = (tmp_path / "images").as_uri()
    cols = ImageColumns.create(url, size=(64, 64), group=4)
    cols.append(np.random.default_rng(0).integers(0, 256, (5, 64, 64, 3), dtype=np.uint8))
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["images", "info", url,
                                                            "--sample", "3"])
    assert result.exit_code == 0, result.output
    assert "5 images of 64x64" in result.output and "exact" in result.output
    per_image = cols.bytes_per_k() / 5
    assert f"{per_image[7]:,.0f}" in result.output  # k = 8's bytes, from the bookkeeping
    missing = CliRunner().invoke(app, ["images", "info", (tmp_path / "none").as_uri()])
    assert missing.exit_code != 0


def test_import_images_from_an_image_folder(tmp_path) -> None:
    import numpy as np
    from PIL import Image

    from tessera.images import ImageColumns

    rng = np.random.default_rng(0)
    src = tmp_path / "src"
    for cls, shape in (("cat", (40, 50, 3)), ("dog", (64, 64, 3))):
        (src / cls).mkdir(parents=True)
        for i in range(3):
            img = rng.integers(0, 256, shape, dtype=np.uint8)
            Image.fromarray(img).save(src / cls / f"{i}.png")
    Image.fromarray(np.zeros((80, 100, 3), np.uint8)).save(src / "dog" / "large.png")
    (src / "dog" / "broken.jpg").write_bytes(b"not a jpeg")
    (src / "notes.txt").write_text("ignored")
    url = (tmp_path / "set").as_uri()
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["import", "images", str(src), url, "--size", "64", "--fit", "pad", "--group", "4"])
    assert result.exit_code == 0, result.output
    assert "6 images, 2 classes" in result.output
    assert "skipped" in result.output and "broken.jpg" in result.output
    assert "large.png: 80x100, the set holds 64x64 and fit is 'pad'" in result.output
    cols = ImageColumns.open(url)
    assert len(cols) == 6 and cols.classes() == ["cat", "dog"]
    assert cols.labels(cols.ids()).tolist() == [0, 0, 0, 1, 1, 1]
    assert cols.sizes(cols.ids()).tolist() == [[40, 50]] * 3 + [[64, 64]] * 3
    resized = CliRunner().invoke(app, ["import", "images", str(src), (tmp_path / "r").as_uri(),
                                       "--size", "32x64", "--group", "2"])
    assert resized.exit_code == 0 and "7 images" in resized.output, resized.output
    assert ImageColumns.open((tmp_path / "r").as_uri()).size == (32, 64)
    half = (tmp_path / "half").as_uri()
    subsampled = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["import", "images", str(src), half, "--size", "64", "--chroma", "4:2:0"])
    assert subsampled.exit_code == 0, subsampled.output
    assert ImageColumns.open(half).fmt.chroma == "4:2:0"
    info = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["images", "info", half])
    assert info.exit_code == 0 and "ycbcr 4:2:0" in info.output, info.output
    assert "1536" in info.output  # k = 63: 1024 luma + 2 x 256 chroma coefficients a block
    refused = _tessera("import", "images", str(src), (tmp_path / "x").as_uri(), "--colour",
                       "rgb", "--chroma", "4:2:0")
    assert refused.returncode != 0 and "needs colour='ycbcr'" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_import_images_refuses_an_empty_folder(tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    result = _tessera("import", "images", str(tmp_path / "empty"), (tmp_path / "set").as_uri())
    assert result.returncode != 0 and "no image files" in result.stderr
    assert "Traceback" not in result.stderr
