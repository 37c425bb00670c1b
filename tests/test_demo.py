"""The demo runs end to end: ingest, crop check, training steps, and an I/O report that
shows fewer bytes than whole-image downloads."""

from __future__ import annotations

import uuid

import pytest

pytest.importorskip("torch")

from tessera.demo import main, run_demo


def test_run_demo_in_memory() -> None:
    rows = run_demo(f"memory://demo-{uuid.uuid4().hex[:8]}", images=40, steps=3, batch=8)
    assert [r["step"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert 1 <= r["whole"].requests <= 8  # one GET per distinct image of the batch
        assert r["whole"].bytes_received == r["whole"].requests * 3 * 192 * 256
        assert r["io"].bytes_received > 0 and r["loss"] > 0
    crops = sum(r["io"].bytes_received for r in rows)
    whole = sum(r["whole"].bytes_received for r in rows)
    assert crops < whole / 2


def test_demo_cli_reruns_on_the_same_folder(tmp_path, capsys) -> None:
    url = (tmp_path / "store").as_uri()
    main(["--store", url, "--images", "20", "--steps", "2", "--batch", "4"])
    main(["--store", url, "--images", "12", "--steps", "1", "--batch", "4"])  # replaces it
    out = capsys.readouterr().out
    assert "training on crops" in out and "the bytes" in out
    commits = list((tmp_path / "store" / "camera-trap" / "images" / "__commits").iterdir())
    assert len(commits) == 1  # the rerun's one fragment; the first run's are gone
