"""Growing dense arrays (h5py's ``resize`` with ``maxshape``, zarr's ``append``, TileDB's
current domain): the schema holds the most cells per dimension (``maxshape``); the current
shape is kept in small timestamped objects, so time travel sees the shape of its time.

- ``arr.resize(shape)`` writes ``__shape/r<timestamp>-<id>.json`` with the new shape (it may
  shrink: cells beyond it are hidden, not erased). Each resize starts a new *epoch* of claims.
- ``arr.append(values, axis)`` claims the next range along ``axis`` with a create-only put of
  ``__claims/<epoch>/<axis>/c<start>.json`` (``start`` counted from the domain's start;
  the claim holds its ``stop`` and timestamp). Two appenders that saw the same end race for the
  same key; the loser reads the winner's claim and tries the next range, so appenders get
  disjoint ranges and never overwrite each other. The claimant then writes its values there.

The shape at a time is the newest resize at or before it (the created shape before any),
grown along each axis to the end of the newest claim of that epoch at or before it. A claimed
range reads as the fill value until its values are committed. A resize is not meant to race
with appends along the same axis (an append claimed in the old epoch after the resize is
not part of the new shape).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from tessera.array.names import new_fragment_id, new_timestamp
from tessera.errors import CorruptDataError, InvalidArgumentError, ObjectExistsError
from tessera.format.schema import ArraySchema
from tessera.storage.store import AsyncStore

SHAPES = "__shape"
CLAIMS = "__claims"
INITIAL_EPOCH = "initial"


@dataclasses.dataclass(frozen=True)
class Extent:
    """The current shape and the epoch (the newest resize's name) new claims go under."""

    shape: tuple[int, ...]
    epoch: str


def _ts(name: str) -> int:
    return int(name[1:21])


async def _names(store: AsyncStore, prefix: str) -> list[str]:
    return sorted(o.key.rsplit("/", 1)[1] for o in await store.list(prefix)
                  if o.key.endswith(".json"))


async def _json(store: AsyncStore, key: str, uri: str) -> dict[str, Any]:
    try:
        doc = json.loads(bytes(await store.get(key)))
    except ValueError as err:
        raise CorruptDataError(f"array {uri}: {key} is damaged ({err})") from None
    if not isinstance(doc, dict):
        raise CorruptDataError(f"array {uri}: {key} is damaged (not a JSON object)")
    return doc


async def load_extent(store: AsyncStore, created: ArraySchema, timestamp: int | None,
                      uri: str) -> Extent:
    """The shape of a growable array as of ``timestamp`` (now when ``None``)."""
    records = [n for n in await _names(store, f"{SHAPES}/")
               if timestamp is None or _ts(n) <= timestamp]
    shape = list(created.shape)
    epoch = INITIAL_EPOCH
    if records:
        doc = await _json(store, f"{SHAPES}/{records[-1]}", uri)
        try:
            shape = [int(n) for n in doc["shape"]]
        except (KeyError, TypeError, ValueError) as err:
            raise CorruptDataError(f"array {uri}: shape record {records[-1]} is damaged "
                                   f"({err})") from None
        epoch = records[-1][:-len(".json")]
    for axis in _growable_axes(created):
        stop = await _top_claim(store, epoch, axis, timestamp, uri)
        if stop is not None:
            shape[axis] = max(shape[axis], stop)
    return Extent(tuple(shape), epoch)


def _growable_axes(schema: ArraySchema) -> list[int]:
    assert schema.maxshape is not None
    return [i for i, (d, m) in enumerate(zip(schema.dims, schema.maxshape, strict=True))
            if m is None or m > d.size]


def _claim_prefix(epoch: str, axis: int) -> str:
    return f"{CLAIMS}/{epoch}/{axis}/"


async def _top_claim(store: AsyncStore, epoch: str, axis: int, timestamp: int | None,
                     uri: str) -> int | None:
    """The end (cells from the domain's start) of the newest claim at or before
    ``timestamp``; claims are made one after the other, so later starts are newer."""
    prefix = _claim_prefix(epoch, axis)
    for name in reversed(await _names(store, prefix)):
        doc = await _json(store, prefix + name, uri)
        try:
            stop, t = int(doc["stop"]), int(doc["t"])
        except (KeyError, TypeError, ValueError) as err:
            raise CorruptDataError(f"array {uri}: claim {prefix}{name} is damaged ({err})"
                                   ) from None
        if timestamp is None or t <= timestamp:
            return stop
    return None


async def claim(store: AsyncStore, created: ArraySchema, axis: int, count: int,
                uri: str) -> tuple[int, Extent]:
    """Claim ``count`` cells at the end of ``axis``: returns where they start (cells from
    the domain's start) and the extent the claim was made in."""
    if axis not in _growable_axes(created):
        raise InvalidArgumentError(f"array {uri} cannot grow along axis {axis} (its maxshape "
                                   f"there is its size); create it with maxshape=... to append")
    lo = int(created.dims[axis].domain[0])
    while True:
        extent = await load_extent(store, created, None, uri)
        start = extent.shape[axis]
        if lo + start + count - 1 > created.max_hi(axis):
            raise InvalidArgumentError(
                f"appending {count} along axis {axis} of {uri} would give {start + count} "
                f"cells; its maxshape allows {created.max_hi(axis) - lo + 1}")
        doc = json.dumps({"stop": start + count, "t": new_timestamp()}).encode()
        try:
            await store.put(f"{_claim_prefix(extent.epoch, axis)}c{start:020d}.json", doc,
                            mode="create")
        except ObjectExistsError:
            continue  # another appender took this range: try after it
        return start, extent


async def record_resize(store: AsyncStore, created: ArraySchema, shape: tuple[int, ...],
                        uri: str) -> None:
    """Record ``shape`` as the array's shape from now on (checked against ``maxshape``)."""
    if len(shape) != len(created.dims):
        raise InvalidArgumentError(f"resize needs {len(created.dims)} sizes, got {shape}")
    for axis, (n, d) in enumerate(zip(shape, created.dims, strict=True)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InvalidArgumentError(f"resize: size {n!r} of axis {axis} must be an integer "
                                       ">= 0")
        if int(d.domain[0]) + n - 1 > created.max_hi(axis):
            raise InvalidArgumentError(
                f"resize: {n} cells along axis {axis} ({d.name!r}) exceed the maxshape "
                f"{created.max_hi(axis) - int(d.domain[0]) + 1} of {uri}")
        if n == 0 and axis not in _growable_axes(created):
            raise InvalidArgumentError(f"resize: axis {axis} ({d.name!r}) cannot be empty")
    name = f"r{new_timestamp():020d}-{new_fragment_id()}.json"
    await store.put(f"{SHAPES}/{name}", json.dumps({"shape": list(shape)}).encode(),
                    mode="create")
