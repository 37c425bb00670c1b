"""Maps what obstore (and asyncio) raise onto Tessera's error hierarchy, at one boundary."""

from __future__ import annotations

import re

from obstore import exceptions as obs_exc

from tessera.errors import (
    AccessDeniedError,
    InvalidRangeError,
    ObjectExistsError,
    ObjectNotFoundError,
    PermanentStorageError,
    PreconditionFailedError,
    StorageError,
    TransientStorageError,
)

_STATUS = re.compile(r"status code: (\d{3})")
_RANGE_WORDS = ("StartTooLarge", "Requested range was invalid", "Invalid range", "InvalidRange")
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def http_status(exc: BaseException) -> int | None:
    """The HTTP status code an obstore error reports, if any."""
    match = _STATUS.search(str(exc))
    return int(match.group(1)) if match else None


def short_detail(exc: BaseException) -> str:
    """The first line of an obstore message, without its debug dump and XML body."""
    text = str(exc).split("\n", 1)[0].strip()
    text = text.split("<?xml", 1)[0].rstrip(" :")
    return text[:400] or type(exc).__name__


def map_error(exc: BaseException, *, url: str, key: str | None, op: str,
              networked: bool, timeout_s: float) -> StorageError:
    """Translate one failure. ``networked`` stores treat unclassified failures as transient."""
    args = {"url": url, "key": key, "op": op}
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, TimeoutError):
        return TransientStorageError(f"no answer within {timeout_s:g} s", **args)
    if isinstance(exc, (FileNotFoundError, obs_exc.NotFoundError)):
        return ObjectNotFoundError("no such object", **args)
    if isinstance(exc, (FileExistsError, obs_exc.AlreadyExistsError)):
        return ObjectExistsError("an object already exists at this key", **args)
    if isinstance(exc, obs_exc.PreconditionError):
        return PreconditionFailedError("the object does not match the given ETag", **args)
    if isinstance(exc, (PermissionError, obs_exc.PermissionDeniedError,
                        obs_exc.UnauthenticatedError)):
        return AccessDeniedError(short_detail(exc), **args)
    if isinstance(exc, (NotImplementedError, obs_exc.NotSupportedError)):
        return PermanentStorageError(f"not supported by this store: {short_detail(exc)}", **args)
    text = str(exc)
    status = http_status(exc)
    if status == 416 or any(w in text for w in _RANGE_WORDS):
        return InvalidRangeError("the range starts at or past the end of the object", **args)
    if status is not None:
        if status in TRANSIENT_STATUS:
            return TransientStorageError(f"HTTP {status}: {short_detail(exc)}", **args)
        if status in (401, 403):
            return AccessDeniedError(f"HTTP {status}: {short_detail(exc)}", **args)
        return PermanentStorageError(f"HTTP {status}: {short_detail(exc)}", **args)
    if networked and isinstance(exc, (obs_exc.GenericError, OSError, ConnectionError)):
        return TransientStorageError(short_detail(exc), **args)
    return PermanentStorageError(short_detail(exc), **args)
