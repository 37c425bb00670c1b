"""Emulated compute, for the testing kit and the benchmark: the paper's grid (7 models, batches
up to 3,072, 4 concurrent requests, two GPUs) does not fit on two CPU cores, so a server
started with ``ServerConfig.emulate_compute=FILE`` sleeps each forward pass's profiled seconds
instead of computing (sleeping uses no CPU), passes take turns under one device lock, and the
response carries zeros of the true shape: the link still moves the real bytes. Real compute
stays the correctness reference; emulated runs are labelled so.

The file: ``{"models": {"NAME": {"forward_s": [seconds per sample of layer 1, 2, ...],
"load_s": seconds to load the whole model}}}``, written by :meth:`Emulation.save` from a
profile (:mod:`tessera.frozen.profile`) scaled as the run needs.

>>> e = Emulation({"m": ModelTimes((0.01, 0.02, 0.03), 0.5)})
>>> round(e.forward_s("m", 2, 10), 6), e.load_s("m", 2)
(0.3, 0.5)
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tessera.errors import ConfigError, UnknownModelError


@dataclasses.dataclass(frozen=True)
class ModelTimes:
    """One model's emulated costs: per-layer forward seconds per sample, its load, and the
    client's forward + backward + optimizer seconds per sample of the trained layers."""

    forward_s: tuple[float, ...]
    load_s: float = 0.0
    train_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class Emulation:
    """Emulated costs by model name."""

    models: dict[str, ModelTimes]

    @classmethod
    def load(cls, path: str | Path) -> Emulation:
        """Read an emulation file (:class:`~tessera.errors.ConfigError` naming it when bad)."""
        try:
            doc = json.loads(Path(path).read_text())
            models = {str(name): ModelTimes(tuple(float(t) for t in m["forward_s"]),
                                            float(m.get("load_s", 0.0)),
                                            float(m.get("train_s", 0.0)))
                      for name, m in doc["models"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise ConfigError(f"emulated-compute file {path} is not usable: {err}") from None
        if any(t < 0 for m in models.values() for t in (*m.forward_s, m.load_s)):
            raise ConfigError(f"emulated-compute file {path} holds negative seconds")
        return cls(models)

    def save(self, path: str | Path) -> None:
        """Write this emulation as JSON."""
        Path(path).write_text(json.dumps({"models": {
            n: {"forward_s": list(m.forward_s), "load_s": m.load_s, "train_s": m.train_s}
            for n, m in self.models.items()}}, indent=1))

    def _times(self, name: str) -> ModelTimes:
        try:
            return self.models[name]
        except KeyError:
            raise UnknownModelError(f"model {name!r} has no emulated compute times") from None

    def forward_s(self, name: str, split: int, samples: int) -> float:
        """Seconds layers ``1..split`` take for ``samples`` samples."""
        return samples * sum(self._times(name).forward_s[:split])

    def layer_s(self, name: str, split: int, samples: int) -> list[float]:
        """Seconds of each layer ``1..split`` for ``samples`` samples."""
        return [samples * t for t in self._times(name).forward_s[:split]]

    def range_s(self, name: str, first: int, last: int, samples: int) -> float:
        """Seconds of layers ``first..last`` (1-based, inclusive) for ``samples`` samples."""
        return samples * sum(self._times(name).forward_s[first - 1:last])

    def train_s(self, name: str, samples: int) -> float:
        """The client's seconds to train on ``samples`` samples (after the frozen layers)."""
        return samples * self._times(name).train_s

    def load_s(self, name: str, split: int) -> float:
        """Seconds to load the model (whole; prefix loading is not emulated)."""
        return self._times(name).load_s
