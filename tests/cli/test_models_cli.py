"""``tessera models init|check|convert``, ``tessera serve --models`` refusing bad models,
and ``tessera profile-model`` + ``explain-split`` against a real server process (HTTP on
127.0.0.1), the one end-to-end test of frozen-layer pushdown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

import tessera  # noqa: E402
from tessera.cli.main import app  # noqa: E402
from tessera.frozen.arch import build  # noqa: E402
from tessera.testing import PushdownTestServer  # noqa: E402

runner = CliRunner()


def test_init_check_and_convert(tmp_path: Path) -> None:
    result = runner.invoke(app, ["model", "init", "resnet18", "--out", str(tmp_path / "m"),
                                 "--size", "32", "--name", "r18"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["model", "check", str(tmp_path / "m")])
    assert result.exit_code == 0 and "11,689,512 parameters" in result.output
    assert "layer4.0" in result.output
    torch.save(build("alexnet").state_dict(), tmp_path / "a.pt")
    result = runner.invoke(app, ["model", "convert", "alexnet", str(tmp_path / "a.pt"),
                                 str(tmp_path / "a.safetensors")])
    assert result.exit_code == 0 and (tmp_path / "a.safetensors").exists()


def test_serve_refuses_a_manifest_naming_unknown_code(tmp_path: Path) -> None:
    (tmp_path / "models.json").write_text(json.dumps({"models": [
        {"name": "x", "arch": "os.system", "weights": "x.pt", "sha256": "0" * 64}]}))
    done = subprocess.run([sys.executable, "-m", "tessera.cli.main", "serve",
                           tmp_path.as_uri(), "--models", str(tmp_path), "--insecure-no-auth"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "models.json" in done.stderr and "unknown architecture 'os.system'" in done.stderr


def test_profile_model_and_explain_split_end_to_end(tmp_path: Path) -> None:
    models, root = tmp_path / "models", tmp_path / "root"
    assert runner.invoke(app, ["model", "init", "resnet18", "--out", str(models), "--size",
                               "32", "--name", "r18"]).exit_code == 0
    stored = np.random.default_rng(0).integers(0, 256, (32, 3, 32, 32), dtype=np.uint8)
    tessera.from_numpy((root / "imgs").as_uri(), stored, tile=(1, 3, 32, 32))
    with PushdownTestServer(root.as_uri(), extra_args=["--models", str(models)]) as srv:
        result = runner.invoke(app, [
            "model", "profile", "r18", "--pushdown", srv.url, "--weights",
            str(models / "r18.safetensors"), "--array", (root / "imgs").as_uri(),
            "--freeze", "layer4.0", "--batch", "8", "--request", "4", "--samples", "32",
            "--out", str(tmp_path / "p.json")], env={"TESSERA_PUSHDOWN_TOKEN": srv.token or ""})
    assert result.exit_code == 0, result.output
    assert "<- chosen" in result.output and "profiled on 32 samples" in result.output
    saved = json.loads((tmp_path / "p.json").read_text())
    f = saved["freeze"]  # layer4.0: every frozen layer timed on both sides, and training
    assert len(saved["server_fwd_s"]) == f and all(v > 0 for v in saved["server_fwd_s"])
    assert all(v > 0 for v in saved["client_fwd_s"][:f]) and saved["train_s"] > 0
    result = runner.invoke(app, ["model", "explain", str(tmp_path / "p.json"), "--batch", "256",
                                 "--bandwidth-mbit", "20", "--rule", "sum"])
    assert result.exit_code == 0, result.output
    assert "link 20.0 Mbit/s" in result.output and "rule sum" in result.output


def test_explain_split_prices_the_plan_and_weighs_dollars(tmp_path: Path) -> None:
    from tessera.frozen.planner import SplitProfile

    p = SplitProfile(names=("a", "b", "c"), out_bytes=(4000, 1000, 40), input_bytes=3000,
                     freeze=2, server_fwd_s=(0.001, 0.02), client_fwd_s=(0.001,) * 3,
                     train_s=0.004, bandwidth=1e8)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(p.to_json()))
    free = runner.invoke(app, ["model", "explain", str(path), "--batch", "32", "--request", "8",
                               "--samples", "3200"], env={"COLUMNS": "200"})
    assert free.exit_code == 0, free.output
    assert "no prices" in free.output
    paid = runner.invoke(app, ["model", "explain", str(path), "--batch", "32", "--request", "8",
                               "--samples", "3200", "--pricing", "s3", "--phi", "1e9"],
                  env={"COLUMNS": "200"})
    assert paid.exit_code == 0, paid.output
    assert "phi 1e+09 s/$" in paid.output and "no prices" not in paid.output
    chosen = [line for line in paid.output.splitlines() if "<- chosen" in line]
    assert chosen and chosen[0].split()[0] == "2"  # the fewest bytes: the fewest dollars
    assert "materialise features of 2 b" in " ".join(paid.output.split())  # the rule's line
