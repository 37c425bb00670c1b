"""Profiling a split (the paper's epoch 0): what the frozen engine measures to plan, apart
from any training loop.

:class:`SplitProfiler` holds the measurements -- a link probe, the server's per-layer and
per-sample times at the freeze point, the client's per-layer times at the earliest split
its memory allows, the training step's time -- and turns them into a calibrated
:class:`~tessera.frozen.planner.SplitProfile`. :func:`run_pipelined` runs an epoch's
iterations with the next ones' requests in flight, timing them as the calibration needs.
``SplitTrainer`` profiles while it trains its epoch 0 with both;
:func:`profile_split` (``tessera model profile``) runs the same schedule without training:
the trained layers' forward and backward are timed, no optimizer steps.

The schedule (reconstructed from the paper's prose, docs/frozen.md): the first half of the
epoch's iterations at ``s = F``, the second half at the earliest feasible split.
"""

from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from tessera._sync import run_sync
from tessera.frozen.inventory import FLOAT_BYTES, peak_bytes_per_sample
from tessera.frozen.planner import SplitProfile, calibrate
from tessera.frozen.remote import Features, FrozenModel, collate, features_parts
from tessera.frozen.weights import prefix_keys

#: ``(split, seconds)`` per iteration.
Timings = list[tuple[int, float]]


class TrainedTail(nn.Module):
    """Layers ``F+1..L`` of a copy of the model (trainable), then ``head`` in place of the
    last layer when given (it receives the previous layer's output flattened to ``(B, -1)``,
    as every model's own last layer does)."""

    def __init__(self, net: FrozenModel, freeze: int, head: nn.Module | None) -> None:
        super().__init__()
        self.body = copy.deepcopy(net.model)
        self.freeze = freeze
        self.last = len(net.layers) - (1 if head is not None else 0)
        self.head = head
        frozen = prefix_keys(self.body, freeze)
        used = set(self.body.state_dict()) - frozen
        if head is not None:
            used -= set(prefix_keys(self.body, len(net.layers))) - set(
                prefix_keys(self.body, len(net.layers) - 1))
        self._trainable = [p for n, p in self.body.named_parameters() if n in used]
        for p in self.body.parameters():
            p.requires_grad_(False)
        for p in self._trainable:
            p.requires_grad_(True)
        self.body.train(False)  # eval mode: BatchNorm statistics frozen

    def trainable(self) -> list[nn.Parameter]:
        """The parameters an optimizer trains."""
        own = list(self.head.parameters()) if self.head is not None else []
        return [*self._trainable, *own]

    def set_train(self, mode: bool) -> None:
        """Train mode for the trained layers only (the frozen copy stays in eval)."""
        for _, fn in self.body.layers()[self.freeze:self.last]:
            if isinstance(fn, nn.Module):
                fn.train(mode)
        if self.head is not None:
            self.head.train(mode)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for _, fn in self.body.layers()[self.freeze:self.last]:
            h = fn(h)
        if self.head is None:
            return h
        out: torch.Tensor = self.head(torch.flatten(h, 1) if h.ndim > 2 else h)
        return out


class SplitProfiler:
    """The measurements of one profiling epoch and the profile they make.

    Args:
        net: the model; ``freeze``: the last frozen layer (1-based index).
        data: the array of stored samples (its dtype sizes a stored sample).
        batch_size, request_size: the training batch and samples per request.
        client_memory_bytes: the client's budget (which splits it can take).
        prefetch: iterations in flight ahead of the one computing.
        output_dtype: the features' wire dtype.
        server_info: the server's ``/v1/info`` (its infer concurrency, memory, cores and
            limits); empty without a server.
    """

    def __init__(self, net: FrozenModel, freeze: int, data: Any, *, batch_size: int,
                 request_size: int, client_memory_bytes: int, prefetch: int,
                 output_dtype: str, server_info: dict[str, Any]) -> None:
        self.net, self.freeze, self.data = net, freeze, data
        self.batch_size, self.request_size = batch_size, request_size
        self.client_memory_bytes, self.prefetch = client_memory_bytes, prefetch
        self.output_dtype = output_dtype
        self.server_info = server_info
        self.measured: dict[str, list[float]] = {}
        #: What :meth:`profile` calibrated on: the measured profile before calibration and
        #: the epoch's times (to replay the calibration and the choice).
        self.calibrated_on: tuple[SplitProfile, EpochTimes] | None = None
        #: ``(bytes per second, round trip seconds)`` from :meth:`probe_link`.
        self.link: tuple[float, float] = (1e12, 0.0)

    # -- what the client can take ------------------------------------------------------
    def client_peak(self) -> tuple[int, ...]:
        """The client's peak bytes per sample at each split ``0..F``."""
        layers, shape = self.net.layers, self.net.spec.input.sample_shape
        tail = 2 * sum(i.nbytes for i in layers[self.freeze:])
        return tuple(peak_bytes_per_sample(layers, shape, s + 1, self.freeze) + tail
                     for s in range(self.freeze + 1))

    def earliest_feasible(self) -> int:
        """The earliest split whose batch fits the client's memory (``F`` when none)."""
        for s, peak in enumerate(self.client_peak()):
            if self.batch_size * peak <= self.client_memory_bytes:
                return s
        return self.freeze

    def schedule(self, iterations: int) -> list[int]:
        """The split of each iteration of the profiling epoch: the first half at ``F``, the
        rest at the earliest feasible split."""
        half = max(1, iterations // 2)
        return [self.freeze] * half + [self.earliest_feasible()] * (iterations - half)

    # -- measuring ------------------------------------------------------------------------
    def note(self, key: str, value: float) -> None:
        """One measured value (seconds per sample, per byte or per request)."""
        self.measured.setdefault(key, []).append(value)

    def note_server(self, parts: list[Features], split: int) -> None:
        """The server's own times in infer answers at ``split`` (asked with layer timings)."""
        for p in parts:
            n = len(p.features)
            layers = p.header.layers or []
            for k, t in enumerate(layers[:split], 1):
                self.note(f"server{k}", float(t) / n)
            ph = p.header.phases
            self.note("server_sample", (float(ph.get("read", 0)) + float(ph.get("prep", 0))) / n)
            self.note("server_load", float(ph.get("load", 0)))
            self.note("server_byte", float(ph.get("copy", 0)) / max(1, p.nbytes))

    def timed_layers(self, h: torch.Tensor, first: int) -> torch.Tensor:
        """Layers ``first..F`` on ``h``, each one's seconds per sample noted."""
        n = h.shape[0]
        ks = range(first, self.freeze + 1)
        seconds = [0.0] * len(ks)
        h = timed_layers([functools.partial(self.net.forward_range, first=k, last=k)
                          for k in ks], h, seconds)
        for k, s in zip(ks, seconds, strict=True):
            self.note(f"client{k}", s / n)
        return h

    def probe_link(self, remote: Callable[[list[int], int, str], list[Features]]) -> None:
        """Bandwidth and round trip from requests at split 1 of 1 and of several samples
        (``remote(samples, split, timings)``): ``(wall - server seconds)`` is
        ``rtt + bytes / bandwidth``."""
        n = min(self.request_size, 8, self.data.shape[0])
        points = []
        for count in (1, n, 1, n):
            t = time.perf_counter()
            got = remote(list(range(count)), 1, "phases")[0]
            wall = time.perf_counter() - t
            points.append((got.nbytes, max(0.0, wall - got.server_s)))
        small = min(p[1] for p in points[0::2])
        large = min(p[1] for p in points[1::2])
        extra = points[1][0] - points[0][0]
        self.link = (extra / (large - small) if large > small and extra > 0 else 1e12,
                     max(small - points[0][0] / (extra / (large - small)) if large > small
                         and extra > 0 else small, 0.0))

    # -- the profile ----------------------------------------------------------------------
    def profile(self, times: EpochTimes) -> SplitProfile:
        """The measured profile, calibrated on the epoch's times (:func:`calibrate`)."""
        measured = self._measured_profile()
        self.calibrated_on = (measured, times)
        return calibrate(measured, self.batch_size, self.request_size, self.data.shape[0],
                         self.earliest_feasible(), times.durations, times.busy,
                         times.fetches)

    def _load_profile(self) -> tuple[float, ...]:
        """The server's load seconds per request for splits 1..F: measured at F, scaled to
        the other splits by how long their prefixes take to load here (a + b x bytes fitted
        on splits 1 and F); zeros when the server keeps its models loaded."""
        seen = self.measured.get("server_load", [])
        at_f = float(np.median(seen)) if seen else 0.0
        if at_f < 1e-3:
            return (0.0,) * self.freeze
        here = self.net.load_seconds([1, self.freeze])
        if len(here) < 2 or here[self.freeze] <= 0:
            return (at_f,) * self.freeze
        model = self.net.model
        sizes = [sum(model.state_dict()[k].numel() for k in prefix_keys(model, s))
                 for s in range(1, self.freeze + 1)]
        slope = (here[self.freeze] - here[1]) / max(1, sizes[-1] - sizes[0])
        base = here[1] - slope * sizes[0]
        return tuple(at_f * max(0.0, base + slope * n) / here[self.freeze] for n in sizes)

    def _measured_profile(self) -> SplitProfile:
        m = self.measured

        def mean(key: str) -> float:
            v = m.get(key)
            return float(np.median(v)) if v else math.nan

        layers = self.net.layers
        names = tuple(i.name for i in layers)
        itemsize = 2 if self.output_dtype == "<f2" else 4
        out_bytes = tuple(i.nbytes // FLOAT_BYTES * itemsize for i in layers)
        client = tuple(mean(f"client{k}") if k <= self.freeze else 0.0
                       for k in range(1, len(layers) + 1))
        bandwidth, rtt = self.link
        shape = self.net.spec.input.sample_shape
        stored_bytes = math.prod(shape) * self.data.dtype.itemsize
        server_peak = tuple(peak_bytes_per_sample(layers, shape, 1, s)
                            for s in range(1, self.freeze + 1))
        infer = self.server_info.get("infer", {})
        limits = self.server_info.get("limits", {})
        return SplitProfile(
            names=names, out_bytes=out_bytes, input_bytes=stored_bytes, freeze=self.freeze,
            server_fwd_s=tuple(mean(f"server{k}") for k in range(1, self.freeze + 1)),
            client_fwd_s=client, train_s=mean("train"), bandwidth=bandwidth, rtt_s=rtt,
            server_sample_s=mean("server_sample"), server_byte_s=mean("server_byte"),
            client_byte_s=collate_cost(),
            client_decode_s=mean("decode") if "decode" in m else 0.0,
            concurrency=int(infer.get("concurrency", 4)),
            max_output_bytes=int(limits.get("max_output_bytes", 256 << 20)),
            server_memory_bytes=int(infer.get("memory_bytes", 2 << 30)),
            server_peak_bytes=server_peak, client_peak_bytes=self.client_peak(),
            client_memory_bytes=self.client_memory_bytes, prefetch=self.prefetch,
            server_cores=int(infer.get("cores", 0)), server_load_s=self._load_profile())


def collate_cost() -> float:
    """The client's seconds per received byte of :func:`~tessera.frozen.remote.collate` (a
    machine's constant, measured on 4 x 8 MiB: Table 1's "linear in data size" client
    phases)."""
    parts = [np.ones((1 << 21,), np.float32) for _ in range(4)]
    collate(parts)
    t = time.perf_counter()
    collate(parts)
    return (time.perf_counter() - t) / (4 << 23)


@dataclasses.dataclass
class EpochTimes:
    """What :func:`run_pipelined` timed.

    Attributes:
        durations: each iteration's ``(split, seconds)`` once the pipeline is full (the
            iteration two before ran at the same split).
        busy: the client's compute ``(split, seconds)`` of each iteration.
        fetches: ``(split, seconds)`` of each full batch's fetch (the stored samples, or
            its features from the server), in iteration order, from when it started or
            the previous fetch at its split ended, whichever came later, to its end: a
            batch's time on the link and server where fetches overlap (two in flight on a
            link-bound pipeline each take about twice the link's time per batch). The first
            iteration's is the first batch's latency from a cold start.
        wait: the seconds the compute waited for fetches.
    """

    durations: Timings
    busy: Timings
    fetches: Timings
    wait: float


def own_time(start: float, end: float, before: float) -> float:
    """A fetch's own seconds: from its ``start``, or the end of the fetch before it on the
    same link (``before``) if later, to its ``end``; all of it when it ended first.

    >>> own_time(0.0, 1.0, -math.inf), own_time(0.5, 1.5, 1.0), own_time(0.5, 0.8, 1.0)
    (1.0, 0.5, 0.30000000000000004)
    """
    return end - max(start, before) if end > before else end - start


def run_pipelined(batches: Sequence[list[int]], schedule: Sequence[int], prefetch: int,
                  fetch: Callable[[list[int], int], Any],
                  compute: Callable[[int, Any], None]) -> EpochTimes:
    """Run an epoch's iterations: ``fetch(batch, split)`` on a prefetch thread, the next
    ``prefetch`` iterations' in flight while ``compute(i, fetched)`` runs here, each timed
    as the calibration needs (:class:`EpochTimes`)."""
    out = EpochTimes([], [], [], 0.0)
    full = len(batches[0]) if batches else 0

    ended: dict[int, float] = {}  # split -> when its latest fetch ended

    def timed(i: int) -> tuple[Any, float, float]:
        t = time.perf_counter()
        got = fetch(batches[i], schedule[i])
        return got, t, time.perf_counter()

    with concurrent.futures.ThreadPoolExecutor(
            prefetch + 1, thread_name_prefix="tessera-split") as pool:
        pending = [pool.submit(timed, i) for i in range(min(prefetch + 1, len(batches)))]
        last = time.perf_counter()
        for i in range(len(batches)):
            tw = time.perf_counter()
            fetched, start, end = pending.pop(0).result()
            out.wait += time.perf_counter() - tw
            before = ended.get(schedule[i], -math.inf)
            if len(batches[i]) == full:
                out.fetches.append((schedule[i], own_time(start, end, before)))
            ended[schedule[i]] = max(end, before)
            nxt = i + prefetch + 1
            if nxt < len(batches):  # the next requests fly while this batch computes
                pending.append(pool.submit(timed, nxt))
            tc = time.perf_counter()
            compute(i, fetched)
            now = time.perf_counter()
            out.busy.append((schedule[i], now - tc))
            if i >= 2 and schedule[i] == schedule[i - 2]:  # the pipeline is full
                out.durations.append((schedule[i], now - last))
            last = now
    return out


def profile_split(net: FrozenModel, data: Any, freeze: int, *, samples: int,
                  batch_size: int = 128, request_size: int = 128, prefetch: int = 1,
                  client_memory_bytes: int = 16 << 30, output_dtype: str = "<f4",
                  ) -> tuple[SplitProfile, int, float]:
    """Profile ``net`` split at ``freeze`` on the first ``samples`` samples of ``data``
    through ``net``'s server without training (the profiling epoch's schedule: a link
    probe, half the iterations at ``F`` with the server's layer timings, half at the
    earliest feasible split with the client's; the model's own trained layers timed
    forward and backward, no optimizer step). Returns the profile, the samples profiled
    and the seconds taken. Raises :class:`~tessera.errors.PushdownError` when the server
    fails (a profile needs it)."""
    from tessera.errors import InvalidArgumentError
    from tessera.storage.url import parse_store_url

    server = net.server
    if server is None:
        raise InvalidArgumentError(f"profiling {net.spec.name} needs its pushdown server")
    if not 1 <= freeze < len(net.layers):
        raise InvalidArgumentError(f"freeze {freeze} leaves nothing to train: "
                                   f"{net.spec.name} has {len(net.layers)} layers")
    path = run_sync(server.array_path(parse_store_url(data.uri)))
    retry = data.store.aio.config.retry
    profiler = SplitProfiler(net, freeze, data, batch_size=batch_size,
                             request_size=request_size,
                             client_memory_bytes=client_memory_bytes, prefetch=prefetch,
                             output_dtype=output_dtype, server_info=run_sync(server.info()))
    tail = TrainedTail(net, freeze, None)
    tail.set_train(True)

    def remote(batch: list[int], split: int, timings: str) -> list[Features]:
        return run_sync(features_parts(net, path, batch, split, request_size=request_size,
                                       output_dtype=output_dtype, timings=timings,
                                       retry=retry))

    def fetch(batch: list[int], split: int) -> Any:
        if split == 0:
            return np.asarray(data.oindex[batch])
        return remote(batch, split, "layers" if split == freeze else "phases")

    def compute(i: int, fetched: Any) -> None:
        split = schedule[i]
        with torch.inference_mode():
            if split:
                h = collate([p.features for p in fetched])
                if split == freeze:
                    profiler.note_server(fetched, split)
            else:
                td = time.perf_counter()
                h = net.normalise(fetched)
                profiler.note("decode", (time.perf_counter() - td) / len(fetched))
            h = profiler.timed_layers(h, split + 1)
        h = h.clone()  # leave inference mode: the trained layers need autograd
        tt = time.perf_counter()
        for p in tail.trainable():
            p.grad = None
        tail(h).float().mean().backward()
        profiler.note("train", (time.perf_counter() - tt) / len(h))

    n = min(samples, data.shape[0])
    batches = [list(range(i, min(i + batch_size, n))) for i in range(0, n, batch_size)]
    t0 = time.perf_counter()
    profiler.probe_link(remote)
    schedule = profiler.schedule(len(batches))
    times = run_pipelined(batches, schedule, prefetch, fetch, compute)
    return profiler.profile(times), n, time.perf_counter() - t0


def timed_layers(layers: Sequence[Callable[[Any], Any]], h: Any, seconds: list[float]) -> Any:
    """Run ``layers`` in turn on ``h`` and return the output, adding each layer's wall
    seconds to ``seconds[k]`` (the one per-layer timing of client profiles and of the
    server's answers with layer timings)."""
    for k, fn in enumerate(layers):
        t = time.perf_counter()
        h = fn(h)
        seconds[k] += time.perf_counter() - t
    return h
