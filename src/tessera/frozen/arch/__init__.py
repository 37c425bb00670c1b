"""The architectures of frozen-layer pushdown, found by name (a lazy registry: torch is imported
when a model is built). Each model is a :class:`~tessera.frozen.arch.base.Staged` module: its
forward pass is a list of named **layers** in the paper's sense (a residual or dense block is
one layer), so layers ``1..s`` can run in one place and ``s+1..`` in another.

>>> sorted(ARCHS)
['alexnet', 'densenet121', 'resnet18', 'resnet50', 'vgg11', 'vgg19', 'vit_b_16']
"""

from __future__ import annotations

import importlib
from typing import Any

from tessera.errors import InvalidArgumentError

#: name -> "module:function" building it (``num_classes=`` as torchvision's).
ARCHS = {
    "alexnet": "tessera.frozen.arch.alexnet:alexnet",
    "densenet121": "tessera.frozen.arch.densenet:densenet121",
    "resnet18": "tessera.frozen.arch.resnet:resnet18",
    "resnet50": "tessera.frozen.arch.resnet:resnet50",
    "vgg11": "tessera.frozen.arch.vgg:vgg11",
    "vgg19": "tessera.frozen.arch.vgg:vgg19",
    "vit_b_16": "tessera.frozen.arch.vit:vit_b_16",
}


def build(name: str, num_classes: int = 1000) -> Any:
    """A new model of architecture ``name`` with random weights (torchvision's init)."""
    try:
        target = ARCHS[name]
    except KeyError:
        raise InvalidArgumentError(f"unknown architecture {name!r}; known: "
                                   f"{', '.join(sorted(ARCHS))}") from None
    module, _, attr = target.partition(":")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except ImportError as err:
        raise ImportError(f"the {name} architecture needs torch: pip install "
                          f"'tessera[frozen]' ({err.name} is missing)") from err
    return factory(num_classes=num_classes)
