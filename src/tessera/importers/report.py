"""What an import did: one report for every importer (:mod:`tessera.importers`)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class ImportReport:
    """What an import did.

    Attributes:
        url: where it wrote.
        imported: what was written: dataset names (``/`` for a single array), tensor ids,
            or nothing for an image import (see ``images``).
        skipped: ``(name, reason)`` for each dataset, file or tensor left out.
        notes: ``(name, note)``, e.g. a compression stored as raw.
        nbytes: bytes of data copied.
        images: images stored (image imports).
        classes: class names of an ImageFolder layout (image imports; ``None``: no labels).
        stored_bytes: bytes stored (image imports: the coefficient columns).
    """

    url: str = ""
    imported: list[str] = dataclasses.field(default_factory=list)
    skipped: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    notes: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    nbytes: int = 0
    images: int = 0
    classes: list[str] | None = None
    stored_bytes: int = 0
