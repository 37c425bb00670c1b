"""Values on their way into an attribute: which casts a write accepts, and the check that no
value changes on the way.

numpy's own conversion (``arr.astype(np.int32)``, or assigning into an ``int32`` array) is
*unsafe*: integers that do not fit wrap around (``2**40 + 7`` becomes ``7``) and floats too
large for ``float32`` become ``inf``, without a word. A write to a Tessera array is durable and
shared, so it refuses instead, under one of three rules (:data:`CAST_RULES`):

- ``"checked"`` (the default): the values' kind must cast to the attribute's under numpy's
  ``same_kind`` rule (bools and integers to integers, any of those to floats; never floats to
  integers), with signed and unsigned integers interchangeable, and every value must be
  representable: integers inside the attribute's range, finite floats inside its finite range.
  Into a float attribute, values are rounded to the nearest float it holds (``0.1`` into
  ``float32``), except where rounding would change what a value *is*: an integer (or an
  integer-valued float) that the float type cannot hold exactly (``2**24 + 1`` into
  ``float32``, ``2**53 + 1`` into ``float64``) and a non-zero value that would become zero
  (``1e-300`` into ``float32``) are refused. Min/max passes over the batch decide (and,
  into a narrower float, one conversion and comparison); no per-cell loop.
- ``"value"``: any numeric kind, as long as every value fits the attribute's range; floats
  stored into an integer attribute are truncated toward zero and values into a float
  attribute rounded to the nearest, as HDF5 does (the :mod:`tessera.h5` facade's rule, so
  code written for h5py keeps working), and NaN or infinity into an integer is refused.
- ``"unsafe"``: numpy's ``astype``, wrap-around and all, for users who want exactly that.

Non-numeric values (strings, objects) are refused under every rule.

>>> import numpy as np
>>> fit_values(np.array([1, 2**31 - 1]), np.dtype("i4"), "v").dtype
dtype('int32')
>>> fit_values(np.array([2**40 + 7]), np.dtype("i4"), "v")
Traceback (most recent call last):
...
tessera.errors.InvalidTypeError: values for attribute 'v' do not fit int32: 1099511627783 ...
>>> fit_values(np.array([2**40 + 7]), np.dtype("i4"), "v", cast="unsafe").tolist()
[7]
>>> fit_values(np.array([2.9, -2.9]), np.dtype("i2"), "v", cast="value").tolist()
[2, -2]
>>> fit_values(np.array([2**24 + 1]), np.dtype("f4"), "v")
Traceback (most recent call last):
...
tessera.errors.InvalidTypeError: values for attribute 'v' do not survive float32: 16777217 ...
>>> fit_values(np.array([2**24 + 1]), np.dtype("f4"), "v", cast="value").tolist()
[16777216.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tessera.config import CAST_RULES, CastRule
from tessera.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["CAST_RULES", "CastRule", "as_values", "check_cast_rule", "fit_values"]

_NUMERIC = "biufc"


def check_cast_rule(cast: Any) -> CastRule:
    """``cast`` if it names a rule of :data:`CAST_RULES`, else :class:`InvalidArgumentError`."""
    if cast not in CAST_RULES:
        raise InvalidArgumentError(f"cast must be one of {', '.join(map(repr, CAST_RULES))}, "
                                   f"got {cast!r}")
    return cast  # type: ignore[no-any-return]


def fit_values(values: Any, target: np.dtype[Any], name: str, *,
               cast: CastRule = "checked", what: str = "attribute") -> np.ndarray:
    """``values`` as an array of ``target`` (no copy when already of that dtype), converted
    under the rule ``cast``; :class:`~tessera.errors.InvalidTypeError` naming the ``what``
    (``attribute``, ``dataset``) ``name``, the range and the first offending value when a
    value would change."""
    arr = as_values(values, target)
    check_cast_rule(cast)
    if arr.dtype.kind not in _NUMERIC:
        raise InvalidTypeError(f"values for {what} {name!r} have dtype {arr.dtype}; "
                               f"expected numbers castable to {target}")
    if arr.dtype == target or cast == "unsafe":
        return arr.astype(target, copy=False)
    src, dst = arr.dtype.kind, target.kind
    if cast == "checked" and not (np.can_cast(arr.dtype, target, casting="same_kind")
                                  or (src in "iu" and dst in "iu")):
        raise InvalidTypeError(f"values for {what} {name!r} have dtype {arr.dtype}, which "
                               f"does not cast safely to {target}; convert them first (or "
                               "write with cast='value' to truncate values that fit)")
    if dst == "b" and src != "b":
        raise InvalidTypeError(f"values for {what} {name!r} have dtype {arr.dtype}; a "
                               "bool attribute takes bools")
    if not arr.size or (np.can_cast(arr.dtype, target, casting="safe")
                        and not (cast == "checked" and _rounds(arr.dtype, target))):
        return arr.astype(target, copy=False)
    if src == "c" and dst != "c":
        raise InvalidTypeError(f"values for {what} {name!r} are complex; {target} holds "
                               "no imaginary part")
    _check_range(arr, target, f"{what} {name!r}", cast)
    out = arr.astype(target)
    if cast == "checked" and dst == "f" and src in "iuf":
        _check_exact(arr, out, f"{what} {name!r}")
    return out


def as_values(values: Any, target: np.dtype[Any] | None) -> np.ndarray:
    """``values`` as an array, without the rounding numpy applies to Python integers past
    ``int64`` when they go to an integer ``target``: ``np.asarray([2**63 - 1, 2**63])`` is
    ``float64`` (both become ``2**63``), here ``uint64`` holds both exactly. Integers that do
    not fit ``target`` are left to :func:`fit_values` to refuse.

    >>> as_values([2**63 - 1, 2**63], np.dtype("u8")).tolist()
    [9223372036854775807, 9223372036854775808]
    >>> as_values([1.5, 2], np.dtype("u8")).dtype
    dtype('float64')
    """
    arr = np.asarray(values)
    if isinstance(values, np.ndarray) or target is None or target.kind not in "iu" \
            or arr.dtype.kind not in "fO" or not arr.size:
        return arr
    cells = np.asarray(values, dtype=object)
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
               for v in cells.flat):
        return arr  # floats (or other things) among them: numpy's conversion, checked later
    lo, hi = int(cells.min()), int(cells.max())
    info = np.iinfo(target)
    if lo < int(info.min) or hi > int(info.max):
        first = next(v for v in cells.flat if not int(info.min) <= int(v) <= int(info.max))
        raise InvalidTypeError(f"the value {int(first)} does not fit {target} "
                               f"([{int(info.min)}, {int(info.max)}]); convert it first")
    return cells.astype(target)


def _rounds(src: np.dtype[Any], target: np.dtype[Any]) -> bool:
    """True if numpy calls the cast safe although some integers round on the way
    (``int64`` into ``float64``: 53 bits of mantissa)."""
    return src.kind in "iu" and target.kind == "f" and \
        src.itemsize * 8 - (src.kind == "i") > np.finfo(target).nmant + 1


def _check_exact(arr: np.ndarray, out: np.ndarray, name: str) -> None:
    """Under ``checked``, refuse a conversion into a float type that changes what a value
    is: an integer (or integer-valued float) that comes out different, or a non-zero float
    that comes out zero. Rounding a fraction to the nearest float is accepted."""
    target = out.dtype
    if arr.dtype.kind in "iu":
        exact = 2 ** (np.finfo(target).nmant + 1)  # every integer up to this is a float
        if int(arr.min()) >= -exact and int(arr.max()) <= exact:
            return
        big = (arr < -exact) | (arr > exact)
        changed = np.zeros(arr.shape, dtype=bool)
        changed[big] = ~_same_integers(arr[big], out[big])
        if changed.any():
            _refuse(arr, changed, target, name, "", "checked", survive=True)
        return
    # a float into a narrower float (a wider one holds every value exactly)
    # (an integer-valued float counts as an integer where its own type holds integers
    # exactly: past 2**53 a float64 is a magnitude, and 1e20 rounds like any other)
    back = out.astype(arr.dtype)
    whole = (arr == np.trunc(arr)) & (np.abs(arr) <= 2.0 ** (np.finfo(arr.dtype).nmant + 1))
    changed = np.isfinite(arr) & (back != arr) & (whole | (out == 0))
    if changed.any():
        _refuse(arr, changed, target, name, "", "checked", survive=True)


def _same_integers(ints: np.ndarray, floats: np.ndarray) -> np.ndarray:
    """Per value, ``True`` where the float equals the integer exactly (compared as
    integers: a float at or past the integer type's end never does)."""
    info = np.iinfo(ints.dtype)
    inside = (floats >= float(info.min)) & (floats < float(info.max) + 1.0)
    as_int = np.where(inside, floats, 0).astype(ints.dtype)
    same: np.ndarray = inside & (as_int == ints)
    return same


def _check_range(arr: np.ndarray, target: np.dtype[Any], name: str, cast: str) -> None:
    """Raise unless every value of ``arr`` is representable in ``target`` (integers: in range;
    floats: finite values inside the finite range; a float into an integer: finite and in
    range after truncation)."""
    parts = [arr.real, arr.imag] if arr.dtype.kind == "c" else [arr]
    for part in parts:
        if target.kind in "iu":
            info = np.iinfo(target)
            lo, hi = int(info.min), int(info.max)
            if part.dtype.kind == "f":
                part = np.trunc(part)
                finite = np.isfinite(part)
                if not finite.all():
                    _refuse(arr, ~finite, target, name, f"[{lo}, {hi}]", cast)
                # compared as floats against exact bounds: -2**63 and 2**63 are floats,
                # 2**63 - 1 is not (it rounds up, and 2.0**63 would pass as in range)
                bad = (part < float(lo)) | (part >= float(hi) + 1.0)
                if bad.any():
                    _refuse(arr, bad, target, name, f"[{lo}, {hi}]", cast)
                continue
        else:
            fmax = float(np.finfo(target).max)
            lo, hi = -fmax, fmax  # type: ignore[assignment]
            if part.dtype.kind == "f":
                part = np.where(np.isfinite(part), part, 0)  # NaN and inf stay what they are
        if part.dtype.kind in "iu" and target.kind in "iu":
            # exact integer comparison: a float bound could round (2**63 - 1 is not a float)
            pmin, pmax = int(part.min()), int(part.max())
        else:
            pmin, pmax = float(part.min()), float(part.max())  # type: ignore[assignment]
        if pmin < lo or pmax > hi:
            bad = np.zeros(part.shape, dtype=bool)
            if pmin < lo:
                bad |= part < lo
            if pmax > hi:
                bad |= part > hi
            _refuse(arr, bad, target, name, f"[{lo}, {hi}]", cast)


def _refuse(arr: np.ndarray, bad: np.ndarray, target: np.dtype[Any], name: str,
            span: str, cast: str, *, survive: bool = False) -> None:
    first = int(np.flatnonzero(bad.ravel())[0])
    where = tuple(int(i) for i in np.unravel_index(first, arr.shape)) if arr.ndim else ()
    value = arr.ravel()[first].item()
    if survive:
        raise InvalidTypeError(
            f"values for {name} do not survive {target}: {value!r} (at index {where}) would "
            f"become {arr.ravel()[first:first + 1].astype(target)[0].item()!r}; convert them "
            "first, or write with cast='value' to round to the nearest")
    hint = ("convert them first, or write with cast='unsafe' for numpy's unchecked conversion"
            if cast == "checked" else "convert them first")
    raise InvalidTypeError(
        f"values for {name} do not fit {target}: {value!r} (at index {where}) is outside "
        f"{span}; {hint}")
