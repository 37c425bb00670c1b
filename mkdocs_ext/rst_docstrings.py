"""A griffe extension for the documentation site: Tessera's docstrings are written in the
reStructuredText habits of the standard library (``code``, :class:`~pkg.Name`, ``>>>``
examples); this turns them into the Markdown the site renders: examples become fenced
``pycon`` blocks, double backticks single ones, roles their name in code."""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj|ref):`~?([^`]+)`")
DOUBLE = re.compile(r"``([^`]+)``")


def _short(match: re.Match[str]) -> str:
    target = match.group(1)
    if "<" in target:  # :ref:`text <target>`
        target = target.split("<")[0].strip()
    return f"`{target.rsplit('.', 1)[-1] if match.group(0).count('~') else target}`"


def markdown(text: str) -> str:
    r"""``text`` (a docstring) as Markdown.

    >>> markdown("Use ``x`` or :class:`~a.B`.\n\n>>> 1 + 1\n2\n\nDone.").splitlines()
    ['Use `x` or `B`.', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'Done.']
    >>> markdown(markdown(">>> 1")) == markdown(">>> 1")
    True
    """
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    fenced = False  # inside a fence already (a docstring seen twice is left as it is)
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.lstrip().startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(indent):] if lines[i].startswith(indent)
                             else lines[i].lstrip())
                i += 1
            out += [f"{indent}```pycon", *(indent + b for b in block), f"{indent}```"]
            continue
        out.append(line if fenced else ROLE.sub(_short, DOUBLE.sub(r"`\1`", line)))
        i += 1
    return "\n".join(out)


class RstDocstrings(Extension):
    """Rewrite every docstring as :func:`markdown` does."""

    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
