"""``tessera table`` and ``tessera info`` on a tensor table, and ``tessera import pt``."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from tessera.cli.main import app

pytest.importorskip("deltalake")
runner = CliRunner(env={"COLUMNS": "200"})


def test_tables_commands(tmp_path) -> None:
    from tessera.tables import TensorTable

    url = (tmp_path / "t").as_uri()
    tt = TensorTable.create(url)
    tt.write_many({"emb/a": np.ones((4, 3)), "emb/b": np.zeros((2, 2))},
                  metadata={"source": "cli"})
    sparse = np.zeros((40, 40))
    sparse[1, 2] = 3.0
    tt.write("counts", sparse)
    result = runner.invoke(app, ["info", url])
    assert result.exit_code == 0, result.output
    assert "tensor table, version 2, 3 tensors" in result.output
    assert "bsgs 2, ftsf 1" in result.output  # the all-zero tensor is stored sparse
    listed = runner.invoke(app, ["table", "ls", url, "--prefix", "emb/"])
    assert listed.exit_code == 0 and "emb/a" in listed.output and "counts" not in listed.output
    one = runner.invoke(app, ["table", "info", url, "counts"])
    assert one.exit_code == 0 and "bsgs" in one.output and "row groups" in one.output
    old = runner.invoke(app, ["table", "ls", url, "--at", "1"])
    assert "counts" not in old.output and "emb/b" in old.output
    removed = runner.invoke(app, ["table", "rm", url, "--prefix", "emb/"])
    assert removed.exit_code == 0 and "removed 2 tensor(s)" in removed.output
    assert TensorTable.open(url).ids() == ["counts"]
    optimized = runner.invoke(app, ["table", "optimize", url])
    assert optimized.exit_code == 0, optimized.output
    vacuumed = runner.invoke(app, ["table", "vacuum", url])
    assert vacuumed.exit_code == 0 and "would delete" in vacuumed.output


def test_import_pt(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from tessera.tables import TensorTable

    path = tmp_path / "w.pt"
    torch.save({"layer.weight": torch.arange(6.0).reshape(2, 3),
                "layer.bias": torch.zeros(3, dtype=torch.bfloat16)}, path)
    url = (tmp_path / "t").as_uri()
    result = runner.invoke(app, ["import-pt", str(path), url, "--id", "model"])
    assert result.exit_code == 0, result.output
    tt = TensorTable.open(url)
    assert tt.ids() == ["model/layer.bias", "model/layer.weight"]
    assert torch.equal(tt["model/layer.weight"].torch(), torch.arange(6.0).reshape(2, 3))
    assert tt["model/layer.bias"].dtype == "bfloat16"
    single = tmp_path / "one.pt"
    torch.save(torch.ones(2), single)
    refused = runner.invoke(app, ["import-pt", str(single), url])
    assert refused.exit_code != 0 and "--id" in str(refused.exception)


def test_import_safetensors(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    from safetensors.torch import save_file

    from tessera.tables import TensorTable

    path = tmp_path / "m.safetensors"
    weights = {"w": torch.arange(12.0).reshape(3, 4), "b": torch.ones(4, dtype=torch.bfloat16)}
    save_file(weights, str(path), metadata={"format": "pt"})
    url = (tmp_path / "t").as_uri()
    result = runner.invoke(app, ["import-safetensors", str(path), url, "--id", "net"])
    assert result.exit_code == 0, result.output
    tt = TensorTable.open(url)
    assert tt.ids() == ["net/b", "net/w"] and tt["net/w"].metadata == {"format": "pt"}
    assert torch.equal(tt["net/b"].torch(), weights["b"])
    assert np.array_equal(tt["net/w"].numpy(), weights["w"].numpy())
