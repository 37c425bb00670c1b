"""The frozen layers of registered models, run beside the store (``POST /v1/infer``).

- :class:`ModelRegistry`: the operator's models folder, checked when the server starts (the
  manifest, every weights file's sha256, then its tensors' names and shapes); a bad entry
  stops the server naming the file.
- :class:`ModelCache`: loaded model prefixes (only the tensors of layers ``1..s``), least
  recently used first out, bounded in bytes; ``model_cache_bytes=0`` loads per request (the
  paper's evaluation).
- :class:`InferService`: one request: checks (split, weights, output and memory limits, all
  before any compute), reads the samples through the engine at one snapshot, normalises them
  as the manifest says, runs layers ``1..s`` in eval mode under ``inference_mode`` with the
  server's batch (halved on an allocation failure, down to 1) and times every phase.

Emulated compute (``ServerConfig.emulate_compute``, testing only) lives in
:mod:`tessera.frozen.emulate`: its device's passes stand in for :class:`ForwardPass`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from tessera.cache import LRUCache
from tessera.config import ServerConfig
from tessera.errors import (
    ConfigError,
    CorruptDataError,
    LimitError,
    ProtocolError,
    ServerBusyError,
    TesseraError,
    UnknownModelError,
    UnprocessableError,
    WeightsMismatchError,
)
from tessera.frozen.emulate import EmulatedDevice, EmulatedPass, Emulation
from tessera.frozen.inputs import crop_boxes, prepare, read_crops
from tessera.frozen.manifest import ModelSpec, writable_warning
from tessera.pushdown.infer_items import InferHeader, InferRequest
from tessera.storage.blocking import Store

log = logging.getLogger("tessera.server")
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class HostedModel:
    """A registered model as the server knows it: its spec, layers and their output shapes
    for the manifest's input size, and the last layer requests may ask for."""

    spec: ModelSpec
    layers: tuple[Any, ...]  # LayerInfo
    max_split: int
    parameters: int
    #: the weights file as checked at start: (size, mtime_ns, inode); a load whose file no
    #: longer matches re-checks the sha256 before reading it
    checked: tuple[int, int, int] = (0, 0, 0)

    def describe(self) -> dict[str, Any]:
        """The model's entry in ``GET /v1/info``."""
        return {"name": self.spec.name, "arch": self.spec.arch,
                "num_classes": self.spec.num_classes, "weights_sha256": self.spec.sha256,
                "input": self.spec.input.to_json(), "max_split": self.max_split,
                "parameters": self.parameters,
                "layers": [[i.name, list(i.shape)] for i in self.layers]}


class ModelRegistry:
    """The models of ``folder``, each checked now (raises :class:`ConfigError` naming the
    file at fault, so ``tessera serve`` does not start)."""

    def __init__(self, folder: str | Path) -> None:
        from tessera.frozen.models import checked_models

        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise ConfigError(f"models folder {self.folder} does not exist")
        if (warning := writable_warning(self.folder)) is not None:
            log.warning(json.dumps({"event": "warning", "message": warning}))
        self.models: dict[str, HostedModel] = {}
        for model in checked_models(self.folder):
            st = (self.folder / model.spec.weights).stat()
            self.models[model.spec.name] = HostedModel(
                model.spec, model.layers, model.max_split, model.weights.parameters,
                (st.st_size, st.st_mtime_ns, st.st_ino))

    def get(self, name: str) -> HostedModel:
        """The model ``name``, or :class:`UnknownModelError` (404) listing the hosted ones."""
        try:
            return self.models[name]
        except KeyError:
            raise UnknownModelError(f"no model {name!r}; this server hosts: "
                                    f"{', '.join(sorted(self.models)) or 'none'}") from None


class ModelCache:
    """Loaded model prefixes by name, least recently used out first, at most ``capacity``
    bytes of tensors. A request for a later split than the cached prefix loads a longer one."""

    def __init__(self, registry: ModelRegistry, capacity: int) -> None:
        self.registry = registry
        self.capacity = capacity
        #: name -> (split, model), sized by the bytes of the model's tensors
        self._models: LRUCache[str, tuple[int, Any]] = LRUCache("loaded models", capacity)
        #: found but too short a prefix: a hit for the cache, a load for the request
        self._short = 0

    @property
    def nbytes(self) -> int:
        """Bytes of the cached models' tensors."""
        return self._models.nbytes

    @property
    def hits(self) -> int:
        """Requests served by a cached prefix."""
        return self._models.hits

    @property
    def misses(self) -> int:
        """Requests that loaded their prefix (none cached, or a shorter one)."""
        return self._models.misses + self._short

    def get(self, hosted: HostedModel, split: int) -> tuple[Any, bool, int]:
        """``(model with layers 1..split loaded, hit, bytes loaded now)``."""
        from tessera.frozen.weights import load_model

        name = hosted.spec.name
        found = self._models.peek(name)
        if found is not None and found[0] >= split:
            self._models.get(name)  # marked recently used, counted as a hit
            return found[1], True, 0
        if found is None:
            self._models.get(name)  # counted as a miss
        else:
            self._short += 1
        # the registry checked the file's hash at start; hash it again (before reading it)
        # only if it changed since, so a model reloaded per request is not hashed each time
        st = (self.registry.folder / hosted.spec.weights).stat()
        same = (st.st_size, st.st_mtime_ns, st.st_ino) == hosted.checked
        try:
            model = load_model(hosted.spec, self.registry.folder, split, verify=not same)
        except ConfigError as err:
            log.error(json.dumps({"event": "weights_changed", "model": hosted.spec.name,
                                  "reason": str(err)}))
            raise WeightsMismatchError(f"the server's weights of {hosted.spec.name} changed "
                                       f"on disk since it started: {err}") from None
        nbytes = sum(t.nbytes for t in model.state_dict().values() if t.device.type != "meta")
        if self.capacity:
            self._models.put(name, (split, model), nbytes)
        return model, False, nbytes


@dataclasses.dataclass
class InferResult:
    """Features of one request, in its sample order, and the header's extra keys."""

    features: np.ndarray
    header: InferHeader


class ForwardPass:
    """One infer request's forward pass once its samples are read and its model prefix is
    loaded (:meth:`InferService.start`): iterating it yields the features of each server
    batch in sample order, in the request's output dtype; :meth:`header` is complete once
    the last batch is out. A streamed answer sends each batch as it comes, so the server
    holds one batch's activations and features at a time."""

    def __init__(self, service: InferService, req: InferRequest, hosted: HostedModel,
                 cos: int, phases: dict[str, float], model: Any, x: Any, hit: bool) -> None:
        self.service, self.req, self.hosted, self.cos = service, req, hosted, cos
        self.phases, self.model, self.x, self.hit = phases, model, x, hit
        self.used = cos
        self.layers_s: list[float] | None = None
        phases.setdefault("forward", 0.0)
        phases.setdefault("copy", 0.0)

    def __iter__(self) -> Iterator[np.ndarray]:
        req, phases = self.req, self.phases
        per_layer = [0.0] * req.split if req.timings == "layers" else None
        self.layers_s = per_layer
        batches = self.service.forward_batches(self.model, self.x, req, self.cos, per_layer)
        while True:
            t = time.perf_counter()
            got = next(batches, None)
            phases["forward"] += time.perf_counter() - t
            if got is None:
                return
            h, self.used = got
            t = time.perf_counter()
            out = np.ascontiguousarray(h.numpy().astype(req.output_dtype, copy=False))
            phases["copy"] += time.perf_counter() - t
            yield out

    def header(self) -> InferHeader:
        """The answer's header (complete after the last batch)."""
        return InferHeader(self.phases, self.used, "hit" if self.hit else "miss",
                           self.hosted.spec.sha256,
                           None if self.layers_s is None else list(self.layers_s))


#: A forward pass as the handler streams it: the real one, or the emulated device's.
Pass = ForwardPass | EmulatedPass


class InferService:
    """Runs infer requests for one server (blocking: the handler calls :meth:`run` in a
    worker thread)."""

    def __init__(self, store: Store, config: ServerConfig) -> None:
        import torch

        self.store = store
        self.config = config
        self.registry = ModelRegistry(config.models_dir)
        self.cache = ModelCache(self.registry, config.model_cache_bytes)
        self.emulated: EmulatedDevice | None = None  # emulated compute, testing only
        if config.emulate_compute:
            self.emulated = EmulatedDevice(Emulation.load(config.emulate_compute))
        self._arrays: dict[str, Any] = {}
        self._arrays_lock = threading.Lock()
        torch.set_num_threads(config.infer_threads)

    # -- checks, before any compute --------------------------------------------------------
    def check(self, req: InferRequest, max_output_bytes: int) -> tuple[HostedModel, int]:
        """The model and the server batch for ``req``; raises the 404/400/409/413 errors."""
        hosted = self.registry.get(req.model)
        spec = hosted.spec
        if not 1 <= req.split <= hosted.max_split:
            names = [i.name for i in hosted.layers[:hosted.max_split]]
            raise ProtocolError(f"split {req.split} is outside 1..{hosted.max_split} for "
                                f"{spec.name} (layers: {names[0]} ... {names[-1]})")
        if req.weights_sha256 is not None and req.weights_sha256 != spec.sha256:
            raise WeightsMismatchError(f"weights sha256 {spec.sha256[:12]}... of {spec.name} on "
                                       f"this server != client's {req.weights_sha256[:12]}...")
        layer = hosted.layers[req.split - 1]
        itemsize = np.dtype(req.output_dtype).itemsize
        per_sample = math.prod(layer.shape) * itemsize
        n = len(req.samples)
        if n * per_sample > max_output_bytes:
            raise LimitError(f"{n} samples of {spec.name} at split {req.split} ({layer.name}) "
                             f"are {n * per_sample:,} bytes; at split {req.split} at most "
                             f"{max_output_bytes // per_sample} samples fit "
                             f"{max_output_bytes:,} bytes")
        from tessera.frozen.inventory import peak_bytes_per_sample

        peak = peak_bytes_per_sample(hosted.layers, spec.input.sample_shape, 1, req.split)
        budget = self.config.infer_memory_bytes
        if peak > budget:
            raise LimitError(f"split {req.split} of {spec.name} needs {peak / 2**20:.1f} MiB per "
                             f"sample (2 x the largest input + output of layers 1..{req.split}); "
                             f"the budget per request is {budget / 2**20:.1f} MiB")
        cos = min(req.cos_batch or self.config.cos_batch, self.config.cos_batch, n,
                  max(1, budget // max(peak, 1)))
        return hosted, cos

    # -- one request ------------------------------------------------------------------------
    def run(self, req: InferRequest, hosted: HostedModel, cos: int) -> InferResult:
        """Read, normalise, compute and time one request; the features whole."""
        run = self.start(req, hosted, cos)
        features: np.ndarray | None = None
        filled = 0
        for batch in run:
            if features is None:  # written batch by batch: no second copy of the features
                features = np.empty((len(req.samples), *batch.shape[1:]), batch.dtype)
            features[filled:filled + len(batch)] = batch
            filled += len(batch)
        assert features is not None
        return InferResult(features, run.header())

    def start(self, req: InferRequest, hosted: HostedModel, cos: int) -> Pass:
        """Read the request's samples and load its model prefix (timed); iterating the
        result computes the features server batch by server batch."""
        phases: dict[str, float] = {}
        spec = hosted.spec
        t = time.perf_counter()
        cropped = req.regions is not None or req.augment is not None
        if cropped:  # crops of each sample, read as one union, prepared below
            arr = self._array(req.array)
            self._in_range(req, arr.shape[0])
            boxes = crop_boxes(req.samples, tuple(arr.shape[1:]), spec.input, req.regions,
                               req.augment)
            stored: Any = self._damage_named(req, lambda: read_crops(arr, req.samples, boxes))
        else:
            stored = self._read(req, spec)
        phases["read"] = time.perf_counter() - t
        if self.emulated is not None:
            return self.emulated.start(req, spec.name, spec.sha256,
                                       hosted.layers[req.split - 1].shape, cos, phases,
                                       self.cache.capacity > 0)
        t = time.perf_counter()
        model, hit, _ = self.cache.get(hosted, req.split)
        phases["load"] = time.perf_counter() - t
        t = time.perf_counter()
        x = (prepare(stored, [f for _, f in boxes], spec.input) if cropped
             else spec.input.normalise(stored))
        phases["prep"] = time.perf_counter() - t
        return ForwardPass(self, req, hosted, cos, phases, model, x, hit)

    def forward_batches(self, model: Any, x: Any, req: InferRequest, cos: int,
                        per_layer: list[float] | None = None) -> Iterator[tuple[Any, int]]:
        """Layers ``1..split`` of ``x`` in server batches of ``cos`` samples, halved on an
        allocation failure (down to 1, then :class:`~tessera.errors.ServerBusyError`):
        yields each batch's output and the batch size it ran at. ``per_layer`` (one entry per
        layer) gathers seconds per layer."""
        import torch

        from tessera.frozen.profile import timed_layers

        start = 0
        while start < x.shape[0]:
            try:
                with torch.inference_mode(), denormals_flushed():
                    h = x[start:start + cos]
                    if per_layer is None:
                        h = model.forward_to(h, req.split)
                    else:
                        h = timed_layers([fn for _, fn in model.layers()[:req.split]], h,
                                         per_layer)
            except RuntimeError as err:
                if "alloc" not in str(err).lower():
                    raise
                if cos == 1:
                    raise ServerBusyError(f"insufficient memory for split {req.split} of "
                                          f"{req.model} even at a server batch of 1") from None
                cos = max(1, cos // 2)
                continue
            yield h, cos
            start += h.shape[0]

    def _array(self, path: str) -> Any:
        from tessera.array.factories import open_array

        with self._arrays_lock:
            arr = self._arrays.get(path)
        if arr is None:
            url = self.store.url.child(path) if path else str(self.store.url)
            try:
                arr = open_array(url, storage_options=self.store.aio.storage_options)
            except TesseraError as err:
                raise UnprocessableError(f"input.array {path!r}: {err}") from None
            with self._arrays_lock:
                self._arrays[path] = arr
        return arr

    def _read(self, req: InferRequest, spec: ModelSpec) -> np.ndarray:
        arr = self._array(req.array)
        shape = arr.shape
        want = spec.input.sample_shape
        rest = tuple(s for d, s in enumerate(shape) if d != req.sample_dim)
        if req.sample_dim >= len(shape) or rest != want:
            raise UnprocessableError(
                f"array {req.array!r} has shape {shape}; {spec.name} takes samples of "
                f"{want} along input.sample_dim {req.sample_dim}")
        self._in_range(req, shape[req.sample_dim])
        sel: list[Any] = [slice(None)] * len(shape)
        sel[req.sample_dim] = list(req.samples)
        data = self._damage_named(req, lambda: np.asarray(arr.oindex[tuple(sel)]))
        return np.moveaxis(data, req.sample_dim, 0)

    def _in_range(self, req: InferRequest, n: int) -> None:
        bad = [s for s in req.samples if s >= n]
        if bad:
            raise UnprocessableError(f"samples {bad[:5]} are outside 0..{n - 1} of array "
                                     f"{req.array!r}")

    def _damage_named(self, req: InferRequest, read: Callable[[], T]) -> T:
        """``read()``, a damaged input answered 422 naming the array."""
        try:
            return read()
        except CorruptDataError as err:
            raise UnprocessableError(f"input of array {req.array!r} is damaged: {err}") \
                from None


@contextlib.contextmanager
def denormals_flushed() -> Iterator[None]:
    """Flush subnormal floats to zero in this thread for the block, then restore the state.

    Random and trained weights push activations into subnormals, which run many times
    slower on x86; flushing them changes features by less than 1e-38. The floating-point
    mode is a per-thread CPU register shared with everything else running in the thread
    (numpy, hypothesis, the caller's code), so it is set only around the forward pass.

    >>> import numpy as np
    >>> tiny = np.array([1e-40], dtype=np.float32)
    >>> with denormals_flushed():
    ...     bool((tiny * 1)[0] == 0)
    True
    >>> bool((tiny * 1)[0] == 0)
    False
    """
    import torch

    tiny = np.array([1e-40], dtype=np.float32)
    was_on = bool((tiny * np.float32(1))[0] == 0)
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if not was_on:
            torch.set_flush_denormal(False)
