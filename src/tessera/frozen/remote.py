"""The client's side of a registered model: :class:`FrozenModel` holds the same weights as the
server (sha256 checked against the server's ``/v1/info``), computes any layers locally, and
asks the server for the features of layers ``1..s`` of samples of an array it serves.

>>> import tempfile
>>> from tessera.frozen.models import init_model
>>> folder = tempfile.mkdtemp()
>>> spec = init_model("resnet18", folder, seed=0, name="r18")
>>> net = FrozenModel.local(spec, folder)
>>> net.index("layer4.0"), net.layers[10].shape
(11, (512, 7, 7))
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tessera._sync import run_sync
from tessera.config import RetryPolicy
from tessera.errors import (
    CorruptDataError,
    FeatureMismatchError,
    InvalidArgumentError,
    ProtocolError,
    PushdownError,
    TesseraError,
)
from tessera.frozen.arch.base import Staged
from tessera.frozen.inventory import LayerInfo, layer_infos
from tessera.frozen.manifest import InputSpec, ModelSpec
from tessera.frozen.weights import load_model, sha256_file
from tessera.pushdown.client import PushdownClient
from tessera.pushdown.framing import ReadResponse
from tessera.pushdown.infer_items import Augment, InferHeader, InferRequest, Region

#: features agree when ``max|a - b| <= RTOL * max|b|`` (measured worst: 1.6e-6;
#: docs/design/frozen-measurements.md)
RTOL = {"<f4": 1e-4, "<f2": 1e-2}


@dataclasses.dataclass(frozen=True)
class Features:
    """Features of some samples from the server: the array and the response's header."""

    features: np.ndarray
    header: InferHeader
    server_s: float
    nbytes: int


class FrozenModel:
    """A registered model with its weights loaded here, and optionally the pushdown server
    that hosts the same weights."""

    def __init__(self, spec: ModelSpec, model: Staged, server: PushdownClient | None = None,
                 folder: str | Path | None = None) -> None:
        self.spec = spec
        self.model = model.train(False)  # eval mode: BatchNorm statistics frozen
        self.server = server
        #: where the weights file lies here (``None``: unknown)
        self.folder = Path(folder) if folder is not None else None
        self.layers: tuple[LayerInfo, ...] = layer_infos(spec.arch, spec.num_classes,
                                                         spec.input.sample_shape)

    @classmethod
    def local(cls, spec: ModelSpec, folder: str | Path) -> FrozenModel:
        """The model of ``spec`` with the weights in ``folder`` (no server)."""
        return cls(spec, load_model(spec, folder), folder=folder)

    @classmethod
    def from_server(cls, url: str | PushdownClient, name: str, weights: str | Path, *,
                    token: str | None = None) -> FrozenModel:
        """The model ``name`` the server at ``url`` hosts (architecture, input and sha256
        from its ``/v1/info``), with the same weights read from the local file ``weights``;
        raises :class:`~tessera.errors.FeatureMismatchError` when the file's sha256 is not
        the server's (features would differ)."""
        client = one_server(url, token, "a frozen model is served by")
        info = run_sync(client.info())
        models = {m.get("name"): m for m in info.get("models", []) if isinstance(m, dict)}
        if name not in models:
            raise PushdownError(f"pushdown server {client.url} hosts no model {name!r}; it "
                                f"hosts: {', '.join(sorted(map(str, models))) or 'none'}", 404)
        m = models[name]
        path = Path(weights).expanduser()
        sha = sha256_file(path)
        if sha != m["weights_sha256"]:
            raise FeatureMismatchError(
                f"weights {path} (sha256 {sha[:12]}...) are not the ones {client.url} runs for "
                f"{name} ({m['weights_sha256'][:12]}...); features would differ")
        inp = InputSpec.from_json(m["input"], f"{client.url}/v1/info")
        spec = ModelSpec(name, m["arch"], path.name, sha, int(m["num_classes"]), inp,
                         int(m["max_split"]))
        return cls(spec, load_model(spec, path.parent, verify=False), client, path.parent)

    # -- description -------------------------------------------------------------------------
    def load_seconds(self, splits: list[int]) -> dict[int, float]:
        """Seconds to load the prefix of each split here (best of two), to scale the
        server's measured load to other splits; empty without the weights file."""
        import time

        if self.folder is None:
            return {}
        out = {}
        for s in splits:
            best = float("inf")
            for _ in range(2):
                t = time.perf_counter()
                load_model(self.spec, self.folder, s, verify=False)
                best = min(best, time.perf_counter() - t)
            out[s] = best
        return out

    def inventory(self) -> list[str]:
        """The layers' names (index 1 first)."""
        return [i.name for i in self.layers]

    def index(self, layer: str | int) -> int:
        """The 1-based index of ``layer`` (a name or an index, checked)."""
        if isinstance(layer, int) and not isinstance(layer, bool):
            if not 1 <= layer <= len(self.layers):
                raise InvalidArgumentError(f"layer {layer} is outside 1..{len(self.layers)} of "
                                           f"{self.spec.name}")
            return layer
        return self.model.index(str(layer))

    @property
    def max_split(self) -> int:
        """The last layer the server runs for this model."""
        return self.spec.max_split or len(self.layers) - 1

    # -- computing ---------------------------------------------------------------------------
    def normalise(self, stored: np.ndarray) -> torch.Tensor:
        """Stored samples ``(n, C, H, W)`` as the model's float32 input (the manifest's
        scale, mean and std, exactly as the server does)."""
        return self.spec.input.normalise(stored)

    def forward_range(self, h: torch.Tensor, first: int, last: int) -> torch.Tensor:
        """Layers ``first..last`` (1-based, inclusive) on ``h``."""
        for _, fn in self.model.layers()[first - 1:last]:
            h = fn(h)
        return h

    def local_features(self, stored: np.ndarray, split: int) -> torch.Tensor:
        """Layers ``1..split`` computed here, in eval mode under ``inference_mode``."""
        with torch.inference_mode():
            return self.forward_range(self.normalise(stored), 1, split)

    def local_crop_features(self, data: Any, samples: list[int], split: int, *,
                            regions: tuple[Region, ...] | None = None,
                            augment: Augment | None = None) -> torch.Tensor:
        """Layers ``1..split`` computed here on crops of ``samples`` of the array ``data``
        (explicit ``regions`` or seeded ``augment``), made as the server makes them
        (:mod:`tessera.frozen.inputs`): what :meth:`remote_features` with the same crops
        returns."""
        from tessera.frozen.inputs import cropped_inputs

        with torch.inference_mode():
            x = cropped_inputs(data, samples, self.spec.input, regions, augment)
            return self.forward_range(x, 1, split)

    async def remote_features(self, array: str, samples: list[int], split: int, *,
                              cos_batch: int | None = None, output_dtype: str = "<f4",
                              timings: str = "phases", record: Any = None,
                              regions: tuple[Region, ...] | None = None,
                              augment: Augment | None = None) -> Features:
        """Layers ``1..split`` of ``samples`` of the array at ``array`` (below the server's
        root) computed by the server, of crops of them with ``regions`` (one
        ``(top, left, height, width)`` per sample) or ``augment`` (seeded random crops and
        flips), resized to the model's input on the server; raises
        :class:`~tessera.errors.PushdownError`."""
        if self.server is None:
            raise PushdownError(f"{self.spec.name} has no pushdown server")
        req = InferRequest(self.spec.name, split, array, tuple(int(s) for s in samples), 0,
                           self.spec.sha256, cos_batch, output_dtype, timings,
                           stream=self.server.config.stream, regions=regions,
                           augment=augment)
        resp: ReadResponse = await self.server.infer(req, record)
        got = resp.results[0]
        if not isinstance(got, dict) or "features" not in got:
            raise PushdownError(f"pushdown server {self.server.url} answered no features")
        feats = got["features"]
        want = (len(samples), *self.layers[split - 1].shape)
        if feats.shape != want:
            raise PushdownError(f"pushdown server {self.server.url} answered features of "
                                f"shape {feats.shape}, expected {want}")
        try:
            header = InferHeader.from_extra(resp.extra)
        except ProtocolError as err:
            raise PushdownError(f"pushdown server {self.server.url}: {err}") from None
        return Features(feats, header, resp.server_s, feats.nbytes)

    def compare(self, remote: np.ndarray, local: torch.Tensor, split: int,
                output_dtype: str = "<f4", server_sha256: str | None = None) -> float:
        """The error of ``remote`` against ``local`` relative to ``max|local|``; raises
        :class:`~tessera.errors.FeatureMismatchError` naming model, split, layer and weights
        when it is over the tolerance."""
        ref = local.numpy().astype(np.float64)
        diff = float(np.abs(remote.astype(np.float64) - ref).max()) if ref.size else 0.0
        scale = float(np.abs(ref).max()) if ref.size else 0.0
        rel = diff / scale if scale else diff
        if rel > RTOL[output_dtype]:
            raise FeatureMismatchError(
                f"features of {self.spec.name} ({self.spec.arch}) at split {split} "
                f"({self.layers[split - 1].name}) differ from local computation by {rel:.3g} "
                f"of their largest value (tolerance {RTOL[output_dtype]:g}); weights sha256 "
                f"here {self.spec.sha256[:12]}..., server "
                f"{(server_sha256 or '?')[:12]}...; likely cause: other "
                "weights on one side, or frozen layers run in train mode (BatchNorm)")
        return rel


def one_server(pushdown: Any, token: str | None = None,
               who: str = "frozen-layer pushdown needs") -> PushdownClient:
    """``pushdown`` (a URL or a :class:`~tessera.pushdown.client.PushdownClient`) as one
    client; a list or a comma-joined set of servers is refused naming ``who`` asked: fleets
    serve array reads only.

    >>> try:
    ...     one_server("http://a:1,http://b:1")
    ... except InvalidArgumentError as err:
    ...     print(str(err)[:60])
    frozen-layer pushdown needs one pushdown server (a URL or a
    """
    if isinstance(pushdown, PushdownClient):
        return pushdown
    if isinstance(pushdown, str) and "," not in pushdown:
        return PushdownClient(pushdown, token)
    raise InvalidArgumentError(f"{who} one pushdown server (a URL or a PushdownClient), got "
                               f"{pushdown!r:.120}; fleets of servers serve array reads only "
                               "(docs/scale.md)")


def fatal(err: PushdownError) -> TesseraError | None:
    """What an infer request's failure means when no other server or local computation
    should paper over it, as the error to raise: a damaged stored input (422) is a
    :class:`~tessera.errors.CorruptDataError`, other weights on the server (409) a
    :class:`~tessera.errors.FeatureMismatchError`, an unknown model (404) the
    ``PushdownError`` itself; ``None`` for failures a caller may compute around
    (unreachable, busy, timeouts, other statuses).

    >>> fatal(PushdownError("x", 409)).__class__.__name__, fatal(PushdownError("y", 503))
    ('FeatureMismatchError', None)
    """
    typed: TesseraError
    if err.status == 422:
        typed = CorruptDataError(str(err))
    elif err.status == 409:
        typed = FeatureMismatchError(str(err))
    else:
        return err if err.status == 404 else None
    typed.__cause__ = err
    return typed


async def features_parts(net: FrozenModel, array: str, indices: list[int], split: int, *,
                         request_size: int = 128, output_dtype: str = "<f4",
                         timings: str = "phases", retry: RetryPolicy | None = None,
                         augment: Augment | None = None) -> list[Features]:
    """Layer-``split`` features of samples ``indices`` of the array at ``array`` (below the
    server's root) from ``net``'s server, in requests of ``request_size`` sent at once, in
    order: the one way the frozen engine asks (:func:`features_of`, ``SplitTrainer``).
    A request the server turns away as busy (503) is sent again after the seconds its
    ``Retry-After`` asked (else the ``retry`` policy's backoff: the storage layer's, by
    default its defaults), up to the policy's attempts; any other failure, and a busy server
    past them, raises :class:`~tessera.errors.PushdownError`. ``augment``: of seeded random
    crops of the samples (:meth:`FrozenModel.remote_features`)."""
    import asyncio
    import random

    policy = retry or RetryPolicy()
    rand = random.Random()

    async def one(chunk: list[int]) -> Features:
        attempt = 1
        while True:
            try:
                return await net.remote_features(array, chunk, split, timings=timings,
                                                 output_dtype=output_dtype, augment=augment)
            except PushdownError as err:
                if err.status != 503 or attempt >= policy.max_attempts:
                    raise
                await asyncio.sleep(err.retry_after_s if err.retry_after_s is not None
                                    else policy.backoff_s(attempt, rand.random()))
                attempt += 1

    return list(await asyncio.gather(*(one(indices[i:i + request_size])
                                       for i in range(0, len(indices), request_size))))


def features_of(net: FrozenModel, data: Any, indices: list[int], split: int,
                server: PushdownClient | None, request_size: int = 128,
                output_dtype: str = "<f4") -> tuple[torch.Tensor, str | None]:
    """Layer-``split`` features of samples ``indices`` of the array ``data``, in their order:
    from ``server`` in requests of ``request_size`` (at once), or computed here when there is
    no server or a request fails. Returns the features and the failure's text (``None``
    when the server answered). A damaged input, other weights or an unknown model raise
    (:func:`fatal`) instead of being computed around."""
    from tessera.storage.url import parse_store_url

    if server is not None:
        try:
            path = run_sync(server.array_path(parse_store_url(data.uri)))
            remote = net if net.server is server else FrozenModel(net.spec, net.model, server,
                                                                  net.folder)
            parts = run_sync(features_parts(remote, path, indices, split,
                                            request_size=request_size,
                                            output_dtype=output_dtype,
                                            retry=data.store.aio.config.retry))
            return collate([p.features for p in parts]).clone(), None
        except PushdownError as err:
            if (typed := fatal(err)) is not None:
                raise typed from err
            error = str(err)
    else:
        error = None
    return net.local_features(np.asarray(data.oindex[indices]), split).clone(), error


def collate(parts: list[np.ndarray]) -> torch.Tensor:
    """Features of several responses as one float32 tensor, in order (responses are
    read-only views of their bodies; ``cat`` copies them once)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The given NumPy array is not writable")
        with torch.inference_mode():
            return torch.cat([torch.from_numpy(p).to(torch.float32) for p in parts])
