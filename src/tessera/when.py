"""Points in time, as every kind of data takes them (``at=``).

Arrays, tensor tables and image sets open "as they were" at a point given the same way: a
:class:`datetime.datetime` (a naive one is UTC, as Tessera prints times), an ISO-8601
string (``"2026-11-27T17:49:49"``, ``"2026-11-27T17:49:49+01:00"``, ``"...Z"``), or the
kind's own marker, an integer: a commit time in nanoseconds since the epoch for arrays and
image sets, a version number for tables. A point before the first commit is an error
naming the first commit's time, never an empty read.

>>> from tessera.when import moment
>>> moment("2026-11-27T17:49:49Z")
datetime.datetime(2026, 11, 27, 17, 49, 49, tzinfo=datetime.timezone.utc)
>>> moment(3), moment(None)
(3, None)
>>> iso(ns(moment("2026-11-27T17:49:49.5")))
'2026-11-27T17:49:49.500000+00:00'
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html
from typing import Any

from tessera.errors import BeforeFirstCommitError, InvalidArgumentError, InvalidTypeError

#: What ``at=`` takes: a datetime, an ISO-8601 string, the kind's own integer marker.
At = dt.datetime | str | int | None


def moment(at: Any, name: str = "at") -> dt.datetime | int | None:
    """``at`` as an aware datetime (from a datetime or an ISO-8601 string) or as the kind's
    integer marker; ``None`` stays ``None``. ``name``: the argument, as the caller wrote it
    (for the message)."""
    if at is None:
        return None
    if isinstance(at, dt.datetime):
        return at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)
    if isinstance(at, str):
        text = at.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            return moment(dt.datetime.fromisoformat(text), name)
        except ValueError:
            raise InvalidArgumentError(
                f"{name}={at!r} is not a point in time: give an ISO-8601 date and time "
                "(2026-11-27T17:49:49, with +01:00 or Z for a zone; UTC without), a "
                "datetime, or the kind's own marker (an integer)") from None
    if isinstance(at, dt.date):
        return dt.datetime(at.year, at.month, at.day, tzinfo=dt.UTC)
    if isinstance(at, int) and not isinstance(at, bool):
        return at
    if type(at).__module__ == "numpy" and hasattr(at, "item"):
        return moment(at.item(), name)
    raise InvalidTypeError(f"{name} must be a datetime, an ISO-8601 string or an integer "
                           f"marker, got {type(at).__name__} {at!r:.60}")


def ns(when: dt.datetime) -> int:
    """An aware datetime in nanoseconds since the epoch (exact to the microsecond)."""
    delta = when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def at_ns(at: Any, name: str = "at") -> int | None:
    """``at`` for kinds whose marker is a time in nanoseconds (arrays, image sets). A
    datetime covers its whole microsecond (its last nanosecond is taken), so the ``when``
    of a commit in ``history()`` sees that commit."""
    when = moment(at, name)
    return ns(when) + 999 if isinstance(when, dt.datetime) else when


def utc(t_ns: int) -> dt.datetime:
    """Nanoseconds since the epoch as an aware UTC datetime (to the microsecond)."""
    return dt.datetime.fromtimestamp(t_ns / 1e9, dt.UTC)


def iso(t_ns: int) -> str:
    """Nanoseconds since the epoch as an ISO-8601 UTC string (to the microsecond)."""
    return utc(t_ns).isoformat()


def positional_at(verb: str, legacy: tuple[Any, ...], at: Any) -> Any:
    """``at`` given by an older caller as the third positional argument (``legacy``: what
    came after ``url`` and ``mode``), with a DeprecationWarning; ``verb`` names the call."""
    if not legacy:
        return at
    if len(legacy) > 1:
        raise InvalidTypeError(f"{verb} takes url and mode positionally, got "
                               f"{2 + len(legacy)} positional arguments")
    return renamed("a third positional argument", "at", legacy[0], at)


def renamed(old: str, new: str, value: Any, current: Any, unset: Any = None) -> Any:
    """A deprecated keyword's ``value`` when given (not ``None``; with a DeprecationWarning
    naming the new keyword), else ``current``; both given (``current`` is not the new
    keyword's default ``unset``) is an error."""
    if value is None:
        return current
    if current is not unset and current != unset:
        raise InvalidArgumentError(f"give {new}= or the older {old}=, not both")
    import warnings

    shown = old if " " in old else f"{old}="
    warnings.warn(f"{shown} is deprecated: write {new}=", DeprecationWarning, stacklevel=3)
    return value


@dataclasses.dataclass(frozen=True)
class Commit:
    """One commit of an array, a tensor table or an image set (``history()`` lists them).

    Attributes:
        when: the commit time (UTC).
        marker: the kind's own marker of that point: the commit time in nanoseconds for
            arrays and image sets, the version for tables (``at=marker`` opens it).
        operation: what the commit did (``write``, ``append``, ``consolidate``, ``create``,
            ``delete``, ...).
        added, removed: how many of ``unit`` it added and removed (replaced).
        unit: ``fragments``, ``files`` or ``images``.
        nbytes: stored bytes it added (0 where unknown).

    >>> import numpy as np, tessera
    >>> arr = tessera.from_numpy("memory://doc-commit", np.zeros(4))
    >>> commit = arr.history()[0]
    >>> commit.operation, commit.added, commit.unit
    ('write', 1, 'fragments')
    """

    when: dt.datetime
    marker: int
    operation: str
    added: int
    removed: int
    unit: str
    nbytes: int

    def to_dict(self) -> dict[str, Any]:
        """The commit as JSON-ready values (``when`` in ISO-8601)."""
        out = dataclasses.asdict(self)
        out["when"] = self.when.isoformat()
        return out


class History(list[Commit]):
    """Commits, oldest first; prints as a table (and as an HTML table in notebooks).

    >>> h = History([Commit(moment("2026-11-27T17:49:49Z"), 3, "write", 1, 0, "files", 10)])
    >>> print(h)
    when                       marker  operation  added    removed  bytes
    2026-11-27T17:49:49+00:00       3  write      1 files        0     10
    """

    _HEAD = ("when", "marker", "operation", "added", "removed", "bytes")

    def _rows(self) -> list[tuple[str, ...]]:
        return [(c.when.isoformat(), str(c.marker), c.operation, f"{c.added} {c.unit}",
                 str(c.removed), f"{c.nbytes:,}") for c in self]

    def __str__(self) -> str:
        rows = [self._HEAD, *self._rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._HEAD))]
        left = (True, False, True, True, False, False)
        return "\n".join("  ".join(cell.ljust(w) if lft else cell.rjust(w)
                                   for cell, w, lft in zip(r, widths, left, strict=True))
                         .rstrip() for r in rows)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self._HEAD)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                       for r in self._rows())
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def to_dicts(self) -> list[dict[str, Any]]:
        """Every commit as :meth:`Commit.to_dict` gives it."""
        return [c.to_dict() for c in self]


def first_commit_error(what: str, first_ns_or_when: int | dt.datetime, at: Any,
                       ) -> BeforeFirstCommitError:
    """The error of a point in time before ``what``'s first commit."""
    first = (first_ns_or_when if isinstance(first_ns_or_when, dt.datetime)
             else utc(first_ns_or_when))
    shown = iso(at) if isinstance(at, int) and at > 10**15 else at
    return BeforeFirstCommitError(
        f"{what} at {shown}: that is before its first commit, at {first.isoformat()}; open "
        "it at that time or later (or without at= for the newest state)", first)
