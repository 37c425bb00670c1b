"""Tessera: arrays, tensors and images in object storage, served region by region.

>>> import tessera
>>> store = tessera.open_store("memory://doc-quickstart")
>>> _ = store.put("hello", b"world")
>>> bytes(store.get("hello"))
b'world'
"""

from tessera.config import RetryPolicy, StoreConfig
from tessera.errors import (
    AccessDeniedError,
    ConfigError,
    InvalidKeyError,
    InvalidRangeError,
    InvalidURLError,
    ObjectExistsError,
    ObjectNotFoundError,
    PermanentStorageError,
    PreconditionFailedError,
    StorageError,
    TesseraError,
    TransientStorageError,
)
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

__version__ = "0.1.0"

__all__ = [
    "PRICING",
    "AccessDeniedError",
    "AsyncStore",
    "ConfigError",
    "IOStats",
    "InvalidKeyError",
    "InvalidRangeError",
    "InvalidURLError",
    "ObjectExistsError",
    "ObjectInfo",
    "ObjectNotFoundError",
    "PermanentStorageError",
    "PreconditionFailedError",
    "PriceTable",
    "PutResult",
    "RetryPolicy",
    "StorageError",
    "Store",
    "StoreConfig",
    "TesseraError",
    "TransientStorageError",
    "__version__",
    "collect_stats",
    "open_store",
]
