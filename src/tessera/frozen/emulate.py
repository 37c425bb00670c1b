"""Emulated compute, for the testing kit and the benchmark: the paper's grid (7 models, batches
up to 3,072, 4 concurrent requests, two GPUs) does not fit on two CPU cores, so a server
started with ``ServerConfig.emulate_compute=FILE`` sleeps each forward pass's profiled seconds
instead of computing (sleeping uses no CPU), passes take turns under one device lock, and the
response carries zeros of the true shape: the link still moves the real bytes. Real compute
stays the correctness reference; emulated runs are labelled so.

The file: ``{"models": {"NAME": {"forward_s": [seconds per sample of layer 1, 2, ...],
"load_s": seconds to load the whole model}}}``, written by :meth:`Emulation.save` from a
profile (:mod:`tessera.frozen.profile`) scaled as the run needs. :class:`EmulatedDevice`
is the server's emulated device (its passes have the face of the real ones);
:class:`EmulatedClient` the trainer's emulated layers and training step.

>>> e = Emulation({"m": ModelTimes((0.01, 0.02, 0.03), 0.5)})
>>> round(e.forward_s("m", 2, 10), 6), e.load_s("m", 2)
(0.3, 0.5)
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tessera.errors import ConfigError, UnknownModelError
from tessera.pushdown.infer_items import InferHeader, InferRequest


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


class EmulatedDevice:
    """A server's emulated compute device (``ServerConfig.emulate_compute``): forward
    passes take turns under one lock, as on the paper's time-shared GPU, and sleep their
    profiled seconds; :meth:`start` stands in for the server's real model load and pass."""

    def __init__(self, emulation: Emulation) -> None:
        self.emulation = emulation
        self.lock = threading.Lock()

    def start(self, req: InferRequest, name: str, sha256: str, out_shape: tuple[int, ...],
              cos: int, phases: dict[str, float], cached: bool) -> EmulatedPass:
        """The pass of ``req`` on model ``name`` (layer ``req.split``'s output per sample:
        ``out_shape``); the model's load is slept now unless the server keeps models
        loaded (``cached``)."""
        phases["load"] = 0.0 if cached else self.emulation.load_s(name, req.split)
        time.sleep(phases["load"])
        phases["prep"] = 0.0
        return EmulatedPass(self, req, name, sha256, out_shape, cos, phases, cached)


class EmulatedPass:
    """One emulated forward pass, with the face of the server's real one: iterating it
    sleeps the pass's seconds under the device lock, then yields zeros of the true shape
    per server batch; :meth:`header` is complete once the last batch is out."""

    def __init__(self, device: EmulatedDevice, req: InferRequest, name: str, sha256: str,
                 out_shape: tuple[int, ...], cos: int, phases: dict[str, float],
                 hit: bool) -> None:
        self.device, self.req, self.name, self.sha256 = device, req, name, sha256
        self.out_shape, self.cos, self.phases, self.hit = out_shape, cos, phases, hit
        self.used = cos
        self.layers_s: list[float] | None = None
        phases.setdefault("copy", 0.0)

    def __iter__(self) -> Iterator[np.ndarray]:
        req, n = self.req, len(self.req.samples)
        emulation = self.device.emulation
        t = time.perf_counter()
        with self.device.lock:
            time.sleep(emulation.forward_s(self.name, req.split, n))
        self.phases["forward"] = time.perf_counter() - t
        if req.timings == "layers":
            self.layers_s = emulation.layer_s(self.name, req.split, n)
        for start in range(0, n, self.cos):
            yield np.zeros((min(self.cos, n - start), *self.out_shape), req.output_dtype)

    def header(self) -> InferHeader:
        """The answer's header (complete after the last batch)."""
        return InferHeader(self.phases, self.used, "hit" if self.hit else "miss", self.sha256,
                           self.layers_s)


class EmulatedClient:
    """A split trainer's emulated compute (``SplitTrainer(emulate=...)``, paired with a
    server emulating the same file): the client's frozen layers and its training step sleep
    their seconds instead of computing, with the same notes a real run makes (``note(key,
    seconds per sample)``: ``client{k}`` per layer while profiling, ``train``); the loss is
    0. It has the face of the trainer's real compute (``layers``, ``check``, ``train``)."""

    def __init__(self, emulation: Emulation, name: str,
                 note: Callable[[str, float], None]) -> None:
        self.emulation, self.name, self.note = emulation, name, note

    def layers(self, h: Any, first: int, last: int, samples: int, profiling: bool) -> Any:
        """Layers ``first..last`` on ``h`` (returned as it is), one at a time and noted
        while profiling."""
        if not profiling:
            time.sleep(self.emulation.range_s(self.name, first, last, samples))
            return h
        for k in range(first, last + 1):
            t = time.perf_counter()
            time.sleep(self.emulation.range_s(self.name, k, k, samples))
            self.note(f"client{k}", (time.perf_counter() - t) / samples)
        return h

    def check(self, *args: Any) -> None:
        """Emulated features are zeros: nothing to compare."""

    def train(self, h: Any, batch: list[int], *args: Any) -> float:
        """The trained layers' step on ``batch``, slept; the loss is 0."""
        t = time.perf_counter()
        time.sleep(self.emulation.train_s(self.name, len(batch)))
        self.note("train", (time.perf_counter() - t) / len(batch))
        return 0.0
