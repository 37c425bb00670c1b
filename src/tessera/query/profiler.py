"""The micro-profiler (the ArrayMorph paper, section 3.1): measure a store's bandwidth at
several request concurrencies and its per-request latency, save the result per endpoint and
reuse it for every later plan.

- ``BW(N)``: a scratch object is read as ``N`` concurrent, equal range requests covering it;
  bytes over wall time, best of the repeats, for each ``N``.
- ``T_R``: small (1 KiB) range requests one after another; the median latency minus the
  transfer time of 1 KiB at ``BW(1)``.
- ``t`` (client concurrency): the largest measured ``N`` still within 90% of the peak
  bandwidth (the paper's ``N_max``), capped by the store's ``max_concurrency``.

Profiles are JSON files in ``TESSERA_PROFILE_DIR`` or the user cache folder
(``platformdirs``), one per endpoint; :func:`load_profile` finds them again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import hashlib
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs

from tessera._sync import run_sync
from tessera.errors import ConfigError
from tessera.query.cost import StoreProfile
from tessera.storage.store import AsyncStore, Store, open_store

PROFILE_VERSION = 1
SCRATCH_PREFIX = "__tessera_profile"


@dataclasses.dataclass(frozen=True)
class ProfileSettings:
    """How much to measure: object size, concurrency levels, repeats, latency samples."""

    object_bytes: int
    levels: tuple[int, ...]
    repeats: int
    latency_samples: int


QUICK = ProfileSettings(4 << 20, (1, 2, 4, 8), 2, 8)
FULL = ProfileSettings(128 << 20, (1, 2, 4, 8, 16, 32, 64), 3, 32)


def profile_dir() -> Path:
    """Where profiles are saved: ``TESSERA_PROFILE_DIR``, else the user cache folder."""
    env = os.environ.get("TESSERA_PROFILE_DIR")
    return Path(env) if env else Path(platformdirs.user_cache_dir("tessera")) / "profiles"


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
    a damaged file is ignored, never trusted)."""
    path = _path_for(endpoint_id(store), directory)
    try:
        doc = json.loads(path.read_text())
        if doc.get("format") != "tessera.profile" or doc.get("version") != PROFILE_VERSION:
            return None
        p = doc["profile"]
        return StoreProfile(str(p["name"]), tuple((int(n), float(b)) for n, b in p["bandwidth"]),
                            float(p["request_latency_s"]), int(p["concurrency"]),
                            _opt(p.get("pushdown_alpha_s_per_byte")),
                            _opt(p.get("pushdown_beta_s")), float(p["pushdown_memory_gb"]))
    except (OSError, ValueError, KeyError, TypeError, ConfigError):
        return None


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)


def profile_store(url: str | Store, pushdown: str | None = None, quick: bool = False, *,
                  save: bool = True, directory: Path | None = None,
                  progress: Callable[[str, float], None] | None = None,
                  **storage_options: Any) -> StoreProfile:
    """Measure a store and (by default) save the profile for its endpoint.

    Args:
        url: a store URL (or an open store); a scratch object is written below it under
            ``__tessera_profile-<id>`` and removed afterwards.
        pushdown: a pushdown server URL to measure ``alpha`` and ``beta`` against; not
            available until the pushdown server exists (raises ``ConfigError``).
        quick: a few seconds of measuring (4 MiB object, 1-8 requests); the full mode
            reads 128 MiB at 1-64 concurrent requests, three times.
        save: write the profile where :func:`load_profile` finds it.
        progress: called with a step name and the fraction done.

    >>> import tessera
    >>> prof = tessera.profile_store("memory://doc-profile", quick=True, save=False)
    >>> prof.bandwidth[0][0], prof.request_latency_s > 0
    (1, True)
    """
    if pushdown is not None:
        raise ConfigError("profiling a pushdown server needs the pushdown server, which "
                          "Tessera does not ship yet; profile without pushdown=")
    store = url if isinstance(url, Store) else open_store(url, **storage_options)
    settings = QUICK if quick else FULL
    profile = run_sync(_measure(store.aio, settings, progress or (lambda step, done: None)))
    if save:
        save_profile(profile, endpoint_id(store), directory)
    return profile


async def _measure(store: AsyncStore, s: ProfileSettings,
                   progress: Callable[[str, float], None]) -> StoreProfile:
    key = f"{SCRATCH_PREFIX}-{uuid.uuid4().hex}"  # at the root: no folder left behind
    data = np.random.default_rng().integers(0, 255, s.object_bytes, dtype=np.uint8)
    steps = len(s.levels) * s.repeats + s.latency_samples
    done = 0
    progress("upload", 0.0)
    await store.put(key, data)
    try:
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
            points.append((n, s.object_bytes / best))
        latencies = []
        for i in range(s.latency_samples):
            t0 = time.perf_counter()
            await store.get_range(key, (i * 7919 * 1024) % (s.object_bytes - 1024), 1024)
            latencies.append(time.perf_counter() - t0)
            done += 1
            progress("latency", done / steps)
    finally:
        await store.delete(key)
    bw1 = points[0][1]
    t_r = max(1e-6, statistics.median(latencies) - 1024 / bw1)
    peak = max(b for _, b in points)
    n_max = max(n for n, b in points if b >= 0.9 * peak)
    return StoreProfile(f"measured:{store.url}", tuple(points), t_r,
                        max(1, min(n_max, store.config.max_concurrency)))
