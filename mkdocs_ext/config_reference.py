"""A MkDocs hook for the documentation site: the table of every ``TESSERA_*`` environment
variable, generated from the settings classes of ``tessera.config`` (their fields, defaults
and the ``Attributes:`` sections of their docstrings). A page holding the marker
``<!-- config-reference -->`` gets, in its place, one table per settings class."""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

MARKER = "<!-- config-reference -->"


def _markdown() -> Callable[[str], str]:
    """The docstring-to-Markdown conversion the API reference uses (roles, double
    backticks), from the site's griffe extension beside this hook."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from rst_docstrings import markdown

    return markdown


def attributes(cls: type) -> dict[str, str]:
    """The descriptions of ``cls``'s fields, from the ``Attributes:`` section of its
    docstring (a field's text runs until the next field or the section's end).

    >>> class C:
    ...     '''Doc.
    ...
    ...     Attributes:
    ...         a: the first,
    ...             continued.
    ...         b: the second.
    ...
    ...     >>> 1
    ...     '''
    >>> attributes(C)
    {'a': 'the first, continued.', 'b': 'the second.'}
    """
    doc = inspect.cleandoc(cls.__doc__ or "")
    if "Attributes:" not in doc:
        return {}
    section = doc.split("Attributes:", 1)[1]
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in section.splitlines()[1:]:
        if not line.strip():
            continue
        match = re.match(r"^    (\w+): (.*)$", line)
        if match:
            current = found.setdefault(match.group(1), [match.group(2)])
        elif line.startswith("        ") and current is not None:
            current.append(line.strip())
        elif line.strip():
            break
    return {name: " ".join(words) for name, words in found.items()}


def _default(field: dataclasses.Field[Any]) -> str:
    """A field's default as a user writes it, bytes in KiB, MiB or GiB beside the number.

    >>> import dataclasses
    >>> @dataclasses.dataclass
    ... class C:
    ...     cache_bytes: int = 64 << 20
    ...     name: str = ""
    >>> [_default(f) for f in dataclasses.fields(C)]
    ['`67108864` (64 MiB)', '(empty)']
    """
    value = field.default
    if value == "":
        return "(empty)"
    text = f"`{str(value).lower() if isinstance(value, bool) else value}`"
    if field.name.endswith("_bytes") and isinstance(value, int) and value >= 1024:
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if value % size == 0:
                return f"{text} ({value // size} {unit})"
    return text


def rows() -> list[tuple[type, str, list[tuple[str, str, str]]]]:
    """``(class, prefix, [(variable, default, description), ...])`` for every settings
    class, in the order of ``tessera.config.ENVIRONMENT``; fields that are themselves
    settings (a store's retry policy) are left to their own class."""
    source = str(Path(__file__).resolve().parents[1] / "src")
    if source not in sys.path:  # a checkout that is not installed
        sys.path.insert(0, source)
    from tessera.config import ENVIRONMENT

    markdown = _markdown()
    out = []
    for cls, prefix in ENVIRONMENT:
        described = attributes(cls)
        entries = []
        for field in dataclasses.fields(cls):  # type: ignore[arg-type]
            if field.default is dataclasses.MISSING:
                continue  # a nested settings object
            entries.append((prefix + field.name.upper(), _default(field),
                            markdown(described.get(field.name, ""))))
        out.append((cls, prefix, entries))
    return out


def reference() -> str:
    """The tables as Markdown."""
    out: list[str] = []
    for cls, _prefix, entries in rows():
        summary = inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0]
        out += [f"### {cls.__name__}", "", _markdown()(" ".join(summary.split())), "",
                "| variable | default | what it sets |", "|---|---|---|"]
        out += [f"| `{name}` | {default} | {text.replace('|', chr(92) + '|')} |"
                for name, default, text in entries]
        out.append("")
    return "\n".join(out)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs' hook: the marker replaced by the tables."""
    return markdown.replace(MARKER, reference()) if MARKER in markdown else markdown
