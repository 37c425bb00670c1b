"""Configuration in one place.

Every tunable lives in a frozen dataclass. Defaults are in the field definitions; any field can
be overridden by an environment variable named ``TESSERA_`` + the field's path in upper case,
for example ``TESSERA_RETRY_MAX_ATTEMPTS=6`` or ``TESSERA_STORE_MAX_CONCURRENCY=16``.
Nothing is read from the environment at import time: :meth:`StoreConfig.from_env` reads it
when a store is opened without an explicit config, so two stores in one process can carry
different settings.

>>> from tessera.config import StoreConfig
>>> cfg = StoreConfig.from_env({"TESSERA_RETRY_MAX_ATTEMPTS": "7"})
>>> cfg.retry.max_attempts
7
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args, get_type_hints

from tessera.errors import ConfigError

T = TypeVar("T")

#: How a write converts values to an attribute's dtype (:mod:`tessera.format.values`).
CastRule = Literal["checked", "value", "unsafe"]
CAST_RULES: tuple[str, ...] = get_args(CastRule)


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How transient storage failures are retried: capped exponential backoff, full jitter.

    Attributes:
        max_attempts: total tries per request, the first included (1 disables retries).
        base_delay_s: the backoff before the second try.
        max_delay_s: the cap on one backoff.
        multiplier: growth factor between consecutive backoffs.

    >>> RetryPolicy().max_attempts >= 1
    True
    """

    max_attempts: int = 4
    base_delay_s: float = 0.05
    max_delay_s: float = 2.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError(f"retry.max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ConfigError("retry delays must be >= 0")
        if self.multiplier < 1:
            raise ConfigError(f"retry.multiplier must be >= 1, got {self.multiplier}")

    def backoff_s(self, attempt: int, rand: float) -> float:
        """Delay before try ``attempt + 1`` (``attempt`` counts from 1), ``rand`` in [0, 1)."""
        cap = min(self.max_delay_s, self.base_delay_s * self.multiplier ** (attempt - 1))
        return cap * rand


@dataclasses.dataclass(frozen=True)
class StoreConfig:
    """Settings of one opened store.

    Attributes:
        retry: the retry policy for transient failures.
        max_concurrency: requests in flight at once for batched calls such as ``get_ranges``.
        request_timeout_s: limit for one request, connection to last byte; a request that
            runs past it counts as a transient failure and is retried.
        connect_timeout_s: limit for opening a connection (HTTP stores).
        list_page_size: keys fetched per listing page.

    >>> StoreConfig.from_env({"TESSERA_STORE_MAX_CONCURRENCY": "4"}).max_concurrency
    4
    """

    retry: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)
    max_concurrency: int = 32
    request_timeout_s: float = 60.0
    connect_timeout_s: float = 5.0
    list_page_size: int = 1000

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ConfigError(f"store.max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.request_timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ConfigError("store timeouts must be > 0 seconds")
        if self.list_page_size < 1:
            raise ConfigError("store.list_page_size must be >= 1")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StoreConfig:
        """Defaults overridden by ``TESSERA_RETRY_*`` and ``TESSERA_STORE_*`` variables."""
        env = os.environ if environ is None else environ
        retry = _from_env(RetryPolicy, "TESSERA_RETRY_", env)
        return _from_env(cls, "TESSERA_STORE_", env, retry=retry)

    def replace(self, **changes: Any) -> StoreConfig:
        """A copy with some fields changed (``retry=`` takes a RetryPolicy)."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True)
class PlannerConfig:
    """Defaults of the read planner (``TESSERA_PLANNER_*`` variables).

    Attributes:
        method: ``auto`` (cost-based), or a forced ``get``, ``merge``, ``fetch``,
            ``pushdown`` (or a mode a plug-in registered) for every read that does not pass
            ``method=``; checked against the read-mode registry
            (:mod:`tessera.query.methods`) when an array handle opens.
        phi: seconds a read may take longer to save one dollar (0: fastest).
        pricing: price table for the dollars in plans (``s3``, ``gcs``, ``azure``,
            ``local``); empty: chosen from the store's URL scheme.
        max_request_bytes: largest request that merging neighbouring tiles may build
            (a single tile larger than this is still fetched whole). Bounds the bytes one
            request holds in memory and keeps a large read spread over concurrent requests.
        plan_cache_bytes: memory per array handle for plan templates, reused by reads whose
            needs have the same shape (:mod:`tessera.query.plan_cache`); 0 plans every read
            afresh.

    >>> PlannerConfig.from_env({"TESSERA_PLANNER_METHOD": "get"}).method
    'get'
    """

    method: str = "auto"
    phi: float = 0.0
    pricing: str = ""
    max_request_bytes: int = 16 << 20
    plan_cache_bytes: int = 4 << 20

    def __post_init__(self) -> None:
        if not isinstance(self.method, str) or not self.method:
            raise ConfigError(f"the read method must be a name, got {self.method!r}")
        if not self.phi >= 0:
            raise ConfigError(f"phi must be a number >= 0, got {self.phi!r}")
        if self.max_request_bytes < 1:
            raise ConfigError("max_request_bytes must be a positive number of bytes, got "
                              f"{self.max_request_bytes!r}")
        if self.plan_cache_bytes < 0:
            raise ConfigError("plan_cache_bytes must be a number of bytes >= 0, got "
                              f"{self.plan_cache_bytes!r}")

    def overridden(self, method: str | None = None, phi: float | None = None,
                   ) -> PlannerConfig:
        """This config with a read's own ``method`` / ``phi`` (``None``: keep), checked."""
        if method is None and phi is None:
            return self  # frozen and checked when made
        if phi is not None:
            try:
                phi = float(phi)
            except (TypeError, ValueError):
                raise ConfigError(f"phi must be a number >= 0, got {phi!r}") from None
        return dataclasses.replace(self, method=self.method if method is None else method,
                                   phi=self.phi if phi is None else phi)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PlannerConfig:
        """Defaults overridden by ``TESSERA_PLANNER_*`` variables."""
        return _from_env(cls, "TESSERA_PLANNER_", os.environ if environ is None else environ)


@dataclasses.dataclass(frozen=True)
class ReadConfig:
    """How array handles see new commits (``TESSERA_READ_*`` variables, read when an array
    opens).

    Attributes:
        refresh_s: how long a handle opened without a timestamp may reuse its list of the
            committed fragments before a read lists the commit markers again (one LIST
            request). The default, 1 s, bounds how late a handle sees a commit made by
            another process; commits and vacuums made by any handle of the same process, and
            :meth:`~tessera.Array.refresh`, make the next read list at once. 0 lists at
            every read, so a read sees every commit made before it began; ``inf`` lists once
            (as TileDB reads an open array's fragment bookkeeping once, and zarr its
            metadata). Listing at every read costs a LIST per read: on S3 a LIST costs 12.5x
            a GET ($0.005 against $0.0004 per 1000), so a loop of small reads would pay
            more for listing than for data, and wait a round trip more per read.
        window_bytes: the most bytes a read holds beside its output: tiles whose requests
            are in flight or whose bytes arrived and wait to be decoded and placed (their
            encoded bytes, and their decoded bytes when compressed). A tile takes its share
            before its request is issued and gives it back once placed, so a read whose
            decoding falls behind the download holds at most its output plus this window
            (a tile larger than the window is read alone). The default, 128 MiB, is about
            what fills a 25 Gbit/s link with 30 ms to the first byte (~94 MB in flight).
        gc_pause_tiles: a read (or ``explain``) of a selection spanning at least this many
            tiles runs with Python's cyclic garbage collector paused: such a read makes a
            few small objects per tile, none in a cycle, and the collector would walk every
            object of the process again and again while they are made (about a third of a
            read of 10^5 tiles). 0 never pauses it.

    >>> ReadConfig.from_env({"TESSERA_READ_REFRESH_S": "60"}).refresh_s
    60.0
    >>> ReadConfig.from_env({"TESSERA_READ_WINDOW_BYTES": "1048576"}).window_bytes
    1048576
    """

    refresh_s: float = 1.0
    window_bytes: int = 128 << 20
    gc_pause_tiles: int = 4096

    def __post_init__(self) -> None:
        try:
            value = float(self.refresh_s)
        except (TypeError, ValueError):
            value = float("nan")
        if not value >= 0:
            raise ConfigError("refresh_s must be a number of seconds >= 0 (0: list the "
                              f"commits at every read; inf: once), got {self.refresh_s!r}")
        object.__setattr__(self, "refresh_s", value)
        if (not isinstance(self.window_bytes, int) or isinstance(self.window_bytes, bool)
                or self.window_bytes < 1):
            raise ConfigError("window_bytes must be a whole number of bytes >= 1, got "
                              f"{self.window_bytes!r}")
        if (not isinstance(self.gc_pause_tiles, int) or isinstance(self.gc_pause_tiles, bool)
                or self.gc_pause_tiles < 0):
            raise ConfigError("gc_pause_tiles must be a whole number of tiles >= 0 (0: never "
                              f"pause the garbage collector), got {self.gc_pause_tiles!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ReadConfig:
        """Defaults overridden by ``TESSERA_READ_*`` variables."""
        return _from_env(cls, "TESSERA_READ_", os.environ if environ is None else environ)


@dataclasses.dataclass(frozen=True)
class WriteConfig:
    """How writes lay out tiles (``TESSERA_WRITE_*`` variables, read when an array opens).

    Attributes:
        block_bytes: decoded bytes per block of compressed dense tiles
            (:mod:`tessera.format.blocks`): a read that needs part of a tile fetches and
            decodes only the blocks holding it. 0 compresses each tile whole (smallest at
            rest for very redundant data under lz4 or blosc; such tiles are fetched whole
            or pushed down).

        cast: how written values are converted to an attribute's dtype (a write's own
            ``cast=`` argument overrides it): ``checked`` (default) refuses values that would
            change, such as integers outside the attribute's range; ``value`` also takes
            floats into integer attributes when they fit (truncated, as HDF5); ``unsafe`` is
            numpy's ``astype`` (integers wrap around). See :mod:`tessera.format.values`.

    >>> WriteConfig.from_env({"TESSERA_WRITE_BLOCK_BYTES": "0"}).block_bytes
    0
    >>> WriteConfig(cast="wrap")
    Traceback (most recent call last):
    ...
    tessera.errors.ConfigError: write cast must be one of 'checked', 'value', 'unsafe', got 'wrap'
    """

    block_bytes: int = 64 << 10
    cast: CastRule = "checked"

    def __post_init__(self) -> None:
        if not isinstance(self.block_bytes, int) or self.block_bytes < 0:
            raise ConfigError("block_bytes must be a number of bytes >= 0 (0: no blocks), "
                              f"got {self.block_bytes!r}")
        if self.cast not in CAST_RULES:
            raise ConfigError(f"write cast must be one of {', '.join(map(repr, CAST_RULES))}, "
                              f"got {self.cast!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WriteConfig:
        """Defaults overridden by ``TESSERA_WRITE_*`` variables."""
        return _from_env(cls, "TESSERA_WRITE_", os.environ if environ is None else environ)


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """Limits and sizes of the pushdown server (``TESSERA_SERVER_*`` variables; the
    ``tessera serve`` options override them).

    Attributes:
        max_concurrency: read requests served at once.
        queue: read requests that may wait for a slot; beyond that, 503 with Retry-After.
        cache_bytes: memory budget of the decoded-tile cache (0: no cache).
        max_body_bytes: largest request body (413 beyond).
        max_items: tile and cell reads in one request (413 beyond).
        max_output_bytes: selected bytes one request may ask for (413 beyond).
        max_tile_bytes: largest stored or decoded tile (413 beyond).
        request_timeout_s: seconds one read request may take once its body has arrived (504
            beyond).
        body_timeout_s: seconds a client has to send a request's headers, and then its whole
            body, before the server answers 408 and closes the connection; a body is read
            before the request takes an admission slot, so slow or stalled clients hold no
            slot.
        max_connections: open connections the server keeps at once; beyond it a new
            connection gets 503 and is closed.
        max_connections_per_client: open connections from one client address (0: no
            limit; behind a load balancer every client has its address).
        models_dir: the operator's models folder (``models.json`` + weights; see
            :mod:`tessera.frozen.manifest`); empty: the server runs no model and has no
            ``/v1/infer``.
        infer_concurrency: infer requests computing at once (the paper's 4); they hold one
            admission slot each too, so tile reads keep the others.
        infer_queue: infer requests that may wait for a compute slot; beyond, 503.
        infer_threads: torch threads of one infer request's forward pass.
        infer_memory_bytes: memory one infer request may use for activations; the server's
            batch shrinks to fit, and a split that needs more for one sample is refused (413).
        model_cache_bytes: loaded model prefixes kept between requests (0: load per request,
            the paper's default).
        cos_batch: the server's batch inside an infer request (the paper's 16; halved on an
            allocation failure, down to 1).
        max_infer_samples: samples in one infer request (413 beyond).
        emulate_compute: testing only: a JSON file of per-layer seconds per sample; the
            server then sleeps that long instead of computing and returns zeros of the right
            shape (real bytes, emulated compute; see :mod:`tessera.frozen.emulate`).
    """

    max_concurrency: int = 8
    queue: int = 32
    cache_bytes: int = 256 << 20
    max_body_bytes: int = 4 << 20
    max_items: int = 256
    max_output_bytes: int = 256 << 20
    max_tile_bytes: int = 256 << 20
    request_timeout_s: float = 30.0
    body_timeout_s: float = 10.0
    max_connections: int = 1024
    max_connections_per_client: int = 128
    models_dir: str = ""
    infer_concurrency: int = 4
    infer_queue: int = 16
    infer_threads: int = 1
    infer_memory_bytes: int = 2 << 30
    model_cache_bytes: int = 1 << 30
    cos_batch: int = 16
    max_infer_samples: int = 512
    emulate_compute: str = ""

    def __post_init__(self) -> None:
        for name in ("max_concurrency", "max_body_bytes", "max_items", "max_output_bytes",
                     "max_tile_bytes", "infer_concurrency", "infer_threads",
                     "infer_memory_bytes", "cos_batch", "max_infer_samples",
                     "max_connections"):
            if getattr(self, name) < 1:
                raise ConfigError(f"server {name} must be >= 1, got {getattr(self, name)}")
        if self.queue < 0 or self.cache_bytes < 0:
            raise ConfigError("server queue and cache_bytes must be >= 0")
        if self.infer_queue < 0 or self.model_cache_bytes < 0:
            raise ConfigError("server infer_queue and model_cache_bytes must be >= 0")
        if self.max_connections_per_client < 0:
            raise ConfigError("server max_connections_per_client must be >= 0 (0: no limit)")
        for name in ("request_timeout_s", "body_timeout_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"server {name} must be > 0, got {getattr(self, name)}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any,
                 ) -> ServerConfig:
        """Defaults overridden by ``TESSERA_SERVER_*`` variables, then by ``overrides``
        (``None`` values are ignored)."""
        base = _from_env(cls, "TESSERA_SERVER_", os.environ if environ is None else environ)
        return dataclasses.replace(base, **{k: v for k, v in overrides.items()
                                            if v is not None})


@dataclasses.dataclass(frozen=True)
class PushdownConfig:
    """How a client uses a pushdown server (``TESSERA_PUSHDOWN_*`` variables).

    Attributes:
        url: the server (``http://host:port``); empty: none, unless a read names one.
        token: bearer token; ``TESSERA_PUSHDOWN_TOKEN``.
        timeout_s: the deadline of one batch, from sending it to its answer's last byte
            (not of each read of the socket: a server that trickles its answer misses it
            too); past it the batch's tiles are fetched directly and the server is left
            out for a while, as one that cannot be reached.
        batch_items: most tiles in one request.
        batch_bytes: most selected bytes in one request.
        batch_parallel: fewest requests a read's pushed-down tiles are spread over (when
            there are that many tiles) if answers are asked for whole, so server work and
            transfers overlap.
        stream: ask for streamed answers (each tile's cells sent as soon as the server has
            them, placed as they arrive: server work and transfer overlap within one
            request, so ``batch_parallel`` does not apply); a server that does not stream
            answers whole.
    """

    url: str = ""
    token: str = dataclasses.field(default="", repr=False)
    timeout_s: float = 30.0
    batch_items: int = 64
    batch_bytes: int = 64 << 20
    batch_parallel: int = 4
    stream: bool = True

    def __post_init__(self) -> None:
        if self.batch_parallel < 1:
            raise ConfigError("pushdown batch_parallel must be >= 1")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"pushdown url must start with http:// or https://, got "
                              f"{self.url!r}")
        if not self.timeout_s > 0 or self.batch_items < 1 or self.batch_bytes < 1:
            raise ConfigError("pushdown timeout_s, batch_items and batch_bytes must be > 0")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PushdownConfig:
        """Defaults overridden by ``TESSERA_PUSHDOWN_*`` variables."""
        return _from_env(cls, "TESSERA_PUSHDOWN_", os.environ if environ is None else environ)


@dataclasses.dataclass(frozen=True)
class ImageConfig:
    """Image-set settings (``TESSERA_IMAGES_*`` variables, read once per process).

    Attributes:
        cache_bytes: bytes of decoded group columns the process keeps
            (:func:`tessera.images.cache.shared_cache`): several readers of one image set
            and a rising ``k`` share what was fetched. 0 keeps none.
        decoder: how pixels are decoded (:mod:`tessera.images.kernel`): ``"auto"`` (the
            compiled decode when it was built with the package, else numpy),
            ``"compiled"`` (an error when it was not built) or ``"numpy"`` (the decode
            the compiled one is checked against).

    >>> ImageConfig.from_env({"TESSERA_IMAGES_CACHE_BYTES": "0"}).cache_bytes
    0
    >>> ImageConfig.from_env({"TESSERA_IMAGES_DECODER": "numpy"}).decoder
    'numpy'
    """

    cache_bytes: int = 256 << 20
    decoder: str = "auto"

    def __post_init__(self) -> None:
        if isinstance(self.cache_bytes, bool) or not isinstance(self.cache_bytes, int) \
                or self.cache_bytes < 0:
            raise ConfigError(f"images cache_bytes must be a number of bytes >= 0 (0: no "
                              f"cache), got {self.cache_bytes!r}")
        if self.decoder not in ("auto", "compiled", "numpy"):
            raise ConfigError(f"images decoder must be 'auto', 'compiled' or 'numpy', got "
                              f"{self.decoder!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ImageConfig:
        """Defaults overridden by ``TESSERA_IMAGES_*`` variables."""
        return _from_env(cls, "TESSERA_IMAGES_", os.environ if environ is None else environ)


@dataclasses.dataclass(frozen=True)
class CacheConfig:
    """Budgets of the process-wide caches of metadata (``TESSERA_*_CACHE_BYTES``, read when
    each cache is first used), and of the :mod:`tessera.h5` datasets' chunk caches. The other
    caches of data have theirs beside their engines:
    ``TESSERA_IMAGES_CACHE_BYTES`` (:class:`ImageConfig`), ``TESSERA_SERVER_CACHE_BYTES``
    and ``TESSERA_SERVER_MODEL_CACHE_BYTES`` (:class:`ServerConfig`).

    Attributes:
        fragments_cache_bytes: committed fragments' bookkeeping (JSON bytes).
        footers_cache_bytes: tensor tables' Parquet footers (serialized bytes).
        headers_cache_bytes: tensor tables' header rows (about 512 bytes a row).
        h5_chunk_cache_bytes: each :mod:`tessera.h5` dataset's chunk cache on memory and
            local folder stores (decoded chunks, as HDF5's ``rdcc_nbytes``; its default in
            HDF5 2.0); a file's ``rdcc_nbytes`` overrides it.

    >>> CacheConfig.from_env({"TESSERA_FOOTERS_CACHE_BYTES": "0"}).footers_cache_bytes
    0
    """

    fragments_cache_bytes: int = 64 << 20
    footers_cache_bytes: int = 16 << 20
    headers_cache_bytes: int = 64 << 20
    h5_chunk_cache_bytes: int = 8 << 20

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{field.name} must be a number of bytes >= 0, got "
                                  f"{value!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CacheConfig:
        """Defaults overridden by ``TESSERA_FRAGMENTS_CACHE_BYTES``,
        ``TESSERA_FOOTERS_CACHE_BYTES``, ``TESSERA_HEADERS_CACHE_BYTES`` and
        ``TESSERA_H5_CHUNK_CACHE_BYTES``."""
        return _from_env(cls, "TESSERA_", os.environ if environ is None else environ)


#: The Parquet compressions of tensor tables' files, by the name settings use, with
#: Parquet's own name (the one list: :class:`TablesConfig` and the table writer read it).
TABLE_CODECS: dict[str, str] = {"zstd": "ZSTD", "snappy": "SNAPPY", "lz4": "LZ4_RAW",
                                "gzip": "GZIP", "none": "UNCOMPRESSED"}


@dataclasses.dataclass(frozen=True)
class TablesConfig:
    """Tensor-table settings (``TESSERA_TABLES_*`` variables, read when a table opens).

    Attributes:
        sparsity_threshold: ``format="auto"`` stores a tensor sparse below this density
            (the Delta Tensor paper's 10%).
        chunk_bytes: bytes per data row of dense tensors (an FTSF fiber): a read moves
            whole rows, so about this much at least.
        sparse_row_bytes: bytes (before compression) per data row of sparse tensors (a run
            of COO/CSR/CSF entries or BSGS blocks): smaller rows let a slice read less; a
            whole read merges neighbouring rows into one request.
        codec: Parquet compression of the tables' files: zstd, snappy, lz4, gzip or none.
        max_row_bytes: the largest row a write may make (an FTSF fiber that cannot be
            split further is refused above it).
        max_dense_bytes: reads refuse to materialize a sparse tensor densely above this
            (``force=True`` or a sparse output instead).
        target_file_bytes: the file size ``optimize()`` compacts towards.

    >>> TablesConfig.from_env({"TESSERA_TABLES_CODEC": "snappy"}).codec
    'snappy'
    """

    sparsity_threshold: float = 0.10
    chunk_bytes: int = 4 << 20
    sparse_row_bytes: int = 256 << 10
    codec: str = "zstd"
    max_row_bytes: int = 64 << 20
    max_dense_bytes: int = 2 << 30
    target_file_bytes: int = 128 << 20

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.sparsity_threshold) <= 1.0:
            raise ConfigError(f"tables sparsity_threshold must be in 0..1, got "
                              f"{self.sparsity_threshold!r}")
        for name in ("chunk_bytes", "sparse_row_bytes", "max_row_bytes", "max_dense_bytes",
                     "target_file_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"tables {name} must be a positive number of bytes, got "
                                  f"{value!r}")
        if self.codec.lower() not in TABLE_CODECS:
            raise ConfigError(f"tables codec must be one of {', '.join(TABLE_CODECS)}, got "
                              f"{self.codec!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TablesConfig:
        """Defaults overridden by ``TESSERA_TABLES_*`` variables."""
        return _from_env(cls, "TESSERA_TABLES_", os.environ if environ is None else environ)


@dataclasses.dataclass(frozen=True)
class Config:
    """One snapshot of the settings a handle uses, read from the environment once
    (``open_array(..., config=)`` and ``TensorTable.open(..., config=)`` take one; without it
    each handle takes a fresh snapshot when it opens).

    >>> cfg = Config.from_env({"TESSERA_WRITE_CAST": "unsafe", "TESSERA_PLANNER_PHI": "2"})
    >>> cfg.writes.cast, cfg.planner.phi, cfg.store.max_concurrency
    ('unsafe', 2.0, 32)
    """

    store: StoreConfig
    planner: PlannerConfig
    reads: ReadConfig
    writes: WriteConfig
    pushdown: PushdownConfig
    tables: TablesConfig

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        """Every part from one reading of the environment (``environ``, default the
        process's)."""
        env = dict(os.environ if environ is None else environ)
        return cls(StoreConfig.from_env(env), PlannerConfig.from_env(env),
                   ReadConfig.from_env(env), WriteConfig.from_env(env),
                   PushdownConfig.from_env(env), TablesConfig.from_env(env))


def environment() -> Mapping[str, str]:
    """The process environment. The configuration is the only place Tessera reads it: every
    other module takes a typed config (``*.from_env()``) or asks here (the storage layer for
    the cloud SDKs' own variables, such as ``AWS_ENDPOINT_URL``)."""
    return os.environ


def export_to_children(name: str, value: str) -> None:
    """Set ``name`` in this process's environment for the processes it starts (the pushdown
    server hands its settings to its worker processes this way); the one place Tessera
    writes the environment."""
    os.environ[name] = value


@dataclasses.dataclass(frozen=True)
class ProcessConfig:
    """Settings of the process around the engines (``TESSERA_*`` variables).

    Attributes:
        profile_dir: where link profiles are saved (``TESSERA_PROFILE_DIR``; empty: the
            user cache folder).
        debug: the CLI shows tracebacks instead of one-line errors (``TESSERA_DEBUG``).

    >>> ProcessConfig.from_env({"TESSERA_DEBUG": "1"}).debug
    True
    """

    profile_dir: str = ""
    debug: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ProcessConfig:
        """Defaults overridden by ``TESSERA_PROFILE_DIR`` and ``TESSERA_DEBUG``."""
        env = os.environ if environ is None else environ
        if "TESSERA_DEBUG" in env and env["TESSERA_DEBUG"].strip() == "":
            env = {k: v for k, v in env.items() if k != "TESSERA_DEBUG"}
        return _from_env(cls, "TESSERA_", env)


#: Every settings class with the prefix of its environment variables (``prefix + FIELD``
#: in upper case), in the order the configuration guide lists them.
ENVIRONMENT: tuple[tuple[type, str], ...] = (
    (StoreConfig, "TESSERA_STORE_"), (RetryPolicy, "TESSERA_RETRY_"),
    (PlannerConfig, "TESSERA_PLANNER_"), (ReadConfig, "TESSERA_READ_"),
    (WriteConfig, "TESSERA_WRITE_"), (TablesConfig, "TESSERA_TABLES_"),
    (ImageConfig, "TESSERA_IMAGES_"), (CacheConfig, "TESSERA_"),
    (PushdownConfig, "TESSERA_PUSHDOWN_"), (ServerConfig, "TESSERA_SERVER_"),
    (ProcessConfig, "TESSERA_"))


def has_screen(environ: Mapping[str, str] | None = None, platform: str = sys.platform) -> bool:
    """Whether a browser can open here: macOS or Windows, or a desktop session (``DISPLAY``
    or ``WAYLAND_DISPLAY`` set); ``tessera view`` opens one only then.

    >>> has_screen({}, "linux"), has_screen({"DISPLAY": ":0"}, "linux"), has_screen({}, "darwin")
    (False, True, True)
    """
    env = os.environ if environ is None else environ
    return platform in ("darwin", "win32") or bool(env.get("DISPLAY")
                                                   or env.get("WAYLAND_DISPLAY"))


#: Config dataclasses' field types, resolved once per class (``get_type_hints`` takes about
#: 0.1 ms a class, and the configs are read from the environment on every open).
_FIELD_TYPES: dict[type, dict[str, Any]] = {}


def _from_env(cls: type[T], prefix: str, env: Mapping[str, str], **fixed: Any) -> T:
    """Build dataclass ``cls`` from ``prefix + FIELD`` variables for its scalar fields."""
    hints = _FIELD_TYPES.get(cls)
    if hints is None:
        hints = _FIELD_TYPES[cls] = get_type_hints(cls)
    values: dict[str, Any] = dict(fixed)
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if field.name in fixed:
            continue
        name = prefix + field.name.upper()
        if name not in env:
            continue
        raw = env[name]
        kind = hints[field.name]
        try:
            if kind is int:
                values[field.name] = int(raw)
            elif kind is float:
                values[field.name] = float(raw)
            elif kind is bool:
                values[field.name] = _parse_bool(raw)
            else:
                values[field.name] = raw
        except ValueError:
            raise ConfigError(
                f"environment variable {name}={raw!r} is not a valid {kind.__name__}"
            ) from None
    try:
        return cls(**values)
    except ConfigError as err:
        raise ConfigError(f"{err} (from {prefix}* environment variables)") from None


def _parse_bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in {"1", "true", "yes", "on"}:
        return True
    if low in {"0", "false", "no", "off"}:
        return False
    raise ValueError(raw)
