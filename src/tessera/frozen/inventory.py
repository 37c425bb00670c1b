"""A model's layers with the shape and size of each one's output per sample, from a
meta-device forward pass (no memory, no compute), and the memory estimate the server and the
planner use: a forward pass over layers ``1..s`` peaks at the layer with the largest input
plus output (the paper's estimator, section 4.3), doubled as a margin."""

from __future__ import annotations

import dataclasses
import functools
import math

import torch

from tessera.frozen.weights import meta_model

FLOAT_BYTES = 4
MEMORY_MARGIN = 2


@dataclasses.dataclass(frozen=True)
class LayerInfo:
    """Layer ``index`` (1-based) ``name``: its output's shape for one sample."""

    index: int
    name: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        """float32 bytes of one sample's output."""
        return math.prod(self.shape) * FLOAT_BYTES


@functools.lru_cache(maxsize=64)
def layer_infos(arch: str, num_classes: int, sample_shape: tuple[int, ...],
                ) -> tuple[LayerInfo, ...]:
    """Every layer of ``arch`` with its per-sample output shape for inputs of
    ``sample_shape`` (``(C, H, W)``).

    >>> [(i.name, i.shape) for i in layer_infos("resnet18", 1000, (3, 64, 64))][10:12]
    [('layer4.0', (512, 2, 2)), ('layer4.1', (512, 2, 2))]
    """
    model = meta_model(arch, num_classes)
    x = torch.empty(1, *sample_shape, device="meta")
    out = []
    with torch.no_grad():
        for i, (name, fn) in enumerate(model.layers(), 1):
            x = fn(x)
            out.append(LayerInfo(i, name, tuple(x.shape[1:])))
    return tuple(out)


def peak_bytes_per_sample(infos: tuple[LayerInfo, ...], sample_shape: tuple[int, ...],
                          first: int, last: int) -> int:
    """Estimated activation memory per sample of running layers ``first..last`` (1-based):
    ``2 x max(input + output)`` over them, float32."""
    if last < first:
        return 0
    sizes = [math.prod(sample_shape) * FLOAT_BYTES] + [i.nbytes for i in infos]
    return MEMORY_MARGIN * max(sizes[k - 1] + sizes[k] for k in range(first, last + 1))
