"""Transfer learning with the frozen layers beside the store (the HAPI paper):
:class:`SplitTrainer` and :class:`FrozenFeatureDataset` (``tessera.frozen.materialize``
writes features as an array).

``SplitTrainer`` trains layers ``F+1..L`` of a registered model (and an optional new head in
place of its last layer) on samples of a Tessera array. Each iteration's ``B`` samples, in
the sampler's order, go to the server as ``ceil(B / R)`` infer requests for layers ``1..s``;
the client runs ``s+1..F`` in eval mode under ``inference_mode`` and ``F+1..`` with gradients.
The requests of the next ``prefetch`` iterations are in flight while the client computes one.
Any failure of a request but a damaged input (422: :class:`~tessera.errors.CorruptDataError`)
or other weights (409) computes that batch locally instead (counted in the report, the reason
kept); a busy server (503) is asked again first, as its ``Retry-After`` says, up to the
store's retry attempts (:func:`~tessera.frozen.remote.features_parts`). Profiling and the
pipelined epoch are :mod:`tessera.frozen.profile`'s.

The split: ``"auto"`` (HAPI's overlap rule), ``"sum"`` (Neurosurgeon's), ``"freeze"``,
``"min"``, ``"nosplit"`` or a layer index. ``"auto"`` and ``"sum"`` profile during epoch 0 as
the paper's Algorithm 1 does -- **its body is not in the paper's text; this schedule is
reconstructed from the prose** (docs/frozen.md): a link probe, the first half of the epoch
at ``s = F`` (the server's per-layer times), the second half at the earliest split the client's
memory allows (the client's per-layer times), then :func:`tessera.frozen.planner.choose` for
the later epochs. Training is the same at every split: the same samples in the same order
through the same weights (frozen layers in eval mode).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from tessera._sync import run_sync
from tessera.array.array import Array
from tessera.array.factories import open_array
from tessera.errors import (
    InvalidArgumentError,
    PushdownError,
)
from tessera.frozen.emulate import EmulatedClient, Emulation
from tessera.frozen.inputs import cropped_inputs
from tessera.frozen.planner import SplitPlan, SplitProfile, choose, static_split
from tessera.frozen.profile import SplitProfiler, TrainedTail, run_pipelined
from tessera.frozen.remote import (
    Features,
    FrozenModel,
    collate,
    fatal,
    features_of,
    features_parts,
    one_server,
)
from tessera.pushdown.client import PushdownClient
from tessera.pushdown.infer_items import Augment
from tessera.query.plan import default_pricing
from tessera.storage.pricing import get_pricing
from tessera.storage.url import parse_store_url


@dataclasses.dataclass
class EpochReport:
    """What one epoch did, measured, beside the planner's estimate when there is one.

    Attributes:
        epoch: its number (0 profiles under ``auto``/``sum``).
        split: the split used (epoch 0 of ``auto``: the one chosen at its end).
        seconds: wall time of the epoch.
        iterations, samples: how much it trained.
        losses: the loss of every iteration, in order.
        fallbacks: batches computed locally after a server failure; ``last_error`` the latest
            reason.
        requests, bytes_received: infer requests and feature bytes that crossed the link.
        wait_s: time the client waited for features; ``compute_s`` its own work.
        estimate_s: the planner's epoch estimate for ``split`` (``None`` without a profile).
        checked: the relative error of the feature check (``None`` when none ran).
        server_phases: the server's seconds per phase (``read``, ``load``, ``prep``,
            ``forward``, ``copy``, ``queue``), summed over the epoch's requests.
    """

    epoch: int
    split: int
    seconds: float = 0.0
    iterations: int = 0
    samples: int = 0
    losses: list[float] = dataclasses.field(default_factory=list)
    fallbacks: int = 0
    last_error: str | None = None
    requests: int = 0
    bytes_received: int = 0
    wait_s: float = 0.0
    compute_s: float = 0.0
    estimate_s: float | None = None
    checked: float | None = None
    server_phases: dict[str, float] = dataclasses.field(default_factory=dict)

    def __str__(self) -> str:
        est = f", estimated {self.estimate_s:.2f} s" if self.estimate_s is not None else ""
        loss = f", loss {np.mean(self.losses):.4f}" if self.losses else ""
        fb = (f", {self.fallbacks} batch(es) computed locally ({self.last_error})"
              if self.fallbacks else "")
        return (f"epoch {self.epoch}: split {self.split}, {self.seconds:.2f} s{est}, "
                f"{self.iterations} iterations, {self.requests} requests, "
                f"{self.bytes_received / 2**20:.1f} MiB received, waited {self.wait_s:.2f} s"
                f"{loss}{fb}")


def _account(report: EpochReport, parts: list[Features]) -> None:
    report.requests += len(parts)
    report.bytes_received += sum(p.nbytes for p in parts)
    for p in parts:
        for phase, seconds in p.header.phases.items():
            report.server_phases[phase] = report.server_phases.get(phase, 0.0) + float(seconds)


def _server_of(net: FrozenModel, pushdown: Any) -> PushdownClient | None:
    if pushdown is None:
        return net.server
    return one_server(pushdown, who="SplitTrainer takes")


def _check_augment(augment: Augment, shape: tuple[int, ...], net: FrozenModel) -> None:
    """Stored samples ``(N, C, H, W)`` with the model's channels and crops that fit them."""
    spec = net.spec.input
    if len(shape) != 4 or shape[1] != spec.channels:
        raise InvalidArgumentError(f"augment crops stored samples of (channels={spec.channels}"
                                   f", height, width); the data has shape {shape}")
    if augment.crop[0] > shape[2] or augment.crop[1] > shape[3]:
        raise InvalidArgumentError(f"augment crop {augment.crop} is larger than the stored "
                                   f"samples ({shape[2]} x {shape[3]})")


class SplitTrainer:
    """Train the layers after ``freeze`` of ``net`` on ``data`` (an array ``(N, C, H, W)`` of
    stored samples, or its URL) with ``labels``, the frozen layers split between the server and
    here (see the module's docstring).

    Args:
        net: the registered model (:meth:`FrozenModel.from_server` or ``.local``).
        head: a module replacing the model's last layer (``None``: train the model's own).
        freeze: the last frozen layer F, by name or 1-based index.
        data, labels: the samples and their integer classes.
        pushdown: the server (URL or client); default ``net``'s; ``None`` with none: local.
        batch_size: the training batch B; ``request_size``: samples per request R.
        split: ``"auto"``, ``"sum"``, ``"freeze"``, ``"min"``, ``"nosplit"`` or an index.
        prefetch: iterations whose requests are in flight ahead of the one computing.
        check: ``"first"`` (the first request of epoch 0 is recomputed here and compared),
            ``"always"`` (every request; for tests) or ``"never"``.
        shuffle, seed: the sampler (a seeded permutation per epoch, as a DataLoader with a
            seeded generator).
        client_memory_bytes: the client's budget for the planner's memory estimate.
        phi: dollars' weight in the objective (seconds per dollar; 0: fastest).
        pricing: the price table of the plan's dollars (``s3``, ``gcs``, ``azure``,
            ``local``; default: the data store's provider, as read plans price it): each
            request priced as the provider's serverless invocation, each byte crossing the
            link as its egress. A given ``profile`` that carries prices keeps them.
        profile: a :class:`~tessera.frozen.planner.SplitProfile` from an earlier job: no
            profiling epoch.
        output_dtype: ``"<f4"`` (exact) or ``"<f2"`` (half the bytes, lossy).
        augment: seeded random crops (and flips) of every sample, drawn again each epoch
            (:meth:`~tessera.pushdown.infer_items.Augment.for_epoch`), resized to the model's
            input: the server makes them for the features it computes, this process for
            NoSplit and after a failed request, by the same recipe
            (:mod:`tessera.frozen.inputs`); the stored samples ``(N, C, H, W)`` may then be
            larger than the model's input.
        emulate: testing only (:mod:`tessera.frozen.emulate`): the client sleeps the
            emulated seconds of its layers and of training instead of computing (losses are
            0), to pair with a server started with the same emulation file.

    Without a server (as here) every layer runs in this process; with one, the frozen
    layers up to the chosen split run beside the store (docs/frozen.md).

    >>> import tempfile, numpy as np, torch, tessera
    >>> from tessera.frozen.manifest import InputSpec
    >>> from tessera.frozen.models import init_model
    >>> from tessera.frozen.remote import FrozenModel
    >>> folder = tempfile.mkdtemp()
    >>> spec = init_model("resnet18", folder, num_classes=3, input=InputSpec(height=32, width=32))
    >>> data = tessera.from_numpy(folder + "/samples",
    ...                           np.zeros((8, 3, 32, 32), np.uint8), tile=(4, 3, 32, 32))
    >>> trainer = SplitTrainer(FrozenModel.local(spec, folder), freeze="layer4.0", data=data,
    ...                        labels=[0, 1, 2, 0, 1, 2, 0, 1], batch_size=4)
    >>> optimizer = torch.optim.SGD(trainer.trainable_parameters(), lr=0.01)
    >>> report = trainer.train_epoch(optimizer, torch.nn.functional.cross_entropy)
    >>> report.epoch, len(report.losses)
    (0, 2)
    """

    def __init__(self, net: FrozenModel, head: nn.Module | None = None, *,
                 freeze: str | int, data: Array | str, labels: Sequence[int] | np.ndarray,
                 pushdown: Any = None, batch_size: int = 128, request_size: int = 128,
                 split: str | int = "auto", prefetch: int = 1, check: str = "first",
                 shuffle: bool = True, seed: int = 0, client_memory_bytes: int = 16 << 30,
                 phi: float = 0.0, profile: SplitProfile | None = None,
                 output_dtype: str = "<f4", emulate: Emulation | None = None,
                 pricing: str | None = None, augment: Augment | None = None) -> None:
        self.net = net
        self.freeze = net.index(freeze)
        if self.freeze >= len(net.layers):
            raise InvalidArgumentError(f"freeze {freeze!r} leaves nothing to train: "
                                       f"{net.spec.name} has {len(net.layers)} layers")
        self.data = data if isinstance(data, Array) else open_array(str(data))
        self.labels = torch.as_tensor(np.asarray(labels), dtype=torch.long)
        n = self.data.shape[0]
        if self.labels.shape != (n,):
            raise InvalidArgumentError(f"labels must hold one class per sample ({n}), got "
                                       f"shape {tuple(self.labels.shape)}")
        if augment is not None:
            _check_augment(augment, tuple(self.data.shape), net)
        elif tuple(self.data.shape[1:]) != net.spec.input.sample_shape:
            raise InvalidArgumentError(f"data of shape {self.data.shape} does not hold samples "
                                       f"of {net.spec.input.sample_shape} for {net.spec.name}")
        for name, v in (("batch_size", batch_size), ("request_size", request_size)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidArgumentError(f"{name} must be a positive integer, got {v!r}")
        if check not in ("first", "always", "never"):
            raise InvalidArgumentError(f"check must be 'first', 'always' or 'never', got "
                                       f"{check!r}")
        if isinstance(split, int) and not isinstance(split, bool):
            if not 0 <= split <= self.freeze:
                raise InvalidArgumentError(
                    f"split {split} is outside 0..{self.freeze} (the frozen layers "
                    f"{net.layers[0].name} ... {net.layers[self.freeze - 1].name})")
        elif split not in ("auto", "sum", "freeze", "min", "nosplit"):
            raise InvalidArgumentError(f"split must be 'auto', 'sum', 'freeze', 'min', "
                                       f"'nosplit' or a layer index, got {split!r}")
        self.server = _server_of(net, pushdown)
        self.batch_size, self.request_size = batch_size, request_size
        self.rule = split
        self.prefetch = max(0, int(prefetch))
        self.check = check
        self.shuffle, self.seed = shuffle, seed
        self.client_memory_bytes = client_memory_bytes
        self.phi = phi
        self.prices = get_pricing(pricing or default_pricing(self.data.store.url))
        self.output_dtype = output_dtype
        self.emulate = emulate
        #: the compute of the client's layers and training (emulated: testing only)
        self._client: TorchClient | EmulatedClient = TorchClient(self)
        self.augment = augment
        self._augment_now: Augment | None = None  # this epoch's
        self.profile = profile
        self.plan: SplitPlan | None = None
        self.tail = TrainedTail(net, self.freeze, head)
        self.epoch = 0
        self.reports: list[EpochReport] = []
        self._array_path: str | None = None
        self._checked = False
        self._profiler = SplitProfiler(net, self.freeze, self.data, batch_size=batch_size,
                                       request_size=request_size,
                                       client_memory_bytes=client_memory_bytes,
                                       prefetch=self.prefetch, output_dtype=output_dtype,
                                       server_info={})
        if emulate is not None:
            self._client = EmulatedClient(emulate, net.spec.name,
                                          lambda key, s: self._profiler.note(key, s))
        if self.server is None and split not in ("nosplit", 0):
            self.split = 0  # no server: everything here
        else:
            self.split = self._static_split()

    # -- public -----------------------------------------------------------------------------
    @property
    def profiler(self) -> SplitProfiler:
        """What the profiling epoch measured (``calibrated_on``: the profile before
        calibration and the epoch's times, once profiled; the client's earliest feasible
        split)."""
        return self._profiler

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters an optimizer should train."""
        return self.tail.trainable()

    def order(self, epoch: int) -> list[int]:
        """The sample order of ``epoch`` (a seeded permutation, or ``0..N-1``)."""
        n = self.data.shape[0]
        if not self.shuffle:
            return list(range(n))
        g = torch.Generator().manual_seed(self.seed + epoch)
        return torch.randperm(n, generator=g).tolist()

    def train_epoch(self, optimizer: torch.optim.Optimizer,
                    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                    ) -> EpochReport:
        """One epoch over the data; returns its :class:`EpochReport` (also in ``reports``)."""
        order = self.order(self.epoch)
        self._augment_now = None if self.augment is None else self.augment.for_epoch(self.epoch)
        batches = [order[i:i + self.batch_size] for i in range(0, len(order),
                                                               self.batch_size)]
        profiling = self.plan is None and self.profile is None and \
            self.rule in ("auto", "sum") and self.server is not None
        if self.profile is not None and self.plan is None:
            self._replan()
        report = EpochReport(self.epoch, self.split)
        t0 = time.perf_counter()
        if profiling:
            self._profiler.probe_link(self._remote)
            schedule = self._profiler.schedule(len(batches))
        else:
            schedule = [self.split] * len(batches)
        self.tail.set_train(True)

        def fetch(batch: list[int], split: int) -> dict[str, Any]:
            return self._fetch(batch, split, profiling)

        def compute(i: int, fetched: dict[str, Any]) -> None:
            loss = self._step(batches[i], schedule[i], fetched, optimizer, loss_fn, report,
                              profiling)
            report.losses.append(loss)
            report.iterations += 1
            report.samples += len(batches[i])

        times = run_pipelined(batches, schedule, self.prefetch, fetch, compute)
        report.wait_s = times.wait
        report.compute_s = sum(s for _, s in times.busy)
        report.seconds = time.perf_counter() - t0
        if profiling:
            assert self.server is not None
            self._profiler.server_info = run_sync(self.server.info())
            self.profile = self._profiler.profile(times)
            self._replan()
            report.split = self.split
        elif self.plan is not None:
            report.estimate_s = self.plan.candidate(self.split).epoch_s
        self.epoch += 1
        self.reports.append(report)
        return report

    # -- splits -----------------------------------------------------------------------------
    def _static_split(self) -> int:
        fixed = static_split(self.rule, self.freeze, [i.nbytes for i in self.net.layers])
        return self.freeze if fixed is None else fixed  # auto/sum: freeze until profiled

    def _replan(self) -> None:
        assert self.profile is not None
        if not self.profile.priced:
            self.profile = self.profile.with_prices(self.prices)
        self.plan = choose(self.profile, self.batch_size, self.request_size, self.rule,
                           samples=self.data.shape[0], phi=self.phi)
        self.split = self.plan.split

    # -- one iteration --------------------------------------------------------------------
    def _path(self) -> str:
        if self._array_path is None:
            assert self.server is not None
            self._array_path = run_sync(self.server.array_path(parse_store_url(self.data.uri)))
        return self._array_path

    def _stored(self, batch: list[int]) -> np.ndarray | torch.Tensor:
        """The stored samples of ``batch``, or with ``augment`` this epoch's crops of them
        made into the model's input (normalised, flipped, resized: as the server makes
        them)."""
        if self._augment_now is None:
            return np.asarray(self.data.oindex[batch])
        return cropped_inputs(self.data, batch, self.net.spec.input, None, self._augment_now)

    def _inputs(self, stored: np.ndarray | torch.Tensor) -> torch.Tensor:
        """The model's input from what :meth:`_stored` gave."""
        return stored if isinstance(stored, torch.Tensor) else self.net.normalise(stored)

    def _fetch(self, batch: list[int], split: int, profiling: bool) -> dict[str, Any]:
        """Runs in a prefetch thread: the features of layer ``split`` from the server, or the
        stored samples (NoSplit, or a failed request)."""
        t = time.perf_counter()
        if split == 0 or self.server is None:
            stored = self._stored(batch)
            return {"stored": stored, "fetch_s": time.perf_counter() - t}
        try:
            feats = self._remote(batch, split, "layers" if profiling and split == self.freeze
                                 else "phases")
        except PushdownError as err:
            if (typed := fatal(err)) is not None:
                return {"fatal": typed}
            return {"stored": self._stored(batch), "error": str(err),
                    "fetch_s": time.perf_counter() - t}
        return {"features": feats, "fetch_s": time.perf_counter() - t}

    def _remote(self, batch: list[int], split: int, timings: str) -> list[Features]:
        return run_sync(features_parts(self.net, self._path(), batch, split,
                                       request_size=self.request_size,
                                       output_dtype=self.output_dtype, timings=timings,
                                       retry=self.data.store.aio.config.retry,
                                       augment=self._augment_now))

    def _step(self, batch: list[int], split: int, fetched: dict[str, Any],
              optimizer: torch.optim.Optimizer,
              loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
              report: EpochReport, profiling: bool) -> float:
        """One iteration on what :meth:`_fetch` brought: layers ``split+1..F`` on the
        server's features (or ``1..F`` on the stored samples), then the trained layers, on
        the client's compute (PyTorch's, or the emulated one)."""
        if "fatal" in fetched:
            raise fetched["fatal"]
        client, n = self._client, len(batch)
        if "features" in fetched:
            parts: list[Features] = fetched["features"]
            _account(report, parts)
            h = collate([p.features for p in parts])
            if profiling and split == self.freeze:
                self._profiler.note_server(parts, split)
            client.check(parts, batch, split, report)
            first = split + 1
        else:
            if "error" in fetched:
                report.fallbacks += 1
                report.last_error = fetched["error"]
            td = time.perf_counter()
            h = self._inputs(fetched["stored"])
            self._profiler.note("decode", (time.perf_counter() - td) / n)
            first = 1
            if "error" in fetched:  # the server's layers, here
                h = client.layers(h, 1, split, n, False)
                first = split + 1
        h = client.layers(h, first, self.freeze, n, profiling)
        return client.train(h, batch, optimizer, loss_fn)


class TorchClient:
    """A split trainer's own compute in PyTorch: the frozen layers it runs, the check of
    the server's features against its own, and the trained layers' step."""

    def __init__(self, trainer: SplitTrainer) -> None:
        self.trainer = trainer

    def layers(self, h: torch.Tensor, first: int, last: int, samples: int,
               profiling: bool) -> torch.Tensor:
        """Layers ``first..last`` on ``h`` (each timed while profiling)."""
        t = self.trainer
        with torch.inference_mode():
            if profiling and first <= last:
                return t._profiler.timed_layers(h, first)
            return t.net.forward_range(h, first, last)

    def check(self, parts: list[Features], batch: list[int], split: int,
              report: EpochReport) -> None:
        """Compare the server's first features with the client's own (``check=``)."""
        t = self.trainer
        if t.check == "never" or (t.check == "first" and t._checked):
            return
        first = parts[0]
        checked = batch[:len(first.features)]
        local = t.net.local_features(np.asarray(t.data.oindex[checked]), split) \
            if t._augment_now is None else t.net.local_crop_features(
                t.data, checked, split, augment=t._augment_now)
        report.checked = t.net.compare(first.features, local, split, t.output_dtype,
                                       first.header.weights_sha256)
        t._checked = True

    def train(self, h: torch.Tensor, batch: list[int], optimizer: torch.optim.Optimizer,
              loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> float:
        """The trained layers' step on ``h``; returns the loss."""
        t = self.trainer
        h = h.clone()  # leave inference mode: the trained layers need autograd
        tt = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(t.tail(h), t.labels[batch])
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        t._profiler.note("train", (time.perf_counter() - tt) / len(batch))
        return float(loss.detach())


class FrozenFeatureDataset(torch.utils.data.Dataset[tuple[torch.Tensor, Any]]):
    """Layer-``split`` features of the samples of ``data`` computed by the server (locally
    when there is none, or when a request fails), for users with their own training loop.
    ``__getitems__`` (what a DataLoader with ``collate_fn=lambda b: b`` and a batch sampler
    uses) sends one request per ``request_size`` samples; ``__getitem__`` one sample.

    Items are ``(features, label)`` with ``labels``, else features alone.

    >>> import tempfile, numpy as np, tessera
    >>> from tessera.frozen.manifest import InputSpec
    >>> from tessera.frozen.models import init_model
    >>> from tessera.frozen.remote import FrozenModel
    >>> folder = tempfile.mkdtemp()
    >>> spec = init_model("resnet18", folder, num_classes=3, input=InputSpec(height=32, width=32))
    >>> data = tessera.from_numpy(folder + "/samples", np.zeros((4, 3, 32, 32), np.uint8))
    >>> ds = FrozenFeatureDataset(FrozenModel.local(spec, folder), data, split="layer1.0",
    ...                           labels=[0, 1, 2, 0])
    >>> features, label = ds[3]
    >>> tuple(features.shape), label
    ((64, 8, 8), 0)
    """

    def __init__(self, net: FrozenModel, data: Array | str, split: int, *,
                 labels: Sequence[int] | np.ndarray | None = None, pushdown: Any = None,
                 request_size: int = 128, output_dtype: str = "<f4") -> None:
        self.net = net
        self.data = data if isinstance(data, Array) else open_array(str(data))
        self.split = net.index(split)
        if self.split > net.max_split:
            raise InvalidArgumentError(f"split {split} is beyond {net.spec.name}'s last "
                                       f"server layer {net.max_split}")
        self.labels = None if labels is None else np.asarray(labels)
        self.server = _server_of(net, pushdown)
        self.request_size = request_size
        self.output_dtype = output_dtype
        self.fallbacks = 0
        self.last_error: str | None = None

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def features(self, indices: Sequence[int]) -> torch.Tensor:
        """Features of ``indices``, in their order (computed here when the server fails, the
        failure counted in ``fallbacks`` and kept in ``last_error``)."""
        feats, error = features_of(self.net, self.data, [int(i) for i in indices], self.split,
                                   self.server, self.request_size, self.output_dtype)
        if error is not None:
            self.fallbacks += 1
            self.last_error = error
        return feats

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        feats = self.features(indices)
        if self.labels is None:
            return list(feats)
        return [(f, int(self.labels[i])) for f, i in zip(feats, indices, strict=True)]

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]
