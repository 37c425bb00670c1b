"""The micro-profiler (the ArrayMorph paper, section 3.1): measure a store's bandwidth at
several request concurrencies and its per-request latency, save the result per endpoint and
reuse it for every later plan.

- ``BW(N)``: a scratch object is read as ``N`` concurrent, equal range requests covering it;
  bytes over wall time, best of the repeats, for each ``N``.
- ``T_R``: small (1 KiB) range requests one after another; the median latency minus the
  transfer time of 1 KiB at ``BW(1)``. Of a memory or folder store they are read on the
  calling thread, as its small reads are (docs/performance.md).
- ``call_s``, ``tile_s``: the client's own work per read call and per tile, when a meter
  is given (``tessera store profile`` gives the array reader's).
- ``t`` (client concurrency): the largest measured ``N`` still within 90% of the peak
  bandwidth (the paper's ``N_max``), capped by the store's ``max_concurrency``.
- With a pushdown server: ``T_lambda(size) = alpha * size + beta``, a least-squares line
  through the median time of each of several tile sizes (parts of the scratch object, each
  read once so the server's cache does not flatter it, one byte returned), timed from the
  client. Medians, so that one pushdown slowed by a busy machine does not tilt the line;
  sizes up to most of the scratch object, so that ``alpha`` rests on a difference of
  milliseconds rather than on the noise of one round trip. The paper
  times lambdas on the provider's side and charges them no request latency (``N_R = 0`` for
  Lambda in its Table 3); timing from the client puts the round trip to the server, which a
  pushdown pays like any request, into ``beta`` so that the paper's formula stays as it is.

Profiles are JSON files in ``TESSERA_PROFILE_DIR`` or the user cache folder
(``platformdirs``), one per endpoint; :func:`load_profile` finds them again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import hashlib
import json
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs

from tessera._sync import run_sync
from tessera.config import ProcessConfig
from tessera.errors import ConfigError
from tessera.format.checksum import DEFAULT_CHECKSUM, checksum
from tessera.query.cost import StoreProfile
from tessera.query.plan import default_profile
from tessera.storage.blocking import Store, open_store
from tessera.storage.store import AsyncStore

PROFILE_VERSION = 1
SCRATCH_PREFIX = "__tessera_profile"


@dataclasses.dataclass(frozen=True)
class ProfileSettings:
    """How much to measure: object size, concurrency levels, repeats, latency samples,
    pushdown tile sizes and samples per size."""

    object_bytes: int
    levels: tuple[int, ...]
    repeats: int
    latency_samples: int
    pushdown_sizes: tuple[int, ...] = ()
    pushdown_samples: int = 0


#: Quick mode's pushdowns reach 3 MiB of its 4 MiB object: with sizes up to 1 MiB, five
#: profiles of one link (RTT 20 ms) gave ``alpha`` from 0.55 to 2.23 ns/B, since a 1 MiB
#: pushdown costs only ~1 ms more than a 64 KiB one, about the noise of a round trip.
QUICK = ProfileSettings(4 << 20, (1, 2, 4, 8, 16, 32), 2, 8, (64 << 10, 1 << 20, 3 << 20), 5)
FULL = ProfileSettings(128 << 20, (1, 2, 4, 8, 16, 32, 64), 3, 32,
                       (64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20), 6)


def profile_dir() -> Path:
    """Where profiles are saved: ``TESSERA_PROFILE_DIR``, else the user cache folder."""
    chosen = ProcessConfig.from_env().profile_dir
    return Path(chosen) if chosen else Path(platformdirs.user_cache_dir("tessera")) / "profiles"


def endpoint_id(store: Store | AsyncStore) -> str:
    """The endpoint a profile belongs to: local folders share one, memory stores one, cloud
    stores are told apart by scheme, bucket and endpoint."""
    aio = store.aio if isinstance(store, Store) else store
    url = aio.url
    if url.scheme in ("file", "memory"):
        return url.scheme
    return f"{url.scheme}://{url.bucket}@{aio.endpoint or 'default'}"


def _path_for(endpoint: str, directory: Path | None) -> Path:
    digest = hashlib.sha256(endpoint.encode()).hexdigest()[:16]
    return (directory or profile_dir()) / f"{digest}.json"


def save_profile(profile: StoreProfile, endpoint: str, directory: Path | None = None) -> Path:
    """Write ``profile`` as the one for ``endpoint``; returns the file."""
    path = _path_for(endpoint, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": "tessera.profile", "version": PROFILE_VERSION, "endpoint": endpoint,
           "measured": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "profile": dataclasses.asdict(profile)}
    tmp = path.with_suffix(f".{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)
    return path


def load_profile(store: Store | AsyncStore, directory: Path | None = None,
                 ) -> StoreProfile | None:
    """The saved profile of ``store``'s endpoint, or ``None`` (none saved, or unreadable:
    a damaged file is ignored, never trusted).

    >>> import tempfile, tessera
    >>> tessera.load_profile(tessera.open_store("memory://doc-load-profile"),
    ...                      directory=Path(tempfile.mkdtemp())) is None  # none saved yet
    True
    """
    path = _path_for(endpoint_id(store), directory)
    try:
        doc = json.loads(path.read_text())
        if doc.get("format") != "tessera.profile" or doc.get("version") != PROFILE_VERSION:
            return None
        p = doc["profile"]
        kind = default_profile(store.url)
        return StoreProfile(str(p["name"]), tuple((int(n), float(b)) for n, b in p["bandwidth"]),
                            float(p["request_latency_s"]), int(p["concurrency"]),
                            _opt(p.get("pushdown_alpha_s_per_byte")),
                            _opt(p.get("pushdown_beta_s")), float(p["pushdown_memory_gb"]),
                            # profiles saved before the client's work was measured
                            float(p.get("call_s", kind.call_s)),
                            float(p.get("tile_s", kind.tile_s)),
                            _opt(p.get("now_request_s")), _opt(p.get("now_bytes_per_s")))
    except (OSError, ValueError, KeyError, TypeError, ConfigError):
        return None


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)


#: Measures the client's work per read call and per tile (``call_s``, ``tile_s``) on a store
#: with a profile of its requests; the array floor provides one
#: (:func:`tessera.array.calibrate.measure_calls`).
CallMeter = Callable[[Store, StoreProfile], tuple[float, float]]


def profile_store(url: str | Store, pushdown: Any = None, quick: bool = False, *,
                  save: bool = True, directory: Path | None = None,
                  progress: Callable[[str, float], None] | None = None,
                  calls: CallMeter | None = None,
                  **storage_options: Any) -> StoreProfile:
    """Measure a store and (by default) save the profile for its endpoint.

    Args:
        url: a store URL (or an open store); a scratch object is written below it under
            ``__tessera_profile-<id>`` and removed afterwards.
        pushdown: a pushdown server (URL or
            :class:`~tessera.pushdown.client.PushdownClient`; token from
            ``TESSERA_PUSHDOWN_TOKEN``) whose root holds ``url``: also measure its ``alpha``
            and ``beta``.
        quick: a few seconds of measuring (4 MiB object, 1-32 requests); the full mode
            reads 128 MiB at 1-64 concurrent requests, three times. ``T_R`` is the median
            time of 1 KiB ranges (of a memory or folder store, read on the calling thread,
            as its small reads are); ``BW(N)`` is the object's size over the best time of N
            concurrent ranges less ``T_R`` (the cost model adds ``T_R`` itself).
        save: write the profile where :func:`load_profile` finds it.
        progress: called with a step name and the fraction done.
        calls: measures the client's own work per read (``call_s``, ``tile_s``) once the
            requests are profiled (``tessera store profile`` passes the array reader's,
            :func:`tessera.array.calibrate.measure_calls`); without it the built-in
            defaults for the kind of store stay.

    >>> import tessera
    >>> prof = tessera.profile_store("memory://doc-profile", quick=True, save=False)
    >>> prof.bandwidth[0][0], prof.request_latency_s > 0
    (1, True)
    """
    from tessera.pushdown.client import PushdownClient

    client = PushdownClient(pushdown) if isinstance(pushdown, str) else pushdown
    store = url if isinstance(url, Store) else open_store(url, **storage_options)
    settings = QUICK if quick else FULL
    profile = run_sync(_measure(store.aio, settings, progress or (lambda step, done: None),
                                client))
    kind = default_profile(store.url)
    call_s, tile_s = (kind.call_s, kind.tile_s) if calls is None else calls(store, profile)
    profile = dataclasses.replace(profile, call_s=call_s, tile_s=tile_s)
    if save:
        save_profile(profile, endpoint_id(store), directory)
    return profile


async def _measure(store: AsyncStore, s: ProfileSettings,
                   progress: Callable[[str, float], None], client: Any = None,
                   ) -> StoreProfile:
    key = f"{SCRATCH_PREFIX}-{uuid.uuid4().hex}"  # at the root: no folder left behind
    data = np.random.default_rng().integers(0, 255, s.object_bytes, dtype=np.uint8)
    array_path = None if client is None else await client.array_path(store.url)
    pushdowns = 0 if client is None else len(s.pushdown_sizes) * s.pushdown_samples
    steps = len(s.levels) * s.repeats + s.latency_samples + pushdowns
    done = 0
    progress("upload", 0.0)
    await store.put(key, data)
    try:
        latencies = []
        for i in range(s.latency_samples):
            at = (i * 7919 * 1024) % (s.object_bytes - 1024)
            t0 = time.perf_counter()
            if store.reads_now:  # small reads of such stores are made on the calling thread
                store.read_range_now(key, at, 1024)
            else:
                await store.get_range(key, at, 1024)
            latencies.append(time.perf_counter() - t0)
            done += 1
            progress("latency", done / steps)
        latency = statistics.median(latencies)
        now = _calling_thread_reads(store, key, s.object_bytes) if store.reads_now else None
        points = []
        for n in s.levels:
            size = -(-s.object_bytes // n)
            best = float("inf")
            for _ in range(s.repeats):
                t0 = time.perf_counter()
                await asyncio.gather(*(store.get_range(key, i * size,
                                                       min(size, s.object_bytes - i * size))
                                       for i in range(n) if i * size < s.object_bytes))
                best = min(best, time.perf_counter() - t0)
                done += 1
                progress(f"bandwidth, {n} requests", done / steps)
            # Transfer time alone: the cost model adds T_R per wave of requests itself.
            points.append((n, s.object_bytes / max(best - latency, 0.1 * best)))
        alpha = beta = None
        if client is not None:
            timings: list[tuple[int, float]] = []
            offset = 0
            for size in s.pushdown_sizes:
                size = min(size, s.object_bytes)
                for _ in range(s.pushdown_samples):
                    # A fresh part of the object each time: the server cannot answer from
                    # its cache.
                    start = offset % (s.object_bytes - size + 1)
                    offset += size + 4096
                    assert array_path is not None
                    timings.append((size, await _pushdown_once(client, array_path, key,
                                                               data, start, size)))
                    done += 1
                    progress("pushdown", done / steps)
            alpha, beta = _fit_pushdown(timings)
    finally:
        await store.delete(key)
    t_r = max(1e-6, latency - 1024 / points[0][1])
    peak = max(b for _, b in points)
    n_max = max(n for n, b in points if b >= 0.9 * peak)
    now_s, now_rate = (None, None) if now is None else now
    return StoreProfile(f"measured:{store.url}", tuple(points), t_r,
                        max(1, min(n_max, store.config.max_concurrency)), alpha, beta,
                        now_request_s=now_s, now_bytes_per_s=now_rate)


#: Sizes and samples of the calling-thread ranges :func:`_calling_thread_reads` times.
NOW_SIZES = (1 << 10, 64 << 10)
NOW_SAMPLES = 64


def _calling_thread_reads(store: AsyncStore, key: str, size: int,
                          ) -> tuple[float, float | None]:
    """``(now_request_s, now_bytes_per_s)`` of a memory or folder store: the median time
    of :data:`NOW_SAMPLES` ranges of each of :data:`NOW_SIZES` read on the calling thread
    (as its small reads are made), a line through the two (no rate when the larger ranges
    were not slower: ``BW(1)`` stands in). A 20 KiB range of a folder took ~9 us, of which
    a 4 MiB read's ``BW(1)`` (~1 GB/s) would have charged 20 us for the bytes alone.

    >>> import tessera
    >>> store = tessera.open_store("memory://doc-now-reads").aio
    >>> _ = tessera.open_store("memory://doc-now-reads").put("k", bytes(1 << 20))
    >>> per, rate = _calling_thread_reads(store, "k", 1 << 20)
    >>> per > 0 and (rate is None or rate > 0)
    True
    """
    medians = []
    for n in NOW_SIZES:
        times = []
        for i in range(NOW_SAMPLES):
            at = (i * 7919 * 1024) % (size - n)
            t0 = time.perf_counter()
            store.read_range_now(key, at, n)
            times.append(time.perf_counter() - t0)
        medians.append(statistics.median(times))
    extra = medians[1] - medians[0]
    rate = (NOW_SIZES[1] - NOW_SIZES[0]) / extra if extra > 0 else None
    per = medians[0] - (NOW_SIZES[0] / rate if rate else 0.0)
    return max(1e-7, per), rate


async def _pushdown_once(client: Any, array_path: str, key: str, data: np.ndarray,
                         start: int, size: int) -> float:
    """Seconds of one pushdown of ``size`` bytes at ``start`` of the scratch object, as the
    client sees them (one byte selected, so the answer is negligible)."""
    from tessera.errors import PushdownError
    from tessera.pushdown.framing import ItemError
    from tessera.pushdown.read_items import Slice, TileItem

    crc = checksum(data[start:start + size], DEFAULT_CHECKSUM)
    item = TileItem(array_path, key, start, size, None, crc, "|u1", (), (size,), "row-major",
                    (Slice(0, 1, 1),), checksum=DEFAULT_CHECKSUM)
    t0 = time.perf_counter()
    response = await client.read([item])
    seconds = time.perf_counter() - t0
    if isinstance(response.results[0], ItemError):
        raise PushdownError(f"pushdown server {client.url} failed a profiling read: "
                            f"{response.results[0].error}")
    return seconds


def _fit_pushdown(timings: list[tuple[int, float]]) -> tuple[float, float]:
    """``(alpha, beta)`` of ``T = alpha * size + beta``: least squares through the median
    time of each size (both >= 0; the median time as ``beta`` when the sizes do not vary).

    >>> a, b = _fit_pushdown([(1000, 0.011), (1000, 0.5), (1000, 0.011), (3000, 0.013)])
    >>> round(a * 1e6, 3), round(b, 3)    # the 0.5 s outlier does not move the line
    (1.0, 0.01)
    """
    by_size: dict[int, list[float]] = {}
    for size, seconds in timings:
        by_size.setdefault(int(size), []).append(float(seconds))
    if len(by_size) < 2:
        return 0.0, float(np.median([t[1] for t in timings]))
    sizes = np.array(sorted(by_size), dtype=np.float64)
    secs = np.array([statistics.median(by_size[int(n)]) for n in sizes], dtype=np.float64)
    alpha, beta = np.polyfit(sizes, secs, 1)
    if beta < 0:  # keep the fit through the origin's side: a call is never free
        alpha, beta = float(np.sum(sizes * secs) / np.sum(sizes * sizes)), 0.0
    return max(0.0, float(alpha)), max(1e-6, float(beta))
