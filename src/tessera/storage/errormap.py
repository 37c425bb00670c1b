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
    def make(cls: type[StorageError], message: str) -> StorageError:
        return cls(message, url=url, key=key, op=op)

    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, TimeoutError):
        return make(TransientStorageError, f"no answer within {timeout_s:g} s")
    if isinstance(exc, (FileNotFoundError, obs_exc.NotFoundError)):
        return make(ObjectNotFoundError, "no such object")
    if isinstance(exc, (FileExistsError, obs_exc.AlreadyExistsError)):
        return make(ObjectExistsError, "an object already exists at this key")
    if isinstance(exc, obs_exc.PreconditionError):
        return make(PreconditionFailedError, "the object does not match the given ETag")
    if isinstance(exc, (PermissionError, obs_exc.PermissionDeniedError,
                        obs_exc.UnauthenticatedError)):
        return make(AccessDeniedError, short_detail(exc))
    if isinstance(exc, (NotImplementedError, obs_exc.NotSupportedError)):
        return make(PermanentStorageError, f"not supported by this store: {short_detail(exc)}")
    text = str(exc)
    status = http_status(exc)
    if status == 416 or any(w in text for w in _RANGE_WORDS):
        return make(InvalidRangeError, "the range starts at or past the end of the object")
    if status is not None:
        if status in TRANSIENT_STATUS:
            return make(TransientStorageError, f"HTTP {status}: {short_detail(exc)}")
        if status in (401, 403):
            return make(AccessDeniedError, f"HTTP {status}: {short_detail(exc)}")
        return make(PermanentStorageError, f"HTTP {status}: {short_detail(exc)}")
    if networked and isinstance(exc, (obs_exc.GenericError, OSError, ConnectionError)):
        return make(TransientStorageError, short_detail(exc))
    return make(PermanentStorageError, short_detail(exc))
