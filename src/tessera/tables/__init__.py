"""Tensor tables (the Delta Tensor paper): dense and sparse tensors, each with an id, in one
Delta Lake table on any store (file://, s3://, gs://, az://), with ACID versions, time
travel, and slice reads that fetch only the rows holding the slice. Needs the ``tables``
extra (deltalake, pyarrow). See docs/tables.md.
"""

try:
    import deltalake  # noqa: F401
    import pyarrow  # noqa: F401
except ImportError as _missing:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(f"tensor tables need the 'tables' extra ({_missing.name} is missing): "
                      "pip install 'tessera[tables]'") from _missing

from tessera.tables.layouts import LAYOUTS, register_layout
from tessera.tables.reader import TableRead
from tessera.tables.ref import SparseTensor, TensorRef
from tessera.tables.table import (
    TableStats,
    TensorInfo,
    TensorTable,
    create_table,
    open_table,
)

__all__ = ["LAYOUTS", "SparseTensor", "TableRead", "TableStats", "TensorInfo", "TensorRef",
           "TensorTable", "create_table", "open_table", "register_layout"]
