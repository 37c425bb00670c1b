"""The storage formats of tensor tables, one module per format, found by name here: FTSF
(dense), COO, CSR, CSC, CSF and BSGS (sparse). A new format is one module with a
:class:`~tessera.tables.layouts.base.Layout` and one line in :data:`LAYOUTS`.

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


def get_layout(name: str) -> Layout:
    """The format called ``name`` (a ``FormatError`` lists the known ones)."""
    try:
        return LAYOUTS[name]
    except (KeyError, TypeError):
        raise FormatError(f"unknown format {name!r}; known: 'auto', "
                          f"{', '.join(repr(n) for n in LAYOUTS)}") from None
