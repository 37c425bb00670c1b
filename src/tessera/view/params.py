"""The viewer's request parameters, checked: paths that stay inside the viewed store,
integers, numbers and choices, each refused with a message naming the parameter.

>>> clean_path("photos/2024")
'photos/2024'
>>> clean_path("../etc")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
tessera.errors.InvalidArgumentError: path '../etc' is not inside the viewed store: ...
>>> Query({"y0": "12"}).integer("y0"), Query({}).integer("y0", 3)
(12, 3)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from tessera.errors import InvalidArgumentError

#: What one segment of a path may hold: letters, digits and ``. _ - ~ + = @ ,`` and spaces.
SEGMENT = re.compile(r"[A-Za-z0-9._~+=@, -]+")


def clean_path(path: str) -> str:
    """``path`` (relative to the viewed URL, ``""`` for the URL itself) if it cannot name
    anything outside it; :class:`~tessera.errors.InvalidArgumentError` otherwise."""
    if path in ("", "/"):
        return ""

    def refuse(why: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"path {path!r} is not inside the viewed store: {why}")

    if len(path) > 1024:
        raise refuse("longer than 1024 characters")
    if path.startswith("/"):
        raise refuse("it starts with '/' (paths are relative to the viewed URL)")
    for segment in path.rstrip("/").split("/"):
        if segment in ("", ".", ".."):
            raise refuse(f"{segment or 'an empty segment'!r} is not allowed"
                         if segment else "it has an empty segment ('//')")
        if not SEGMENT.fullmatch(segment):
            raise refuse(f"segment {segment!r} holds a character other than letters, digits, "
                         "spaces and . _ - ~ + = @ ,")
    return path.rstrip("/")


def child_url(root: str, path: str) -> str:
    """The URL of ``path`` (already :func:`clean_path`-ed) below ``root``.

    >>> child_url("s3://bucket/data/", "frames"), child_url("data", "")
    ('s3://bucket/data/frames', 'data')
    """
    return f"{root.rstrip('/')}/{path}" if path else root


class Query:
    """A request's query parameters, read with checks."""

    def __init__(self, params: Mapping[str, str]) -> None:
        self.params = params

    def _raw(self, name: str) -> str | None:
        value = self.params.get(name)
        return None if value is None or value == "" else value

    def text(self, name: str, default: str | None = None) -> str | None:
        """A text parameter (``default`` when absent or empty)."""
        value = self._raw(name)
        return default if value is None else value

    def need(self, name: str) -> str:
        """A text parameter that must be given."""
        value = self._raw(name)
        if value is None:
            raise InvalidArgumentError(f"parameter {name!r} is required")
        return value

    def integer(self, name: str, default: int | None = None, *, lo: int | None = None,
            hi: int | None = None) -> int:
        """An integer parameter within ``[lo, hi]`` when given."""
        value = self._raw(name)
        if value is None:
            if default is None:
                raise InvalidArgumentError(f"parameter {name!r} is required")
            return default
        try:
            out = int(value)
        except ValueError:
            raise InvalidArgumentError(f"parameter {name!r} must be an integer, got "
                                       f"{value!r}") from None
        if (lo is not None and out < lo) or (hi is not None and out > hi):
            raise InvalidArgumentError(f"parameter {name!r} must be within [{lo}, {hi}], got "
                                       f"{out}")
        return out

    def number(self, name: str) -> float | None:
        """A finite number parameter, or ``None`` when absent."""
        value = self._raw(name)
        if value is None:
            return None
        try:
            out = float(value)
        except ValueError:
            out = math.nan
        if not math.isfinite(out):
            raise InvalidArgumentError(f"parameter {name!r} must be a finite number, got "
                                       f"{value!r}")
        return out

    def integers(self, name: str, default: Sequence[int]) -> list[int]:
        """A comma-separated list of integers."""
        value = self._raw(name)
        if value is None:
            return list(default)
        try:
            return [int(v) for v in value.split(",")]
        except ValueError:
            raise InvalidArgumentError(f"parameter {name!r} must be integers separated by "
                                       f"commas, got {value!r}") from None

    def choice(self, name: str, choices: Sequence[str], default: str) -> str:
        """One of ``choices``."""
        value = self._raw(name) or default
        if value not in choices:
            raise InvalidArgumentError(f"parameter {name!r} must be one of "
                                       f"{', '.join(choices)}; got {value!r}")
        return value
