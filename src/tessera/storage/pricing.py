"""Public list prices that turn :class:`~tessera.storage.stats.IOStats` into dollars.

Sources (standard storage class, first usage tier, no free tier, prices in USD):

* ``s3``: Amazon S3 Standard, us-east-1, https://aws.amazon.com/s3/pricing/ — PUT/COPY/POST/LIST
  $0.005 per 1,000 requests, GET/SELECT and all other requests $0.0004 per 1,000, DELETE free;
  data transfer out to the internet $0.09 per GB (first 10 TB/month). Pushdown is priced as
  AWS Lambda (https://aws.amazon.com/lambda/pricing/, x86): $0.20 per 1M requests and
  $0.0000166667 per GB-second.
* ``gcs``: Google Cloud Storage Standard, https://cloud.google.com/storage/pricing — Class A
  (insert, list) $0.005 per 1,000, Class B (get, head) $0.0004 per 1,000, delete free; internet
  egress $0.12 per GB (premium tier, 0-1 TB). Pushdown as Cloud Run functions
  (https://cloud.google.com/functions/pricing): $0.40 per 1M invocations, $0.0000165 per
  GB-second (1 GiB memory tier, compute included).
* ``azure``: Azure Blob Storage Hot LRS, https://azure.microsoft.com/pricing/details/storage/blobs/
  — write and list operations $0.065 per 10,000, read operations $0.0044 per 10,000, delete
  free; internet egress $0.087 per GB (first 10 TB, North America). Pushdown as Azure Functions
  consumption plan (https://azure.microsoft.com/pricing/details/functions/): $0.20 per 1M
  executions, $0.000016 per GB-second.
* ``local``: everything free.

Recorded on 2026-11-22 from the pages above as published then; this machine cannot re-fetch
them, so check the pages before using the figures for a bill. Providers bill a "GB" of transfer
as 2**30 bytes; so does this module.

>>> from tessera.storage.pricing import get_pricing
>>> round(get_pricing("s3").egress_usd(2**30), 4)
0.09
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

from tessera.errors import ConfigError

GIB = 2**30

PRICES_RECORDED_ON = "2026-11-22"


@dataclasses.dataclass(frozen=True)
class PriceTable:
    """Per-request fees by request kind, egress per GB, and serverless compute.

    Attributes:
        name: short name (``s3``, ``gcs``, ``azure``, ``local``).
        request_usd: fee for one request, by kind (``get``, ``range``, ``put``, ``list``,
            ``delete``, ``head``, ``pushdown``).
        egress_usd_per_gb: fee per GB (2**30 bytes) sent from the store to the client.
        compute_usd_per_gb_s: fee per GB-second of serverless compute (pushdown).
        source: where the figures come from.

    >>> import tessera
    >>> s3 = tessera.PRICING["s3"]
    >>> s3.name, s3.egress_usd_per_gb
    ('s3', 0.09)
    """

    name: str
    request_usd: Mapping[str, float]
    egress_usd_per_gb: float
    compute_usd_per_gb_s: float
    source: str

    def request_fee(self, kind: str, count: int = 1) -> float:
        """Fee for ``count`` requests of ``kind``."""
        try:
            return self.request_usd[kind] * count
        except KeyError:
            known = ", ".join(sorted(self.request_usd))
            raise ConfigError(
                f"pricing {self.name!r} has no fee for request kind {kind!r}; known: {known}"
            ) from None

    def egress_usd(self, nbytes: int | float) -> float:
        """Fee for ``nbytes`` leaving the store."""
        return self.egress_usd_per_gb * nbytes / GIB

    def compute_usd(self, gb_seconds: float) -> float:
        """Fee for ``gb_seconds`` of serverless compute."""
        return self.compute_usd_per_gb_s * gb_seconds


def _fees(*, read_per_1000: float, write_per_1000: float,
          pushdown_per_million: float) -> Mapping[str, float]:
    """Per-request fees by kind: reads (get, range, head) and writes (put, list) are each one
    class on every provider; deletes are free; a pushdown is one serverless invocation."""
    read, write = read_per_1000 / 1000, write_per_1000 / 1000
    return MappingProxyType({"get": read, "range": read, "head": read, "put": write,
                             "list": write, "delete": 0.0,
                             "pushdown": pushdown_per_million / 1e6})


_S3 = PriceTable(
    name="s3",
    request_usd=_fees(read_per_1000=0.0004, write_per_1000=0.005, pushdown_per_million=0.20),
    egress_usd_per_gb=0.09,
    compute_usd_per_gb_s=0.0000166667,
    source="https://aws.amazon.com/s3/pricing/ + https://aws.amazon.com/lambda/pricing/",
)

_GCS = PriceTable(
    name="gcs",
    request_usd=_fees(read_per_1000=0.0004, write_per_1000=0.005, pushdown_per_million=0.40),
    egress_usd_per_gb=0.12,
    compute_usd_per_gb_s=0.0000165,
    source="https://cloud.google.com/storage/pricing + https://cloud.google.com/functions/pricing",
)

_AZURE = PriceTable(
    name="azure",
    request_usd=_fees(read_per_1000=0.00044, write_per_1000=0.0065, pushdown_per_million=0.20),
    egress_usd_per_gb=0.087,
    compute_usd_per_gb_s=0.000016,
    source=(
        "https://azure.microsoft.com/pricing/details/storage/blobs/ + "
        "https://azure.microsoft.com/pricing/details/functions/"
    ),
)

_LOCAL = PriceTable(
    name="local",
    request_usd=_fees(read_per_1000=0.0, write_per_1000=0.0, pushdown_per_million=0.0),
    egress_usd_per_gb=0.0,
    compute_usd_per_gb_s=0.0,
    source="a local folder or memory store costs nothing per request",
)

PRICING: Mapping[str, PriceTable] = MappingProxyType(
    {t.name: t for t in (_S3, _GCS, _AZURE, _LOCAL)}
)
"""The built-in price tables by name."""


def get_pricing(pricing: str | PriceTable) -> PriceTable:
    """Look up a built-in price table by name, or pass a custom :class:`PriceTable` through."""
    if isinstance(pricing, PriceTable):
        return pricing
    try:
        return PRICING[pricing]
    except KeyError:
        raise ConfigError(
            f"unknown pricing {pricing!r}; choose one of {', '.join(PRICING)} "
            "or pass a tessera.storage.PriceTable"
        ) from None
