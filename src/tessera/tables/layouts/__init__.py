"""The storage formats of tensor tables, one module per format, found by name here: FTSF
(dense), COO, CSR, CSC, CSF and BSGS (sparse). A new format is one module with a
:class:`~tessera.tables.layouts.base.Layout` and one line in :data:`LAYOUTS` (or a call to
:func:`register_layout` from a plug-in). :data:`LAYOUTS` is the one list of formats: writes,
the CLI's help and the docs read it.

>>> sorted(LAYOUTS)
['bsgs', 'coo', 'csc', 'csf', 'csr', 'ftsf']
"""

from __future__ import annotations

from tessera.errors import FormatError
from tessera.tables.layouts.base import Layout
from tessera.tables.layouts.bsgs import BSGS
from tessera.tables.layouts.coo import COO
from tessera.tables.layouts.csf import CSF
from tessera.tables.layouts.csr import CSC, CSR
from tessera.tables.layouts.ftsf import FTSF

LAYOUTS: dict[str, Layout] = {layout.name: layout for layout in (FTSF, COO, CSR, CSC, CSF,
                                                                   BSGS)}


def register_layout(layout: Layout) -> None:
    """Add a storage format (its ``name`` must be new): from then on ``format=layout.name``
    writes with it and tensors stored with it read back."""
    if not isinstance(getattr(layout, "name", None), str) or not layout.name.isidentifier():
        raise FormatError(f"a layout needs a name that is an identifier, got "
                          f"{getattr(layout, 'name', None)!r}")
    if layout.name in LAYOUTS or layout.name == "auto":
        raise FormatError(f"a format called {layout.name!r} exists already")
    LAYOUTS[layout.name] = layout


def get_layout(name: str) -> Layout:
    """The format called ``name`` (a ``FormatError`` lists the known ones)."""
    try:
        return LAYOUTS[name]
    except (KeyError, TypeError):
        raise FormatError(f"unknown format {name!r}; known: 'auto', "
                          f"{', '.join(repr(n) for n in LAYOUTS)}") from None
