"""What every architecture shares: a forward pass as a list of named layers.

A :class:`Staged` model lists its layers (``layers()``: name and the callable that maps the
previous layer's output to its own); ``forward`` runs them all, ``forward_to(x, s)`` the first
``s`` (the frozen prefix), ``forward_from(h, s)`` the rest. Layer ``s`` is 1-based, as the
paper counts. ``inventory()`` gives the names in order.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from tessera.errors import InvalidArgumentError

Layer = tuple[str, Callable[[torch.Tensor], torch.Tensor]]


class Staged(nn.Module):
    """A model whose forward pass is its :meth:`layers`, in order."""

    def layers(self) -> list[Layer]:
        raise NotImplementedError

    def inventory(self) -> list[str]:
        """The layers' names (index 1 is the first)."""
        return [name for name, _ in self.layers()]

    def index(self, name: str) -> int:
        """The 1-based index of layer ``name``."""
        names = self.inventory()
        if name not in names:
            raise InvalidArgumentError(f"no layer {name!r}; layers: {', '.join(names)}")
        return names.index(name) + 1

    def _check(self, s: int) -> int:
        n = len(self.layers())
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= n:
            raise InvalidArgumentError(f"a split must be 0..{n} (layers of this model), got {s!r}")
        return s

    def forward_to(self, x: torch.Tensor, s: int) -> torch.Tensor:
        """Layers ``1..s`` (the frozen prefix)."""
        for _, fn in self.layers()[:self._check(s)]:
            x = fn(x)
        return x

    def forward_from(self, h: torch.Tensor, s: int) -> torch.Tensor:
        """Layers ``s+1..`` on the output of layer ``s``."""
        for _, fn in self.layers()[self._check(s):]:
            h = fn(h)
        return h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_from(x, 0)


def children_of(prefix: str, seq: nn.Sequential) -> list[Layer]:
    """Each module of ``seq`` as a layer named ``prefix.i`` (torchvision's names)."""
    return [(f"{prefix}.{i}", module) for i, module in enumerate(seq)]


def flatten(x: torch.Tensor) -> torch.Tensor:
    return torch.flatten(x, 1)
