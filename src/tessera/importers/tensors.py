"""Importing tensors into a tensor table: a ``torch.save`` file (loaded with
``weights_only=True``: no pickled code runs) or a safetensors file, in one commit each
(``tessera import pt``, ``tessera import safetensors``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tessera.importers.report import ImportReport


def import_pt(source: str | Path, url: str, tensor_id: str | None = None,
              storage_options: dict[str, Any] | None = None) -> ImportReport:
    """Store the tensors of a ``torch.save`` file (a tensor, or a dict of them) in the table at
    ``url`` (made if missing), loaded with ``weights_only=True`` (no pickled code runs)."""
    import torch

    from tessera.errors import InvalidArgumentError, TableNotFoundError
    from tessera.tables import TensorTable

    loaded = torch.load(source, map_location="cpu", weights_only=True)
    if isinstance(loaded, torch.Tensor):
        if not tensor_id:
            raise InvalidArgumentError("the file holds one tensor: give its id with --id")
        tensors = {tensor_id: loaded}
    elif isinstance(loaded, dict) and all(isinstance(v, torch.Tensor) for v in loaded.values()):
        base = f"{tensor_id.rstrip('/')}/" if tensor_id else ""
        tensors = {f"{base}{name}": value for name, value in loaded.items()}
    else:
        raise InvalidArgumentError(f"{source} holds a {type(loaded).__name__}, not a tensor or "
                                   "a dict of tensors")
    try:
        tt = TensorTable.open(url, "w", storage_options=storage_options)
    except TableNotFoundError:
        tt = TensorTable.create(url, storage_options=storage_options)
    infos = tt.write_many(tensors)
    return ImportReport(url=url, imported=sorted(tensors),
                        nbytes=sum(i.encoded_bytes for i in infos),
                        stored_bytes=infos[0].stored_bytes if infos else 0)


def import_safetensors(source: str | Path, url: str, prefix: str | None = None,
                       storage_options: dict[str, Any] | None = None) -> ImportReport:
    """Store the tensors of a safetensors file in the table at ``url`` (made if missing), one
    commit, each under ``prefix/name`` (torch reads them when installed, so bfloat16 keeps
    its bits; else numpy); the file's ``__metadata__`` goes with every tensor."""
    from safetensors import safe_open

    from tessera.errors import TableNotFoundError
    from tessera.tables import TensorTable

    try:
        import torch  # noqa: F401

        framework = "pt"
    except ImportError:
        framework = "np"
    base = f"{prefix.rstrip('/')}/" if prefix else ""
    with safe_open(str(source), framework=framework) as f:
        metadata = dict(f.metadata() or {})
        tensors = {f"{base}{name}": f.get_tensor(name) for name in f.keys()}  # noqa: SIM118
    try:
        tt = TensorTable.open(url, "w", storage_options=storage_options)
    except TableNotFoundError:
        tt = TensorTable.create(url, storage_options=storage_options)
    infos = tt.write_many(tensors, metadata=metadata)
    return ImportReport(url=url, imported=sorted(tensors),
                        nbytes=sum(i.encoded_bytes for i in infos),
                        stored_bytes=infos[0].stored_bytes if infos else 0)
