"""A model's inputs made from region crops of stored samples, the one recipe the server and
the client share: crop each sample (an explicit region, or a seeded random crop with an
optional horizontal flip: :class:`~tessera.pushdown.infer_items.Augment`), read every crop of
a request as one planned read (a union of hyperslabs: only the tiles under the crops are
fetched), normalise (:meth:`~tessera.frozen.manifest.InputSpec.normalise`), flip, and resize
to the model's input with bilinear interpolation (``align_corners=False``, no antialias).

A crop the size of the model's input is not resized, so a full-size region gives exactly the
features of the whole sample.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tessera.errors import UnprocessableError
from tessera.format.selection import Hyperslabs
from tessera.frozen.manifest import InputSpec
from tessera.pushdown.infer_items import Augment, Region

if TYPE_CHECKING:
    import torch

    from tessera.array.array import Array


def crop_boxes(samples: tuple[int, ...] | list[int], stored: tuple[int, ...],
               spec: InputSpec, regions: tuple[Region, ...] | None, augment: Augment | None,
               ) -> list[tuple[Region, bool]]:
    """Per sample, its crop ``(top, left, height, width)`` and whether it is flipped, checked
    against the stored sample's shape ``stored`` (``(C, H, W)``, ``C`` the model's
    channels); a crop outside it is an :class:`~tessera.errors.UnprocessableError` naming
    the sample.

    >>> crop_boxes([5], (3, 8, 8), InputSpec(), None, Augment(7, (4, 4)))[0][0][2:]
    (4, 4)
    """
    if len(stored) != 3 or stored[0] != spec.channels:
        raise UnprocessableError(f"stored samples of shape {stored} cannot be cropped for a "
                                 f"model input of (channels={spec.channels}, height, width)")
    height, width = stored[-2], stored[-1]
    out: list[tuple[Region, bool]] = []
    for i, sample in enumerate(samples):
        if augment is not None:
            if augment.crop[0] > height or augment.crop[1] > width:
                raise UnprocessableError(f"augment crop {augment.crop} is larger than the "
                                         f"stored samples ({height} x {width})")
            top, left, flip = augment.draw(int(sample), height, width)
            box: Region = (top, left, augment.crop[0], augment.crop[1])
        else:
            assert regions is not None
            box, flip = regions[i], False
        if box[0] + box[2] > height or box[1] + box[3] > width:
            raise UnprocessableError(f"region {list(box)} of sample {sample} lies outside its "
                                     f"{height} x {width}")
        out.append((box, flip))
    return out


def read_crops(arr: Array, samples: tuple[int, ...] | list[int],
               boxes: list[tuple[Region, bool]]) -> list[np.ndarray]:
    """The stored crops of ``samples`` (each ``(C, h, w)``), read as one union."""
    sels = [(int(s), slice(None), slice(t, t + h), slice(left, left + w))
            for s, ((t, left, h, w), _) in zip(samples, boxes, strict=True)]
    got: list[Any] = arr.read(Hyperslabs(sels))
    return [np.asarray(g) for g in got]


def prepare(crops: list[np.ndarray], flips: list[bool], spec: InputSpec) -> torch.Tensor:
    """The model's float32 input ``(n, C, H, W)`` from stored crops: normalised, flipped
    where asked, resized to the input's height and width when the crop differs. Crops of
    one shape (all of them, with ``augment``) go through each step together."""
    import torch
    import torch.nn.functional as F

    size = (spec.height, spec.width)
    out = torch.empty((len(crops), spec.channels, *size), dtype=torch.float32)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, crop in enumerate(crops):
        groups.setdefault(crop.shape, []).append(i)
    for shape, members in groups.items():
        x = spec.normalise(np.stack([crops[i] for i in members]))
        flipped = [k for k, i in enumerate(members) if flips[i]]
        if flipped:
            x[flipped] = x[flipped].flip(-1)
        if tuple(shape[-2:]) != size:
            x = F.interpolate(x, size=size, mode="bilinear", align_corners=False,
                              antialias=False)
        out[members] = x
    return out


def cropped_inputs(arr: Array, samples: tuple[int, ...] | list[int], spec: InputSpec,
                   regions: tuple[Region, ...] | None, augment: Augment | None,
                   ) -> torch.Tensor:
    """:func:`crop_boxes`, :func:`read_crops` and :func:`prepare` in one: the inputs the
    server makes for an infer request with ``regions`` or ``augment``."""
    boxes = crop_boxes(samples, tuple(arr.shape[1:]), spec, regions, augment)
    return prepare(read_crops(arr, samples, boxes), [f for _, f in boxes], spec)
