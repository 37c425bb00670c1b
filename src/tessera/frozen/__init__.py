"""Frozen-layer pushdown (the HAPI paper, docs/frozen.md): the frozen layers of a DNN run
beside the store and the client trains on what comes back.

- :mod:`tessera.frozen.arch`: Tessera's own definitions of the paper's models in plain
  ``torch.nn`` with torchvision's parameter names, each with its layer inventory;
- :mod:`tessera.frozen.manifest`, :mod:`tessera.frozen.weights`, :mod:`tessera.frozen.models`:
  the operator's models folder (safetensors, sha256-pinned, never a pickle);
- :mod:`tessera.frozen.remote`: :class:`~tessera.frozen.remote.FrozenModel`, the client's side;
- :mod:`tessera.frozen.planner`: the split's cost model (HAPI's overlap rule and the
  baselines'); :mod:`tessera.frozen.profile`: profiling a split (the measurements, the
  pipelined epoch, ``tessera model profile``'s run without training);
  :mod:`tessera.frozen.materialize`: features as a Tessera array;
- :mod:`tessera.frozen.emulate`: emulated compute for the testing kit.

Training: :class:`tessera.torch.SplitTrainer`. Needs the ``frozen`` extra (torch,
safetensors); importing :mod:`tessera` never imports torch, nor does this package: its
public names (``tessera.frozen.FrozenModel`` and those below) are imported on first use
(``materialize`` shares its module's name: import it from :mod:`tessera.frozen.materialize`).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tessera.frozen.models import (
        CheckedModel,
        check_models,
        checked_models,
        init_model,
        register,
    )
    from tessera.frozen.planner import SplitPlan, SplitProfile, choose, static_split
    from tessera.frozen.profile import SplitProfiler, profile_split
    from tessera.frozen.remote import Features, FrozenModel

#: Public name -> the module that defines it.
_PUBLIC = {"FrozenModel": "remote", "Features": "remote", "SplitPlan": "planner",
           "SplitProfile": "planner", "choose": "planner", "static_split": "planner",
           "SplitProfiler": "profile", "profile_split": "profile",
           "CheckedModel": "models", "check_models": "models", "checked_models": "models",
           "init_model": "models", "register": "models"}

__all__ = ["CheckedModel", "Features", "FrozenModel", "SplitPlan", "SplitProfile",
           "SplitProfiler", "check_models", "checked_models", "choose", "init_model",
           "profile_split", "register", "static_split"]


def __getattr__(name: str) -> Any:
    """The public names, imported on first use (they need torch: the ``frozen`` extra)."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'tessera.frozen' has no attribute {name!r}")
    try:
        module = importlib.import_module(f"tessera.frozen.{_PUBLIC[name]}")
    except ImportError as err:
        raise ImportError(f"tessera.frozen.{name} needs the 'frozen' extra ({err}): pip "
                          "install 'tessera[frozen]'") from err
    return getattr(module, name)
