"""Weights of registered models: written as safetensors, read only after their sha256 is
checked, and only the tensors a split needs.

Nothing here unpickles: safetensors files are a JSON header and raw buffers; a ``.pt`` or
``.pth`` state_dict (accepted because that is how most weights are published) is read with
an explicit ``torch.load(..., weights_only=True)``, after its hash matched the operator's
manifest, and :func:`convert` turns it into safetensors once. Loading is strict: the names,
shapes and number of tensors must be exactly the architecture's.

Prefix-only loading: :func:`prefix_keys` names the tensors layers ``1..s`` use (a tensor
belongs to the first layer whose name is a dotted prefix of its own; the few that belong to
no layer are always loaded), and :func:`load_model` leaves the others on the meta device, so
a server running VGG11 to its last convolution reads 9.2 M of its 132.9 M parameters.
"""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile
from pathlib import Path
from typing import Any

import torch

from tessera.errors import ConfigError, InvalidArgumentError
from tessera.frozen.arch import build
from tessera.frozen.arch.base import Staged
from tessera.frozen.manifest import ModelSpec


def sha256_file(path: str | Path) -> str:
    """The sha256 of the file's bytes, as 64 hex digits."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def save_weights(model: torch.nn.Module, path: str | Path) -> str:
    """Write ``model``'s state_dict as safetensors at ``path``; returns its sha256."""
    from safetensors.torch import save_file

    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, str(path))
    return sha256_file(path)


def _verified(path: Path, sha256: str) -> None:
    if not path.is_file():
        raise ConfigError(f"weights file {path} does not exist")
    got = sha256_file(path)
    if got != sha256:
        raise ConfigError(f"weights file {path} has sha256 {got}, but the manifest pins "
                          f"{sha256}; refusing to load it (re-register it with `tessera model "
                          "check`, or restore the right file)")


def read_tensors(path: str | Path, sha256: str | None,
                 keys: set[str] | None = None) -> dict[str, torch.Tensor]:
    """The tensors in weights file ``path`` (only ``keys`` when given), after its sha256 was
    checked against ``sha256`` (``None``: not checked; for files the caller just wrote).

    Raises :class:`~tessera.errors.ConfigError` naming the file when the hash differs, when
    it is not a safetensors file or a torch zip archive of plain tensors (a pickle renamed
    ``.pt`` is refused here, before anything in it runs), or when a key is missing.
    """
    p = Path(path)
    if sha256 is not None:
        _verified(p, sha256)
    if p.suffix == ".safetensors":
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(p), framework="pt", device="cpu") as f:
                names = set(f.keys())
                want = names if keys is None else keys
                missing = sorted(want - names)
                if missing:
                    raise ConfigError(f"weights file {p} lacks {len(missing)} tensor(s), e.g. "
                                      f"{', '.join(missing[:3])}")
                return {k: f.get_tensor(k) for k in sorted(want)}
        except (SafetensorError, OSError, ValueError) as err:
            raise ConfigError(f"weights file {p} is not a valid safetensors file: {err}") \
                from None
    if p.suffix not in (".pt", ".pth"):
        raise ConfigError(f"weights file {p}: only .safetensors, .pt and .pth are read")
    if not zipfile.is_zipfile(p):  # torch.save writes zip archives; older pickles are refused
        raise ConfigError(f"weights file {p} is not a torch zip archive (a bare pickle, which "
                          "Tessera never loads); save it with torch.save(model.state_dict()) "
                          "or convert it to safetensors where it was made")
    try:
        state = torch.load(p, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # the weights-only unpickler refuses anything but tensors
        raise ConfigError(f"weights file {p} holds more than plain tensors and is refused: "
                          f"{type(err).__name__}: {str(err).splitlines()[0][:200]}") from None
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise ConfigError(f"weights file {p} is not a state_dict (a mapping of names to "
                          "tensors)")
    if keys is None:
        return dict(state)
    missing = sorted(keys - set(state))
    if missing:
        raise ConfigError(f"weights file {p} lacks {len(missing)} tensor(s), e.g. "
                          f"{', '.join(missing[:3])}")
    return {k: state[k] for k in keys}


def tensor_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """Names and shapes of the tensors in a weights file, without reading their data (for
    safetensors; a ``.pt`` is memory-mapped)."""
    p = Path(path)
    if p.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(p), framework="pt", device="cpu") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    return {k: tuple(v.shape) for k, v in read_tensors(p, None).items()}


def meta_model(arch: str, num_classes: int = 1000) -> Staged:
    """Architecture ``arch`` on the meta device (no memory, no compute), in eval mode."""
    with torch.device("meta"):
        model: Staged = build(arch, num_classes)
    return model.train(False)  # eval mode: BatchNorm statistics frozen


@dataclasses.dataclass(frozen=True)
class WeightsReport:
    """What :func:`check_weights` found: the file, its tensors, parameters and bytes."""

    path: Path
    tensors: int
    parameters: int
    nbytes: int


def check_weights(spec: ModelSpec, folder: str | Path) -> WeightsReport:
    """Check ``spec``'s weights file in ``folder``: the sha256 first, then that its tensors'
    names and shapes are exactly the architecture's (strict). Raises
    :class:`~tessera.errors.ConfigError` naming the file."""
    path = Path(folder) / spec.weights
    _verified(path, spec.sha256)
    if path.suffix == ".safetensors":
        try:
            shapes = tensor_shapes(path)
        except Exception as err:  # safetensors' own parse errors
            raise ConfigError(f"weights file {path} is not a valid safetensors file: "
                              f"{err}") from None
    else:
        shapes = {k: tuple(v.shape) for k, v in read_tensors(path, None).items()}
    model = meta_model(spec.arch, spec.num_classes)
    want = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    missing, extra = sorted(set(want) - set(shapes)), sorted(set(shapes) - set(want))
    if missing or extra:
        raise ConfigError(f"weights file {path} does not fit {spec.arch} "
                          f"({spec.num_classes} classes): missing {missing[:3]}, unexpected "
                          f"{extra[:3]}")
    wrong = [k for k in want if want[k] != shapes[k]]
    if wrong:
        k = wrong[0]
        raise ConfigError(f"weights file {path}: tensor {k} has shape {shapes[k]}, "
                          f"{spec.arch} needs {want[k]} ({len(wrong)} tensor(s) differ)")
    params = sum(p.numel() for p in model.parameters())
    return WeightsReport(path, len(shapes), params, path.stat().st_size)


def prefix_keys(model: Staged, split: int) -> set[str]:
    """The state_dict keys layers ``1..split`` use: a key belongs to the first layer whose
    name equals it or is a dotted prefix of it; keys of no layer are always included."""
    names = model.inventory()
    if isinstance(split, bool) or not isinstance(split, int) or not 0 <= split <= len(names):
        raise InvalidArgumentError(f"split must be 0..{len(names)}, got {split!r}")
    keys = set()
    for key in model.state_dict():
        owner = next((i for i, n in enumerate(names, 1)
                      if key == n or key.startswith(n + ".")), None)
        if owner is None or owner <= split:
            keys.add(key)
    return keys


def load_model(spec: ModelSpec, folder: str | Path, split: int | None = None,
               *, verify: bool = True) -> Staged:
    """``spec``'s model with its weights, in eval mode; with ``split``, only the tensors
    layers ``1..split`` use are read (the others stay on the meta device, so only
    ``forward_to(x, s)`` with ``s <= split`` may run). ``verify=False`` skips the sha256
    (when the caller checked it already)."""
    model = meta_model(spec.arch, spec.num_classes)
    keys = prefix_keys(model, split) if split is not None else set(model.state_dict())
    path = Path(folder) / spec.weights
    state = read_tensors(path, spec.sha256 if verify else None, keys)
    model.load_state_dict(state, strict=split is None, assign=True)
    return model.train(False)  # eval mode: BatchNorm statistics frozen


def parameters_in(model: Staged, keys: set[str]) -> int:
    """How many parameter values ``keys`` hold."""
    state: dict[str, Any] = model.state_dict()
    return sum(state[k].numel() for k in keys)


def convert(arch: str, src: str | Path, dst: str | Path, num_classes: int = 1000) -> str:
    """Turn a ``.pt``/``.pth`` state_dict of ``arch`` into safetensors at ``dst`` (read with
    ``weights_only=True``, checked strictly against the architecture); returns its sha256."""
    state = read_tensors(src, None)
    model = meta_model(arch, num_classes)
    want = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    if want != got:
        diff = sorted(set(want) ^ set(got)) or [k for k in want if want[k] != got[k]]
        raise ConfigError(f"{src} is not a state_dict of {arch} ({num_classes} classes): "
                          f"{len(diff)} key(s) or shapes differ, e.g. {diff[:3]}")
    model.load_state_dict(state, strict=True, assign=True)
    return save_weights(model, dst)
