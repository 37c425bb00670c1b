"""The ``POST /v1/infer`` request of the pushdown wire (protocol 1): run the frozen layers
``1..split`` of a registered model on samples of an array below the served root.

Request body (JSON; every key but the optional ones is required, **unknown keys are refused**
so nothing like code or weights can ride along)::

    {"protocol": 1, "model": "resnet18-in1k", "split": 8,
     "input": {"array": "datasets/imagenet224u8", "samples": [17, 4, 99], "sample_dim": 0,
               "regions": [[top, left, height, width], ...],   # optional: one per sample
               "augment": {"seed": 7, "crop": [h, w], "flip": true}},  # optional
     "weights_sha256": "4e0c...",      # optional: 409 when the server's weights differ
     "cos_batch": 16,                  # optional: the server's batch (it may use less)
     "output_dtype": "<f4",            # optional: "<f4" (default) or "<f2" (lossy)
     "timings": "phases",              # optional: "phases" (default) or "layers"
     "stream": true}                   # optional: features sent as they are computed

``regions`` crop each sample (rows ``top..top+height``, columns ``left..left+width`` of its
last two dimensions) before it is normalised and resized to the model's input (bilinear);
``augment`` draws, per sample, a random ``crop`` and (with ``flip``) a horizontal flip from a
generator seeded by ``(seed, sample index)``, so the client can reproduce them
(:mod:`tessera.frozen.inputs`). Both need ``sample_dim`` 0 and exclude each other.

The response is the framing of :mod:`tessera.pushdown.framing` with one result holding the
buffer ``features`` ``(n, ...)`` in the request's sample order; the header adds ``phases``
(seconds per phase: ``queue``, ``read``, ``load``, ``prep``, ``forward``, ``copy``), ``layers``
(seconds per layer, with ``timings: "layers"``), ``cos_batch_used``, ``model_cache`` (``hit``
or ``miss``) and ``weights_sha256``: :class:`InferHeader`, written and read by its
``to_json`` / ``from_extra``. With ``"stream": true`` the answer is the framing's streamed
response instead: one record per sample (item ``i`` holds ``features`` of sample ``i``, shape
``(...)``), sent as the server computes each server batch, and the same header keys in its
end record; the server then holds one batch's activations and features at a time.

>>> body = encode_infer_request(InferRequest("r18", 4, "imgs", (3, 1)))
>>> req = parse_infer_request(body, Limits(), max_samples=512)
>>> req.model, req.split, req.samples, req.output_dtype
('r18', 4, (3, 1), '<f4')
>>> parse_infer_request(body.replace(b'"split"', b'"code": 1, "split"'), Limits(), 512)
Traceback (most recent call last):
tessera.errors.ProtocolError: unknown field(s) 'code' in the infer request; allowed: ...
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from tessera.pushdown.framing import (
    PROTOCOL_VERSION,
    LimitError,
    Limits,
    ProtocolError,
    array_path,
    is_int,
    load_document,
)

MODEL_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_SHA = re.compile(r"^[0-9a-f]{64}$")
OUTPUT_DTYPES = ("<f4", "<f2")
TIMINGS = ("phases", "layers")
_TOP = {"protocol", "model", "split", "input", "weights_sha256", "cos_batch", "output_dtype",
        "timings", "stream"}
_INPUT = {"array", "samples", "sample_dim", "regions", "augment"}
_AUGMENT = {"seed", "crop", "flip"}


@dataclasses.dataclass(frozen=True)
class Augment:
    """Seeded augmentation of each sample (see the module docs): a random ``crop`` of
    ``(height, width)`` and, with ``flip``, a horizontal flip with probability 1/2, drawn from
    ``numpy.random.default_rng((seed, sample))``."""

    seed: int
    crop: tuple[int, int]
    flip: bool = True

    def draw(self, sample: int, height: int, width: int) -> tuple[int, int, bool]:
        """``(top, left, flipped)`` for ``sample`` of a stored ``height x width``.

        >>> Augment(7, (4, 4)).draw(3, 8, 8) == Augment(7, (4, 4)).draw(3, 8, 8)
        True
        """
        import numpy as np

        rng = np.random.default_rng((self.seed, sample))
        top = int(rng.integers(0, height - self.crop[0] + 1))
        left = int(rng.integers(0, width - self.crop[1] + 1))
        return top, left, bool(self.flip and rng.random() < 0.5)

    def for_epoch(self, epoch: int) -> Augment:
        """The augmentation of training epoch ``epoch``: the same crop and flip with a seed
        drawn from ``(seed, epoch)`` (``numpy.random.SeedSequence``), so every epoch sees
        other crops and a job run again sees the same ones.

        >>> a = Augment(7, (4, 4))
        >>> a.for_epoch(1) == a.for_epoch(1), a.for_epoch(1) == a.for_epoch(2)
        (True, False)
        """
        import numpy as np

        state = np.random.SeedSequence((self.seed, epoch)).generate_state(1, np.uint64)[0]
        return dataclasses.replace(self, seed=int(state) >> 1)  # < 2**63, as the wire takes


#: A sample's crop: ``(top, left, height, width)``.
Region = tuple[int, int, int, int]


@dataclasses.dataclass(frozen=True)
class InferRequest:
    """One frozen-prefix request: model ``model`` runs layers ``1..split`` on samples
    ``samples`` (indices along ``sample_dim``) of the array at ``array`` below the root."""

    model: str
    split: int
    array: str
    samples: tuple[int, ...]
    sample_dim: int = 0
    weights_sha256: str | None = None
    cos_batch: int | None = None
    output_dtype: str = "<f4"
    timings: str = "phases"
    stream: bool = False
    regions: tuple[Region, ...] | None = None
    augment: Augment | None = None


def encode_infer_request(req: InferRequest) -> bytes:
    """The JSON body of ``req``."""
    inp: dict[str, Any] = {"array": req.array, "samples": list(req.samples),
                           "sample_dim": req.sample_dim}
    if req.regions is not None:
        inp["regions"] = [list(r) for r in req.regions]
    if req.augment is not None:
        inp["augment"] = {"seed": req.augment.seed, "crop": list(req.augment.crop),
                          "flip": req.augment.flip}
    doc: dict[str, Any] = {"protocol": PROTOCOL_VERSION, "model": req.model, "split": req.split,
                           "input": inp}
    if req.weights_sha256 is not None:
        doc["weights_sha256"] = req.weights_sha256
    if req.cos_batch is not None:
        doc["cos_batch"] = req.cos_batch
    if req.output_dtype != "<f4":
        doc["output_dtype"] = req.output_dtype
    if req.timings != "phases":
        doc["timings"] = req.timings
    if req.stream:
        doc["stream"] = True
    return json.dumps(doc, separators=(",", ":")).encode()


def _unknown(raw: dict[str, Any], known: set[str], where: str) -> None:
    extra = sorted(set(raw) - known)
    if extra:
        raise ProtocolError(f"unknown field(s) {', '.join(map(repr, extra))} in {where}; "
                            f"allowed: {', '.join(sorted(known))}")


def parse_infer_request(body: bytes, limits: Limits, max_samples: int) -> InferRequest:
    """Check an infer request body; raises :class:`ProtocolError` (400), ``ForbiddenKeyError``
    (403, an array outside the root) or ``LimitError`` (413, too many samples) naming the
    field. Whether the model exists and the split fits it is the server's check."""
    doc = load_document(body, limits)
    _unknown(doc, _TOP, "the infer request")
    model = doc.get("model")
    if not isinstance(model, str) or not MODEL_NAME.match(model):
        raise ProtocolError(f"model must be a registered model's name "
                            f"({MODEL_NAME.pattern}), got {model!r}")
    split = doc.get("split")
    if not is_int(split) or split < 1:
        raise ProtocolError(f"split must be a positive integer (the last layer the server "
                            f"runs), got {split!r}")
    inp = doc.get("input")
    if not isinstance(inp, dict):
        raise ProtocolError("input must be an object {array, samples, sample_dim}")
    _unknown(inp, _INPUT, "input")
    array = array_path(inp, "input")
    samples = inp.get("samples")
    if not isinstance(samples, list) or not samples:
        raise ProtocolError("input.samples must be a non-empty list of sample indices")
    if len(samples) > max_samples:
        raise LimitError(f"{len(samples)} samples in one infer request; this server takes at "
                         f"most {max_samples}")
    if not all(is_int(s) and 0 <= s < 1 << 62 for s in samples):
        raise ProtocolError("input.samples must hold non-negative integers")
    sample_dim = inp.get("sample_dim", 0)
    if not is_int(sample_dim) or not 0 <= sample_dim < 32:
        raise ProtocolError(f"input.sample_dim must be an integer in 0..31, got "
                            f"{sample_dim!r}")
    sha = doc.get("weights_sha256")
    if sha is not None and (not isinstance(sha, str) or not _SHA.match(sha)):
        raise ProtocolError("weights_sha256 must be 64 lowercase hex digits")
    cos = doc.get("cos_batch")
    if cos is not None and (not is_int(cos) or not 1 <= cos <= 4096):
        raise ProtocolError(f"cos_batch must be an integer in 1..4096, got {cos!r}")
    dtype = doc.get("output_dtype", "<f4")
    if dtype not in OUTPUT_DTYPES:
        raise ProtocolError(f"output_dtype must be one of {', '.join(OUTPUT_DTYPES)}, got "
                            f"{dtype!r}")
    timings = doc.get("timings", "phases")
    if timings not in TIMINGS:
        raise ProtocolError(f"timings must be one of {', '.join(TIMINGS)}, got {timings!r}")
    stream = doc.get("stream", False)
    if not isinstance(stream, bool):
        raise ProtocolError(f"stream must be true or false, got {stream!r}")
    regions, augment = _regions(inp, len(samples)), _augment(inp)
    if (regions is not None or augment is not None) and sample_dim != 0:
        raise ProtocolError("input.regions and input.augment need input.sample_dim 0")
    if regions is not None and augment is not None:
        raise ProtocolError("input.regions and input.augment exclude each other (augment "
                            "draws its own crops)")
    return InferRequest(model, split, array, tuple(samples), sample_dim, sha, cos, dtype,
                        timings, stream, regions, augment)


def _box(v: Any, n: int, low: int) -> bool:
    return isinstance(v, list) and len(v) == n and all(is_int(x) and low <= x < 1 << 31
                                                       for x in v)


def _regions(inp: dict[str, Any], count: int) -> tuple[Region, ...] | None:
    raw = inp.get("regions")
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != count:
        raise ProtocolError(f"input.regions must be a list of one [top, left, height, width] "
                            f"per sample ({count})")
    out = []
    for i, r in enumerate(raw):
        if not _box(r, 4, 0) or r[2] < 1 or r[3] < 1:
            raise ProtocolError(f"input.regions[{i}] must be [top, left, height, width]: "
                                f"integers >= 0, height and width >= 1, got {r!r:.60}")
        out.append((r[0], r[1], r[2], r[3]))
    return tuple(out)


def _augment(inp: dict[str, Any]) -> Augment | None:
    raw = inp.get("augment")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ProtocolError("input.augment must be an object {seed, crop, flip}")
    _unknown(raw, _AUGMENT, "input.augment")
    seed, crop, flip = raw.get("seed"), raw.get("crop"), raw.get("flip", True)
    if not is_int(seed) or not 0 <= seed < 1 << 63:
        raise ProtocolError(f"input.augment.seed must be a non-negative integer, got {seed!r}")
    if not isinstance(crop, list) or not _box(crop, 2, 1):
        raise ProtocolError(f"input.augment.crop must be [height, width] of positive "
                            f"integers, got {crop!r:.60}")
    if not isinstance(flip, bool):
        raise ProtocolError(f"input.augment.flip must be true or false, got {flip!r}")
    return Augment(seed, (crop[0], crop[1]), flip)



@dataclasses.dataclass
class InferHeader:
    """The keys an infer response's header adds (see the module docs), typed.

    >>> h = InferHeader({"read": 0.5}, 16, "hit", "ab" * 32)
    >>> InferHeader.from_extra(h.to_json()) == h
    True
    >>> InferHeader.from_extra({"phases": {}, "cos_batch_used": "16"})
    Traceback (most recent call last):
    tessera.errors.ProtocolError: infer response header: cos_batch_used must be an integer, got '16'
    """

    phases: dict[str, float]
    cos_batch_used: int
    model_cache: str
    weights_sha256: str
    layers: list[float] | None = None

    def to_json(self) -> dict[str, Any]:
        """The header's keys as the framing writes them."""
        out: dict[str, Any] = {"phases": dict(self.phases), "cos_batch_used": self.cos_batch_used,
                               "model_cache": self.model_cache,
                               "weights_sha256": self.weights_sha256}
        if self.layers is not None:
            out["layers"] = list(self.layers)
        return out

    @classmethod
    def from_extra(cls, extra: dict[str, Any]) -> InferHeader:
        """The header read back from a response's extra keys; a
        :class:`~tessera.pushdown.framing.ProtocolError` names what does not fit."""
        where = "infer response header"
        phases = extra.get("phases", {})
        if not isinstance(phases, dict) or not all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
                for k, v in phases.items()):
            raise ProtocolError(f"{where}: phases must map names to seconds, got {phases!r:.80}")
        used = extra.get("cos_batch_used", 0)
        if isinstance(used, bool) or not isinstance(used, int):
            raise ProtocolError(f"{where}: cos_batch_used must be an integer, got {used!r}")
        layers = extra.get("layers")
        if layers is not None and (not isinstance(layers, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in layers)):
            raise ProtocolError(f"{where}: layers must be a list of seconds, got "
                                f"{layers!r:.80}")
        return cls({k: float(v) for k, v in phases.items()}, used,
                   str(extra.get("model_cache", "")), str(extra.get("weights_sha256", "")),
                   None if layers is None else [float(v) for v in layers])
