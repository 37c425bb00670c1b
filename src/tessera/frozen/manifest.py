"""The operator's model manifest: which models a server may run, with which weights.

A models folder holds ``models.json`` and the weights files it names::

    {"models": [{"name": "resnet18-in1k", "arch": "resnet18", "num_classes": 1000,
                 "weights": "resnet18-in1k.safetensors", "sha256": "4e0c...",
                 "input": {"channels": 3, "height": 224, "width": 224, "dtype": "uint8",
                           "scale": 0.00392156862745098, "mean": [0.485, 0.456, 0.406],
                           "std": [0.229, 0.224, 0.225]},
                 "max_split": 11}]}

Models are data, never code: ``arch`` must name an architecture of Tessera's own registry
(:data:`tessera.frozen.arch.ARCHS`), ``weights`` a file in the folder (safetensors, or a
``.pt``/``.pth`` state_dict read with ``torch.load(weights_only=True)``) whose sha256 is
pinned. Unknown keys are refused, so a manifest cannot smuggle anything else in. This
module checks the manifest's text; :func:`tessera.frozen.weights.check_weights` checks the
files' bytes against it (hash first, then the tensors' names and shapes).

>>> spec = ModelSpec.from_json({"name": "r18", "arch": "resnet18", "weights": "r18.safetensors",
...                             "sha256": "0" * 64}, "models.json")
>>> spec.max_split, spec.input.height, spec.input.scale
(None, 224, 0.00392156862745098)
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tessera.errors import ConfigError
from tessera.frozen.arch import ARCHS

if TYPE_CHECKING:
    import torch

MANIFEST = "models.json"
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """What a model's first layer takes and how stored samples are normalised on the way:
    ``x = (stored * scale - mean[c]) / std[c]`` per channel ``c``, as float32."""

    channels: int = 3
    height: int = 224
    width: int = 224
    dtype: str = "uint8"
    scale: float = 1 / 255
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD

    def normalise(self, stored: np.ndarray) -> torch.Tensor:
        """Stored samples ``(n, C, H, W)`` as the model's float32 input: ``(stored * scale -
        mean[c]) / std[c]`` per channel (the one recipe the client and the server share)."""
        import torch

        x = torch.from_numpy(np.ascontiguousarray(stored)).to(torch.float32)
        x.mul_(self.scale)
        mean = torch.tensor(self.mean, dtype=torch.float32).view(1, -1, 1, 1)
        std = torch.tensor(self.std, dtype=torch.float32).view(1, -1, 1, 1)
        return (x - mean) / std

    @classmethod
    def from_json(cls, raw: Any, where: str) -> InputSpec:
        """Read and check an ``input`` object (defaults for missing keys)."""
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: 'input' must be an object")
        _no_unknown(raw, {f.name for f in dataclasses.fields(cls)}, where + ".input")
        kw: dict[str, Any] = {}
        for key in ("channels", "height", "width"):
            if key in raw:
                v = raw[key]
                if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1 << 16:
                    raise ConfigError(f"{where}: input.{key} must be an integer in 1..65536, "
                                      f"got {v!r}")
                kw[key] = v
        if "dtype" in raw:
            if raw["dtype"] not in ("uint8", "float32"):
                raise ConfigError(f"{where}: input.dtype must be 'uint8' or 'float32', got "
                                  f"{raw['dtype']!r}")
            kw["dtype"] = raw["dtype"]
        if "scale" in raw:
            kw["scale"] = _finite(raw["scale"], f"{where}: input.scale")
        for key in ("mean", "std"):
            if key in raw:
                v = raw[key]
                if not isinstance(v, list) or not v:
                    raise ConfigError(f"{where}: input.{key} must be a list of numbers")
                kw[key] = tuple(_finite(x, f"{where}: input.{key}") for x in v)
        spec = cls(**kw)
        if len(spec.mean) != spec.channels or len(spec.std) != spec.channels:
            raise ConfigError(f"{where}: input.mean and input.std need {spec.channels} values "
                              "(one per channel)")
        if any(s <= 0 for s in spec.std):
            raise ConfigError(f"{where}: input.std values must be > 0")
        return spec

    def to_json(self) -> dict[str, Any]:
        """The JSON object of this spec."""
        d = dataclasses.asdict(self)
        d["mean"], d["std"] = list(self.mean), list(self.std)
        return d

    @property
    def sample_shape(self) -> tuple[int, int, int]:
        """``(channels, height, width)`` of one sample."""
        return (self.channels, self.height, self.width)


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One registered model.

    Attributes:
        name: what requests call it (``^[a-z0-9][a-z0-9._-]{0,63}$``).
        arch: an architecture of :data:`~tessera.frozen.arch.ARCHS`.
        weights: the weights file, relative to the models folder.
        sha256: the weights file's sha256 (hex); nothing else is loaded.
        num_classes: outputs of the last layer.
        input: the samples it takes and their normalisation.
        max_split: the last layer a request may ask the server to run (``None``: any but the
            last; the server refuses later ones).
    """

    name: str
    arch: str
    weights: str
    sha256: str
    num_classes: int = 1000
    input: InputSpec = InputSpec()
    max_split: int | None = None

    @classmethod
    def from_json(cls, raw: Any, where: str) -> ModelSpec:
        """Read and check one manifest entry; ``where`` names it in errors."""
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: each model must be an object")
        name = raw.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise ConfigError(f"{where}: model name {name!r} must match {NAME.pattern}")
        where = f"{where}, model {name!r}"
        _no_unknown(raw, {f.name for f in dataclasses.fields(cls)}, where)
        arch = raw.get("arch")
        if arch not in ARCHS:
            raise ConfigError(f"{where}: unknown architecture {arch!r}; a server runs only "
                              f"Tessera's own: {', '.join(sorted(ARCHS))}")
        weights = raw.get("weights")
        if (not isinstance(weights, str) or not weights.endswith(WEIGHT_SUFFIXES)
                or "/" in weights or "\\" in weights or weights.startswith(".")):
            raise ConfigError(f"{where}: weights must name a file in the models folder ending "
                              f"in {', '.join(WEIGHT_SUFFIXES)}, got {weights!r}")
        sha = raw.get("sha256")
        if not isinstance(sha, str) or not SHA256.match(sha):
            raise ConfigError(f"{where}: sha256 must be 64 lowercase hex digits, got {sha!r}")
        classes = raw.get("num_classes", 1000)
        if isinstance(classes, bool) or not isinstance(classes, int) or classes < 1:
            raise ConfigError(f"{where}: num_classes must be a positive integer")
        max_split = raw.get("max_split")
        if max_split is not None and (isinstance(max_split, bool)
                                      or not isinstance(max_split, int) or max_split < 1):
            raise ConfigError(f"{where}: max_split must be a positive integer or absent")
        inp = InputSpec.from_json(raw["input"], where) if "input" in raw else InputSpec()
        return cls(name, arch, weights, sha, classes, inp, max_split)

    def to_json(self) -> dict[str, Any]:
        """The manifest entry of this spec."""
        d: dict[str, Any] = {"name": self.name, "arch": self.arch,
                             "num_classes": self.num_classes, "weights": self.weights,
                             "sha256": self.sha256, "input": self.input.to_json()}
        if self.max_split is not None:
            d["max_split"] = self.max_split
        return d


def _no_unknown(raw: dict[str, Any], known: set[str], where: str) -> None:
    extra = sorted(set(raw) - known)
    if extra:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, extra))}; known: "
                          f"{', '.join(sorted(known))}")


def _finite(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{where} must be a finite number, got {v!r}")
    return float(v)


def read_manifest(folder: str | Path) -> list[ModelSpec]:
    """The models registered in ``folder/models.json`` (checked; names unique). Raises
    :class:`~tessera.errors.ConfigError` naming the file and the entry at fault."""
    path = Path(folder) / MANIFEST
    try:
        doc = json.loads(path.read_text(), parse_constant=_refuse_constant)
    except FileNotFoundError:
        raise ConfigError(f"no model manifest {path}; `tessera model init ARCH --out "
                          f"{folder}` writes one") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ConfigError(f"model manifest {path} is not readable JSON: {err}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), list):
        raise ConfigError(f"model manifest {path} must be an object with a 'models' list")
    _no_unknown(doc, {"models"}, str(path))
    specs = [ModelSpec.from_json(m, f"{path}: models[{i}]")
             for i, m in enumerate(doc["models"])]
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"model manifest {path} registers {', '.join(dup)} more than once")
    return specs


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def write_manifest(folder: str | Path, specs: list[ModelSpec]) -> Path:
    """Write ``folder/models.json`` listing ``specs`` (replacing the file)."""
    path = Path(folder) / MANIFEST
    path.write_text(json.dumps({"models": [s.to_json() for s in specs]}, indent=2) + "\n")
    return path


def add_to_manifest(folder: str | Path, spec: ModelSpec) -> Path:
    """Register ``spec`` in ``folder``'s manifest (created if missing); a model of the same
    name is replaced."""
    folder = Path(folder)
    specs = read_manifest(folder) if (folder / MANIFEST).exists() else []
    return write_manifest(folder, [s for s in specs if s.name != spec.name] + [spec])


def writable_warning(folder: str | Path) -> str | None:
    """A warning when the manifest or the folder may be changed by others than the owner
    (whoever can write them chooses what the server runs)."""
    for p in (Path(folder), Path(folder) / MANIFEST):
        if p.exists() and p.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return (f"{p} is writable by group or others, who could then choose the weights "
                    f"this server runs; `chmod go-w {p}`")
    return None
