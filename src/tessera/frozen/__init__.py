"""Frozen-layer pushdown (the HAPI paper, docs/frozen.md): the frozen layers of a DNN run
beside the store and the client trains on what comes back.

- :mod:`tessera.frozen.arch`: Tessera's own definitions of the paper's models in plain
  ``torch.nn`` with torchvision's parameter names, each with its layer inventory;
- :mod:`tessera.frozen.manifest`, :mod:`tessera.frozen.weights`, :mod:`tessera.frozen.models`:
  the operator's models folder (safetensors, sha256-pinned, never a pickle);
- :mod:`tessera.frozen.remote`: :class:`~tessera.frozen.remote.FrozenModel`, the client's side;
- :mod:`tessera.frozen.planner`: the split's cost model (HAPI's overlap rule and the
  baselines'); :mod:`tessera.frozen.profile`: profiling a split (the measurements, the
  pipelined epoch, ``tessera profile-model``'s run without training);
  :mod:`tessera.frozen.materialize`: features as a Tessera array;
- :mod:`tessera.frozen.emulate`: emulated compute for the testing kit.

Training: :class:`tessera.torch.SplitTrainer`. Needs the ``frozen`` extra (torch,
safetensors); importing :mod:`tessera` never imports torch, nor does this package: its
modules import it when used.
"""
