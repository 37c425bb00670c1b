"""Registering models in a models folder: :func:`init_model` (random weights from a seed,
for tests and benchmarks; there is no download), :func:`register` (weights you have) and
:func:`check_models` (every entry's hash, names and shapes). ``tessera model init|check|
convert`` are these functions."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from tessera.errors import ConfigError
from tessera.frozen.arch import build
from tessera.frozen.inventory import LayerInfo, layer_infos
from tessera.frozen.manifest import InputSpec, ModelSpec, add_to_manifest, read_manifest
from tessera.frozen.weights import WeightsReport, check_weights, save_weights, sha256_file


def init_model(arch: str, folder: str | Path, *, seed: int = 0, name: str | None = None,
               num_classes: int = 1000, input: InputSpec | None = None,
               max_split: int | None = None) -> ModelSpec:
    """Build ``arch`` with random weights drawn from ``seed`` (torchvision's initialisation),
    write them as ``folder/NAME.safetensors`` and register them in ``folder/models.json``
    with their sha256. The same seed gives the same bytes on every machine."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = name or f"{arch.replace('_', '-')}-seed{seed}"
    gen = torch.random.fork_rng(devices=[])
    with gen:
        torch.manual_seed(seed)
        model = build(arch, num_classes)
    file = f"{name}.safetensors"
    spec = ModelSpec(name, arch, file, "0" * 64, num_classes, input or InputSpec(), max_split)
    ModelSpec.from_json(spec.to_json(), "init_model")  # the name and fields are valid
    sha = save_weights(model, folder / file)
    spec = ModelSpec(name, arch, file, sha, num_classes, spec.input, max_split)
    add_to_manifest(folder, spec)
    return spec


def register(folder: str | Path, name: str, arch: str, weights: str, *,
             num_classes: int = 1000, input: InputSpec | None = None,
             max_split: int | None = None) -> ModelSpec:
    """Register weights already in ``folder`` (their sha256 is computed now and pinned)."""
    sha = sha256_file(Path(folder) / weights)
    spec = ModelSpec.from_json(ModelSpec(name, arch, weights, sha, num_classes,
                                         input or InputSpec(), max_split).to_json(), "register")
    check_weights(spec, folder)
    add_to_manifest(folder, spec)
    return spec


def check_models(folder: str | Path) -> list[tuple[ModelSpec, WeightsReport]]:
    """Every model of ``folder``'s manifest with its checked weights; the first problem
    raises :class:`~tessera.errors.ConfigError` naming the file."""
    return [(c.spec, c.weights) for c in checked_models(folder)]


@dataclasses.dataclass(frozen=True)
class CheckedModel:
    """A model of a folder, checked: its weights' report, its layers (with their output
    shapes for the manifest's input size) and the last layer a split may stop at."""

    spec: ModelSpec
    weights: WeightsReport
    layers: tuple[LayerInfo, ...]
    max_split: int


def checked_models(folder: str | Path) -> list[CheckedModel]:
    """Every model of ``folder``'s manifest, checked (weights' hash, names and shapes; a
    ``max_split`` within the layers); the first problem raises
    :class:`~tessera.errors.ConfigError` naming the file and the model."""
    out = []
    for spec in read_manifest(folder):
        report = check_weights(spec, folder)
        infos = tuple(layer_infos(spec.arch, spec.num_classes, spec.input.sample_shape))
        last = len(infos) - 1
        if spec.max_split is not None and spec.max_split > last:
            raise ConfigError(f"{Path(folder) / 'models.json'}: model {spec.name!r} has "
                              f"max_split {spec.max_split}, but {spec.arch} has {len(infos)} "
                              f"layers (at most {last})")
        out.append(CheckedModel(spec, report, infos, spec.max_split or last))
    return out
