"""Arguments of :mod:`tessera.h5` as h5py takes them: member names (text or UTF-8 bytes),
shapes, chunks and maxshapes (an int for one dimension), compression, and h5py's rule for
the shapes of direct reads and writes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tessera.errors import InvalidArgumentError, InvalidTypeError
from tessera.format.codecs import codec_names, normalize_codec_spec
from tessera.integrations.h5_attrs import unsupported


def member_name(name: object) -> str:
    """A member name as h5py takes it: text, or bytes as UTF-8."""
    if isinstance(name, bytes):
        try:
            return name.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgumentError(f"the name {name!r:.60} is not UTF-8") from None
    if not isinstance(name, str):
        raise InvalidTypeError(f"A name should be string or bytes, not {type(name).__name__}")
    return name


def shape_arg(value: Any, what: str, none_ok: bool = False) -> Any:
    """A shape, chunks or maxshape argument as a tuple: an int is one dimension, as in
    h5py (``None`` stays ``None``; with ``none_ok`` entries may be ``None``)."""
    if value is None:
        return None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),)
    try:
        items = tuple(value)
    except TypeError:
        raise InvalidTypeError(f"{what} must be an int or a tuple of ints, got "
                               f"{value!r:.60}") from None
    out: list[int | None] = []
    for n in items:
        if n is None and none_ok:
            out.append(None)
        elif isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0:
            out.append(int(n))
        else:
            raise InvalidTypeError(f"{what} entries must be integers >= 0, got {value!r:.60}")
    return tuple(out)


def check_broadcast(source: tuple[int, ...], target: tuple[int, ...]) -> None:
    """h5py's rule for the values of a write and for read_direct / write_direct: the source
    broadcasts to the target's shape with no more dimensions than it has
    (InvalidTypeError otherwise). (h5py also refuses to broadcast a scalar into some
    index-list selections, depending on how many points they hold; tessera.h5 broadcasts
    into any selection.)"""
    try:
        ok = len(source) <= len(target) and np.broadcast_shapes(source, target) == target
    except ValueError:
        ok = False
    if not ok:
        raise InvalidTypeError(f"Can't broadcast {source} -> {target}")


def codec_spec(compression: Any, opts: Any) -> str | None:
    if compression is None:
        return None
    if isinstance(compression, (int, np.integer)) and not isinstance(compression, bool):
        compression, opts = "gzip", int(compression)
    if compression == "gzip":
        level = 4 if opts is None else int(opts)
        if not 0 <= level <= 9:
            raise InvalidArgumentError(f"gzip level must be 0-9, got {level}")
        return f"gzip:{level}"
    if isinstance(compression, str) and compression in codec_names():
        return normalize_codec_spec(compression if opts is None
                                    else f"{compression}:{int(opts)}")
    raise unsupported(f"compression={compression!r} (use one of "
                       f"{', '.join(repr(n) for n in codec_names())})")


def scalar_selection(sel: Any) -> Any:
    """What a scalar dataset takes, as h5py: ``()`` or ``...`` (ValueError otherwise)."""
    if sel is Ellipsis or (isinstance(sel, tuple) and all(it is Ellipsis for it in sel)
                           and len(sel) <= 1):
        return sel
    raise InvalidArgumentError("Illegal slicing argument for scalar dataspace")
