"""``format="auto"``: the Delta Tensor paper's rule (a tensor with fewer than 10% non-zero
elements is sparse, section IV.B) plus guards: sparse tensors go to BSGS (the paper's best
for size and reads) or CSF when writes matter most (its best for writes), torch CSR/CSC
inputs keep their layout, and a sparse choice whose encoding would not be smaller than the
dense one falls back to FTSF. The reason is kept for the write's info.

>>> import numpy as np
>>> from tessera.tables.tensors import dense_tensor
>>> x = np.zeros((10, 10), np.float32); x[0, :9] = 1
>>> choose(dense_tensor(x), threshold=0.10)[0]
'bsgs'
>>> x[0, 9] = x[1, 0] = 1
>>> choose(dense_tensor(x), threshold=0.10)
('ftsf', 'density 11% >= 10% -> ftsf')
"""

from __future__ import annotations

import math

from tessera.errors import FormatError
from tessera.tables.tensors import DENSE_ONLY, Tensor


def choose(t: Tensor, threshold: float, *, hint: str | None = None,
           optimize_for: str = "read") -> tuple[str, str]:
    """``(format, reason)`` for ``t``."""
    if optimize_for not in ("read", "write"):
        raise FormatError(f"optimize_for must be 'read' or 'write', got {optimize_for!r}")
    size = math.prod(t.shape)
    if size == 0 or not t.shape:
        return "ftsf", "empty or 0-d tensor -> ftsf"
    if t.dtype in DENSE_ONLY:
        return "ftsf", f"{t.dtype} is stored dense only -> ftsf"
    density = t.nnz / size
    pct = f"{density:.3g}" if density * 100 < 0.01 else f"{density * 100:.3g}%"
    if density >= threshold:
        return "ftsf", f"density {pct} >= {threshold * 100:.3g}% -> ftsf"
    if hint in ("csr", "csc"):
        return hint, f"density {pct} < {threshold * 100:.3g}%, a {hint.upper()} input -> {hint}"
    if optimize_for == "write":
        return "csf", f"density {pct} < {threshold * 100:.3g}%, optimize_for='write' -> csf"
    return "bsgs", f"density {pct} < {threshold * 100:.3g}% -> bsgs"
