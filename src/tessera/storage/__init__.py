"""Tessera's storage layer: one accounted, retrying I/O path to every object store."""

from tessera.storage.blocking import Store, open_store
from tessera.storage.pricing import PRICING, PriceTable, get_pricing
from tessera.storage.stats import REQUEST_KINDS, IOStats, MethodStats, RequestRecord, collect_stats
from tessera.storage.store import AsyncStore, ListDirResult, ObjectInfo, PutResult
from tessera.storage.url import StoreURL, parse_store_url

__all__ = [
    "PRICING",
    "REQUEST_KINDS",
    "AsyncStore",
    "IOStats",
    "ListDirResult",
    "MethodStats",
    "ObjectInfo",
    "PriceTable",
    "PutResult",
    "RequestRecord",
    "Store",
    "StoreURL",
    "collect_stats",
    "get_pricing",
    "open_store",
    "parse_store_url",
]
