"""What a read did: :class:`ReadReport` (its tile reads, the plan it followed with its
estimates, the measured I/O and any pushdown fallbacks), printable as estimated vs measured."""

from __future__ import annotations

import collections
import dataclasses
import logging
import warnings
from collections.abc import Sequence
from typing import Any

from tessera._lazy import Chained
from tessera.array.read.pushdown import PushdownReader
from tessera.errors import PushdownFallbackWarning
from tessera.format.tile import (
    CellTileRead,
    TileRead,
)
from tessera.query.methods import methods
from tessera.query.plan import Plan
from tessera.storage.stats import IOStats

_log = logging.getLogger("tessera.pushdown")


@dataclasses.dataclass
class ReadReport:
    """What the latest read did: the tile reads, fragments consulted and skipped, the plan
    it followed (:class:`~tessera.query.plan.Plan`, with its estimates) and the measured
    I/O stats."""

    tile_reads: Sequence[TileRead]
    fragments_used: int
    fragments_skipped: int
    stats: IOStats | None = None
    cell_reads: list[CellTileRead] = dataclasses.field(default_factory=list)
    plan: Plan | None = None
    #: Tiles the pushdown server failed (or could not be asked for) and that were fetched
    #: directly instead, the last message, and the tiles by reason (a short phrase such as
    #: ``"tile failed on the server (HTTP 500)"``).
    pushdown_fallbacks: int = 0
    pushdown_error: str | None = None
    pushdown_fallback_reasons: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The first full message for each reason.
    pushdown_fallback_details: dict[str, str] = dataclasses.field(default_factory=dict)
    #: Pushdown requests by server URL (several with a fleet of servers).
    pushdown_servers: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The most bytes of fetched tiles the read held at once beside its outputs (see
    #: :class:`~tessera.config.ReadConfig` ``window_bytes``); 0 for a read on the calling
    #: thread, which holds one tile at a time.
    window_peak_bytes: int = 0
    #: The reads this one was made of, each with its own plan (an image-column read fetched
    #: in batches beside its decode, :func:`combined`); empty for a read of one plan.
    parts: list[ReadReport] = dataclasses.field(default_factory=list)

    def table(self) -> Any:
        """The plan's estimates beside what the read measured (a rich ``Table``): requests
        and bytes of the data requests (gets, ranges, pushdowns; on a handle's first read
        this includes getting the fragments' bookkeeping), seconds and dollars. Measured
        dollars use the plan's price table; listings are shown apart.

        >>> import numpy as np, tessera
        >>> arr = tessera.from_numpy("memory://doc-report", np.zeros((8, 8)), tile=(4, 4))
        >>> _ = arr.read((slice(0, 8), 1), method="get")
        >>> print(arr.last_read)  # doctest: +ELLIPSIS
        read: estimated vs measured...
        """
        from rich.table import Table

        t = Table(title="read: estimated vs measured", title_justify="left")
        for col in ("", "estimated", "measured"):
            t.add_column(col, justify="left" if not col else "right")
        stats = self.stats
        data_kinds = [m.name for m in methods()]
        by = stats.by_method if stats is not None else {}
        measured_req = sum(by[k].requests for k in data_kinds if k in by)
        measured_bytes = sum(by[k].bytes_received for k in data_kinds if k in by)
        other = (stats.requests - measured_req) if stats is not None else 0
        plan = self.plan
        est = plan.estimate if plan is not None else None
        t.add_row("data requests", str(len(plan.requests)) if plan is not None else "-",
                  str(measured_req))
        t.add_row("data bytes", f"{plan.totals.nbytes:,}" if plan is not None else "-",
                  f"{measured_bytes:,}")
        t.add_row("seconds", f"{est.seconds:.4g}" if est is not None else "-",
                  f"{stats.elapsed_s:.4g}" if stats is not None else "-")
        pricing = plan.pricing if plan is not None else "s3"
        t.add_row(f"dollars ({pricing})", f"{est.dollars:.3g}" if est is not None else "-",
                  f"{stats.cost_usd(pricing):.3g}" if stats is not None else "-")
        t.add_row("other requests (listings)", "", str(other))
        if self.pushdown_fallbacks:
            t.add_row("pushdown fallbacks", "", f"{self.pushdown_fallbacks} tiles: "
                                                f"{self.pushdown_error}")
            for reason, tiles in self.pushdown_fallback_reasons.items():
                t.add_row(f"  {reason}", "", f"{tiles} tiles")
        return t

    def __str__(self) -> str:
        import io

        from rich.console import Console

        out = io.StringIO()
        Console(file=out, width=110, highlight=False).print(self.table())
        return out.getvalue()


def combined(parts: list[ReadReport]) -> ReadReport:
    """One report for a read made of several (``parts``, kept in it): their tile reads one
    after another, their I/O and pushdown fallbacks added up, the most fragments and window
    bytes any of them used; no plan of its own (each part has its plan).

    >>> import numpy as np, tessera
    >>> arr = tessera.from_numpy("memory://doc-combined", np.zeros((8, 8)), tile=(4, 4))
    >>> reports = [(arr.read((slice(r, r + 4), slice(0, 8))), arr.last_read)[1] for r in (0, 4)]
    >>> whole = combined(reports)
    >>> len(whole.tile_reads), whole.plan is None, len(whole.parts)
    (4, True, 2)
    """
    stats: IOStats | None = None
    for part in parts:
        if part.stats is not None:
            stats = part.stats if stats is None else stats + part.stats
    reasons: collections.Counter[str] = collections.Counter()
    servers: collections.Counter[str] = collections.Counter()
    details: dict[str, str] = {}
    for part in parts:
        reasons.update(part.pushdown_fallback_reasons)
        servers.update(part.pushdown_servers)
        for reason, text in part.pushdown_fallback_details.items():
            details.setdefault(reason, text)
    errors = [p.pushdown_error for p in parts if p.pushdown_error is not None]
    return ReadReport(
        tile_reads=Chained([p.tile_reads for p in parts]),
        fragments_used=max((p.fragments_used for p in parts), default=0),
        fragments_skipped=max((p.fragments_skipped for p in parts), default=0),
        stats=stats, cell_reads=[c for p in parts for c in p.cell_reads],
        pushdown_fallbacks=sum(p.pushdown_fallbacks for p in parts),
        pushdown_error=errors[-1] if errors else None, pushdown_fallback_reasons=dict(reasons),
        pushdown_fallback_details=details, pushdown_servers=dict(servers),
        window_peak_bytes=max((p.window_peak_bytes for p in parts), default=0),
        parts=list(parts))


def with_fallbacks(report: ReadReport, pushdown: PushdownReader | None) -> ReadReport:
    """``report`` with the pushdown fallbacks of the read."""
    if pushdown is not None:
        report.pushdown_fallbacks = pushdown.fallbacks
        report.pushdown_error = pushdown.last_error
        report.pushdown_fallback_reasons = dict(pushdown.reasons)
        report.pushdown_fallback_details = dict(pushdown.details)
        report.pushdown_servers = dict(pushdown.servers)
    return report


def warn_fallbacks(report: ReadReport, seen: set[str], uri: str, stacklevel: int) -> None:
    """Log (``tessera.pushdown`` logger, level warning) and warn
    (:class:`~tessera.errors.PushdownFallbackWarning`) about each reason for pushdown
    fallbacks that the handle (its reasons ``seen``) has not reported yet; ``stacklevel``
    as ``warnings.warn`` counts it from here."""
    for reason, tiles in report.pushdown_fallback_reasons.items():
        if reason in seen:
            continue
        seen.add(reason)
        message = (f"pushdown reads of {uri} fall back to fetching tiles directly "
                   f"({reason}; {tiles} tiles of this read): "
                   f"{report.pushdown_fallback_details[reason]}. The data is "
                   "right, but the read moves more bytes; "
                   "arr.last_read.pushdown_fallback_reasons counts the tiles")
        _log.warning("%s", message)
        warnings.warn(message, PushdownFallbackWarning, stacklevel=stacklevel)
