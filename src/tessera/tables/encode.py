"""Turning what a user writes into a tensor table's rows: options checked, the layout chosen
(the paper's 10% rule, :mod:`tessera.tables.auto`), the tensor encoded."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from tessera.config import TablesConfig
from tessera.errors import FormatError, InvalidArgumentError
from tessera.tables.auto import choose
from tessera.tables.layouts import get_layout
from tessera.tables.layouts.base import EncodeOptions
from tessera.tables.tensors import DENSE_ONLY, DTYPES, canonical


def encode_tensor(x: Any, format: str, options: dict[str, Any], config: TablesConfig,
                  ) -> tuple[str, str, Any, Any]:
    """``x`` encoded in ``format`` (``auto``: chosen) under the write ``options``: the layout
    name, why it was chosen, the canonical tensor and its encoding."""
    allowed = {"chunk_dim", "block_shape", "flatten_at", "mode_order", "optimize_for",
               "sparsity_threshold"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise InvalidArgumentError(f"unknown write option(s): {', '.join(unknown)}; "
                                   f"known: {', '.join(sorted(allowed))}")
    tensor = canonical(x)
    hint = layout_hint(x)
    threshold = float(options.get("sparsity_threshold", config.sparsity_threshold))
    reason = f"asked for {format}"
    if format == "auto":
        format, reason = choose(tensor, threshold, hint=hint,
                                optimize_for=options.get("optimize_for", "read"))
    layout = get_layout(format)
    if not layout.dense and tensor.dtype in DENSE_ONLY:
        raise FormatError(f"{tensor.dtype} tensors are stored dense only (format='ftsf')")
    row_bytes = config.chunk_bytes if layout.dense else config.sparse_row_bytes
    opts = EncodeOptions(row_bytes, config.max_row_bytes,
                         chunk_dim=options.get("chunk_dim"),
                         block_shape=options.get("block_shape"),
                         flatten_at=options.get("flatten_at"),
                         mode_order=options.get("mode_order"))
    enc = layout.encode(tensor, opts)
    dense_bytes = math.prod(tensor.shape) * DTYPES[tensor.dtype].itemsize
    if reason.endswith(format) and not layout.dense and enc.encoded_bytes >= dense_bytes:
        enc = get_layout("ftsf").encode(tensor, dataclasses.replace(
            opts, chunk_bytes=config.chunk_bytes))
        format, reason = "ftsf", (f"{reason}, but {enc.encoded_bytes:,} sparse bytes >= "
                                  f"{dense_bytes:,} dense -> ftsf")
    return format, reason, tensor, enc



def checked_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """A tensor's metadata, checked to map strings to strings."""
    out = dict(metadata or {})
    bad = [k for k, v in out.items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:
        raise InvalidArgumentError(f"metadata must map strings to strings (as safetensors' "
                                   f"__metadata__); not: {bad[:3]}")
    return out


def layout_hint(x: Any) -> str | None:
    """The sparse layout a torch tensor arrives in (CSR, CSC), if any."""
    if type(x).__module__.split(".")[0] == "torch":
        import torch

        return {torch.sparse_csr: "csr", torch.sparse_csc: "csc"}.get(x.layout)
    return None
