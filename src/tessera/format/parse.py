"""Selections written as text, for the command line: ``"[100:182, :]"``, ``"5, ::2, ..."``,
``"[1, 4, 9], 0:10"``. Parsed by hand: nothing is evaluated.

>>> parse_selection("[100:182, :]")
(slice(100, 182, None), slice(None, None, None))
>>> parse_selection("5, ::-2, [1, 4], ...")
(5, slice(None, None, -2), [1, 4], Ellipsis)
"""

from __future__ import annotations

import re
from typing import Any

from tessera.errors import SelectionError

_INT = re.compile(r"^[+-]?\d+$")


def parse_selection(text: str) -> tuple[Any, ...]:
    """Turn ``text`` into a tuple of ints, slices, int lists and ``...``.

    Raises :class:`~tessera.errors.SelectionError` naming the part it cannot read.
    """
    body = text.strip()
    if body.startswith("[") and body.endswith("]") and _balanced(body[1:-1]):
        body = body[1:-1]
    if not body.strip():
        return (Ellipsis,)
    return tuple(_part(p.strip(), text) for p in _split_top(body, text))


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += ch == "["
        depth -= ch == "]"
        if depth < 0:
            return False
    return depth == 0


def _split_top(body: str, text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise SelectionError(f"unbalanced ']' in selection {text!r}")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise SelectionError(f"unbalanced '[' in selection {text!r}")
    parts.append(cur)
    return parts


def _int(s: str, part: str, text: str) -> int:
    if not _INT.match(s.strip()):
        raise SelectionError(f"cannot read {part!r} in selection {text!r}: expected an "
                             "integer, a slice like 3:10:2, a list like [1, 5], or ...")
    return int(s)


def _part(part: str, text: str) -> Any:
    if part == "...":
        return Ellipsis
    if part.startswith("[") and part.endswith("]"):
        inner = part[1:-1].strip()
        return [_int(x, part, text) for x in inner.split(",")] if inner else []
    if ":" in part:
        pieces = part.split(":")
        if len(pieces) > 3:
            raise SelectionError(f"cannot read {part!r} in selection {text!r}: a slice has "
                                 "at most start:stop:step")
        vals = [None if not p.strip() else _int(p, part, text) for p in pieces]
        return slice(*vals)
    return _int(part, part, text)
