"""Frozen-layer pushdown (the HAPI paper, issue 26): the frozen layers of a DNN run beside the
store and the client trains on what comes back. This first part holds the architectures
(:mod:`tessera.frozen.arch`): Tessera's own definitions of the paper's models in plain
``torch.nn`` with torchvision's parameter names, each with its layer inventory. Needs the
``frozen`` extra (torch, safetensors); importing :mod:`tessera` never imports torch.
"""
