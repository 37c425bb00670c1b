"""Table versions as users give them, checked before deltalake sees them (it overflows on a
negative number and panics on some malformed values)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np

from tessera.errors import InvalidArgumentError, InvalidTypeError, TableVersionError


def checked_version(version: Any, latest: int, url: str) -> int | str | dt.datetime:
    """A table version as deltalake takes it, checked first (deltalake overflows on a
    negative number and panics on some malformed values): a number in ``0..latest``, a
    timezone-aware datetime, or an RFC 3339 string with a timezone."""
    if isinstance(version, (int, np.integer)) and not isinstance(version, (bool, np.bool_)):
        if not 0 <= int(version) <= latest:
            raise TableVersionError(f"{url} has no version {int(version)} (versions "
                                    f"0..{latest})")
        return int(version)
    if isinstance(version, str):
        try:
            when = dt.datetime.fromisoformat(version.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgumentError(f"version {version!r} of {url} is neither a number "
                                       "nor an RFC 3339 time (e.g. 2026-01-31T12:00:00Z)"
                                       ) from None
        if when.tzinfo is None:
            raise InvalidArgumentError(f"version time {version!r} of {url} has no timezone; "
                                       "add one (e.g. Z for UTC)")
        return version
    if isinstance(version, dt.datetime):
        if version.tzinfo is None:
            raise InvalidArgumentError(f"version time {version} of {url} has no timezone; "
                                       "pass an aware datetime (e.g. tzinfo=datetime.UTC)")
        return version
    raise InvalidTypeError(f"version of {url} must be a number, a datetime or an RFC 3339 "
                           f"string, got {type(version).__name__}")
