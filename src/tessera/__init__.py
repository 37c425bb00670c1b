"""Tessera: arrays, tensors and images in object storage, served region by region.

>>> import tessera
>>> store = tessera.open_store("memory://doc-quickstart")
>>> _ = store.put("hello", b"world")
>>> bytes(store.get("hello"))
b'world'
"""

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
from tessera.config import PlannerConfig, ReadConfig, RetryPolicy, StoreConfig, WriteConfig
from tessera.errors import (
    AccessDeniedError,
    ArrayExistsError,
    ArrayNotFoundError,
    ConfigError,
    CorruptDataError,
    ForkSafetyError,
    HistoryVacuumedError,
    InvalidArgumentError,
    InvalidKeyError,
    InvalidRangeError,
    InvalidTypeError,
    InvalidURLError,
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
    TesseraError,
    TesseraWarning,
    TransientStorageError,
)
from tessera.format.selection import Hyperslabs, Points
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

__all__ = [
    "PRICING",
    "AccessDeniedError",
    "Array",
    "ArrayExistsError",
    "ArrayNotFoundError",
    "ArraySchema",
    "AsyncStore",
    "Attr",
    "ConfigError",
    "CorruptDataError",
    "Dim",
    "ForkSafetyError",
    "FragmentInfo",
    "HistoryVacuumedError",
    "Hyperslabs",
    "IOStats",
    "InvalidArgumentError",
    "InvalidKeyError",
    "InvalidRangeError",
    "InvalidTypeError",
    "InvalidURLError",
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
    "TesseraError",
    "TesseraWarning",
    "TransientStorageError",
    "WriteConfig",
    "__version__",
    "collect_stats",
    "create_array",
    "from_numpy",
    "load_profile",
    "open_array",
    "open_store",
    "profile_store",
]
