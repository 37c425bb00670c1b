"""Models are data, never code: the manifest, the weights' hashes and formats, prefix-only
loading, and the server refusing to start on any bad entry, naming the file."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tessera.errors import ConfigError  # noqa: E402
from tessera.frozen.arch import build  # noqa: E402
from tessera.frozen.manifest import MANIFEST, ModelSpec, read_manifest  # noqa: E402
from tessera.frozen.models import check_models, init_model, register  # noqa: E402
from tessera.frozen.weights import (  # noqa: E402
    convert,
    load_model,
    meta_model,
    parameters_in,
    prefix_keys,
    sha256_file,
)


def _copy(models_dir: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    shutil.copytree(models_dir, folder)
    return folder


def _edit(folder: Path, **change: object) -> None:
    doc = json.loads((folder / MANIFEST).read_text())
    doc["models"][0].update(change)
    (folder / MANIFEST).write_text(json.dumps(doc))


def test_init_is_deterministic_and_checks(models_dir: Path, tmp_path: Path) -> None:
    again = init_model("resnet18", tmp_path, seed=0, name="r18",
                       input=read_manifest(models_dir)[0].input)
    assert again.sha256 == read_manifest(models_dir)[0].sha256
    reports = check_models(models_dir)
    assert [(s.name, r.parameters) for s, r in reports] == [("r18", 11_689_512),
                                                           ("alex", 57_044_810)]


def test_prefix_only_loading() -> None:
    vgg = meta_model("vgg11")
    assert parameters_in(vgg, prefix_keys(vgg, 21)) == 9_220_480  # spec 4, item 5
    assert parameters_in(vgg, set(vgg.state_dict())) == 132_863_336


def test_a_prefix_model_runs_its_prefix_only(models_dir: Path) -> None:
    spec = read_manifest(models_dir)[0]
    whole, part = load_model(spec, models_dir), load_model(spec, models_dir, split=4)
    x = torch.rand(2, 3, 32, 32)
    assert torch.equal(whole.forward_to(x, 4), part.forward_to(x, 4))
    assert part.layer4[0].conv1.weight.device.type == "meta"  # never read


@pytest.mark.parametrize("change, words", [
    ({"arch": "os.system"}, "unknown architecture 'os.system'"),
    ({"sha256": "0" * 64}, "sha256"),
    ({"weights": "../r18.safetensors"}, "weights must name a file"),
    ({"code": "print(1)"}, "unknown key(s) 'code'"),
    ({"name": "Bad Name"}, "must match"),
    ({"max_split": 99}, "max_split 99"),
    ({"input": {"mean": [0.5], "std": [0.5]}}, "one per channel"),
])
def test_server_refuses_to_start_on_a_bad_manifest(models_dir: Path, tmp_path: Path,
                                                   make_app: Any, change: dict[str, object],
                                                   words: str) -> None:
    folder = _copy(models_dir, tmp_path)
    _edit(folder, **change)
    with pytest.raises(ConfigError, match=r"models\.json|r18\.safetensors") as err:
        make_app(tmp_path, folder)
    assert words in str(err.value)


class Payload:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch pwned",))


@pytest.mark.parametrize("kind", ["bare pickle", "torch zip"])
def test_a_pickle_payload_renamed_pt_is_refused(models_dir: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                make_app: Any, kind: str) -> None:
    monkeypatch.chdir(tmp_path)
    folder = _copy(models_dir, tmp_path)
    evil = folder / "evil.pt"
    if kind == "bare pickle":
        evil.write_bytes(pickle.dumps({"conv1.weight": Payload()}))
    else:
        torch.save({"conv1.weight": Payload()}, evil)
    # the operator even pinned its hash: the hash is right, the contents are refused
    _edit(folder, weights="evil.pt", sha256=sha256_file(evil))
    with pytest.raises(ConfigError, match=r"evil\.pt"):
        make_app(tmp_path, folder)
    assert not (tmp_path / "pwned").exists()


def test_a_pt_state_dict_is_read_weights_only_and_converted(tmp_path: Path) -> None:
    real = build("resnet18")
    torch.save(real.state_dict(), tmp_path / "r.pt")
    sha = convert("resnet18", tmp_path / "r.pt", tmp_path / "r.safetensors")
    assert sha == sha256_file(tmp_path / "r.safetensors")
    spec = register(tmp_path, "r-pt", "resnet18", "r.pt")
    got = load_model(spec, tmp_path)
    assert all(torch.equal(got.state_dict()[k], v) for k, v in real.state_dict().items())
    with pytest.raises(ConfigError, match="is not a state_dict of alexnet"):
        convert("alexnet", tmp_path / "r.pt", tmp_path / "a.safetensors")


def test_weights_of_another_shape_are_refused(models_dir: Path, tmp_path: Path,
                                             make_app: Any) -> None:
    folder = _copy(models_dir, tmp_path)
    spec = ModelSpec.from_json(json.loads((folder / MANIFEST).read_text())["models"][0], "t")
    _edit(folder, num_classes=7)  # the file holds a 1000-class fc
    with pytest.raises(ConfigError, match=r"fc\.weight|does not fit"):
        make_app(tmp_path, folder)
    assert spec.num_classes == 1000


def test_no_unpickling_call_under_src() -> None:
    """A lint: nothing under src/ may unpickle, eval or load TorchScript (torch modules go
    to eval mode with ``train(False)``, so that ``eval(`` never appears)."""
    src = Path(__file__).parents[2] / "src"
    banned = ("weights_only=False", "pickle.load", "torch.jit.load", "jit.load(", "dill.",
              "cloudpickle", "eval(")
    found = [(p.name, b) for p in src.rglob("*.py") for b in banned if b in p.read_text()]
    assert found == []
    uses = [p.name for p in src.rglob("*.py") if "torch.load(" in p.read_text()]
    for name in uses:  # every torch.load names weights_only=True on the same call
        text = next(src.rglob(name)).read_text()
        for call in text.split("torch.load(")[1:]:
            assert "weights_only=True" in call.split(")")[0], name
