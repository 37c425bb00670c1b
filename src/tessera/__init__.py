"""Tessera: arrays, tensors and images in object storage, served region by region.

One set of verbs for every kind of data: ``tessera.open(url)`` opens whatever is there;
``open_array`` / ``create_array`` / ``from_numpy``, ``open_table`` / ``create_table`` and
``open_images`` / ``create_images`` open and make each kind, with the same arguments
(``url``, ``mode``, then keyword-only ``storage_options``, ``config`` and ``at=`` for time
travel). Tables and image sets need their extras (``tessera[tables]``,
``tessera[images]``) and are imported on first use.

>>> import numpy as np, tessera
>>> arr = tessera.from_numpy("memory://doc-quickstart", np.arange(6).reshape(2, 3))
>>> tessera.open("memory://doc-quickstart")[1].tolist()
[3, 4, 5]
"""

from typing import TYPE_CHECKING, Any

from tessera._version import __version__ as __version__
from tessera.array import (
    Array,
    ArraySchema,
    Attr,
    Dim,
    FragmentInfo,
    create_array,
    from_numpy,
    open_array,
)
from tessera.array.read.sparse import SparseResult
from tessera.config import (
    Config,
    PlannerConfig,
    ReadConfig,
    RetryPolicy,
    StoreConfig,
    WriteConfig,
)
from tessera.errors import (
    AccessDeniedError,
    ArrayExistsError,
    ArrayNotFoundError,
    BeforeFirstCommitError,
    CommitConflictError,
    ConfigError,
    CorruptDataError,
    DataNotFoundError,
    FeatureMismatchError,
    ForkSafetyError,
    FormatError,
    HistoryVacuumedError,
    InvalidArgumentError,
    InvalidKeyError,
    InvalidRangeError,
    InvalidTensorIdError,
    InvalidTypeError,
    InvalidURLError,
    MemoryLimitError,
    NameNotFoundError,
    ObjectExistsError,
    ObjectNotFoundError,
    PermanentStorageError,
    PreconditionFailedError,
    PushdownError,
    PushdownFallbackWarning,
    ReadOnlyError,
    SchemaError,
    SelectionError,
    StorageConfigError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
    TableVersionError,
    TensorExistsError,
    TensorNotFoundError,
    TesseraError,
    TesseraWarning,
    TransientStorageError,
    UnsupportedStoreError,
    WorkerError,
)
from tessera.format.selection import Hyperslabs, Points
from tessera.kinds import open
from tessera.pushdown.client import PushdownClient
from tessera.query.cost import StoreProfile
from tessera.query.plan import Plan
from tessera.query.profiler import load_profile, profile_store
from tessera.storage import (
    PRICING,
    AsyncStore,
    IOStats,
    ObjectInfo,
    PriceTable,
    PutResult,
    Store,
    collect_stats,
    open_store,
)
from tessera.when import Commit, History

if TYPE_CHECKING:  # imported on first use (see __getattr__): they need extras
    from tessera.images.columns import ImageColumns, create_images, open_images
    from tessera.tables.table import TensorTable, create_table, open_table

__all__ = [
    "PRICING",
    "AccessDeniedError",
    "Array",
    "ArrayExistsError",
    "ArrayNotFoundError",
    "ArraySchema",
    "AsyncStore",
    "Attr",
    "BeforeFirstCommitError",
    "Commit",
    "CommitConflictError",
    "Config",
    "ConfigError",
    "CorruptDataError",
    "DataNotFoundError",
    "Dim",
    "FeatureMismatchError",
    "ForkSafetyError",
    "FormatError",
    "FragmentInfo",
    "History",
    "HistoryVacuumedError",
    "Hyperslabs",
    "IOStats",
    "ImageColumns",
    "InvalidArgumentError",
    "InvalidKeyError",
    "InvalidRangeError",
    "InvalidTensorIdError",
    "InvalidTypeError",
    "InvalidURLError",
    "MemoryLimitError",
    "NameNotFoundError",
    "ObjectExistsError",
    "ObjectInfo",
    "ObjectNotFoundError",
    "PermanentStorageError",
    "Plan",
    "PlannerConfig",
    "Points",
    "PreconditionFailedError",
    "PriceTable",
    "PushdownClient",
    "PushdownError",
    "PushdownFallbackWarning",
    "PutResult",
    "ReadConfig",
    "ReadOnlyError",
    "RetryPolicy",
    "SchemaError",
    "SelectionError",
    "SparseResult",
    "StorageConfigError",
    "StorageError",
    "Store",
    "StoreConfig",
    "StoreProfile",
    "TableExistsError",
    "TableNotFoundError",
    "TableVersionError",
    "TensorExistsError",
    "TensorNotFoundError",
    "TensorTable",
    "TesseraError",
    "TesseraWarning",
    "TransientStorageError",
    "UnsupportedStoreError",
    "WorkerError",
    "WriteConfig",
    "__version__",
    "collect_stats",
    "create_array",
    "create_images",
    "create_table",
    "from_numpy",
    "load_profile",
    "open",
    "open_array",
    "open_images",
    "open_store",
    "open_table",
    "profile_store",
]

#: Names imported on first use: name -> (module, the extra it needs).
_LAZY = {"TensorTable": ("tessera.tables.table", "tables"),
         "open_table": ("tessera.tables.table", "tables"),
         "create_table": ("tessera.tables.table", "tables"),
         "ImageColumns": ("tessera.images.columns", "images"),
         "open_images": ("tessera.images.columns", "images"),
         "create_images": ("tessera.images.columns", "images")}


def __getattr__(name: str) -> Any:
    """Tables and image sets, imported on first use (each needs its extra; a missing one
    is named with the command that installs it)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'tessera' has no attribute {name!r}")
    module, extra = _LAZY[name]
    import importlib

    try:
        found = importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"tessera.{name} needs the '{extra}' extra ({err}): pip install "
                          f"'tessera[{extra}]'") from err
    return getattr(found, name)
