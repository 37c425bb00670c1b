"""Neighbour merging over many requests at once: the runs that
:func:`tessera.query.refine.plan_requests` builds, found with array operations.

The rule is the one :func:`~tessera.query.refine.plan_requests` applies request by request
(left to right over the requests sorted by object and offset): a request joins the run
before it when both are of one object, it starts at or after the run's end, the run stays
within ``limit`` bytes, it is not a second request of a run's only tile, and the merge
lowers the whole plan's :meth:`~tessera.query.cost.CostModel.smooth_cost`. Whether a merge
pays depends on the plan as the earlier merges left it, so the scan is sequential; but the
plan changes only by merges, so long stretches are decided in one step each:

- while no merge happens the plan stays as it is, so every pair of the stretch is tested
  against that one plan at once, up to the first pair that merges;
- from there, the run is assumed to take every next request up to its byte limit, the plan
  after each of those merges is computed cumulatively, and the run ends at the first merge
  that does not pay (or the first request that cannot join).

Each step costs a few array operations over the requests it looks at (64 at first, twice
as many at each step that finds nothing to stop at), so the steps number a few per run
built plus the stretches where merges stop paying: a whole read of 10^5 small tiles, 43
runs, takes a few hundred steps instead of 10^5 Python iterations.

>>> import numpy as np
>>> from tessera.query.cost import DEFAULT_PROFILES, CostModel
>>> model = CostModel(DEFAULT_PROFILES["local"])
>>> starts = np.arange(0, 4000, 1000)
>>> run_starts(np.zeros(4, np.int64), starts, starts + 1000, np.ones(4, bool),
...            np.arange(4), model, limit=2000).tolist()
[0, 2]
"""

from __future__ import annotations

import numpy as np

from tessera.query.cost import CostModel, RequestMix

#: Requests the first step of a scan looks ahead; each step that finds nothing to stop at
#: looks twice as far, up to :data:`_LOOKAHEAD` (so a step's arrays grow with what it
#: decides, not with the plan: a run of 2,000 requests does not pay for 65,536).
_FIRST_LOOK = 64
_LOOKAHEAD = 1 << 16


def run_starts(keys: np.ndarray, starts: np.ndarray, stops: np.ndarray, is_get: np.ndarray,
               tiles: np.ndarray, model: CostModel, limit: int,
               rest: RequestMix | None = None) -> np.ndarray:
    """Where each merged run begins, as indices into the requests.

    Args:
        keys: an integer per request naming its object (requests sorted by key, then start).
        starts, stops: each request's ``[start, stop)`` bytes.
        is_get: True for a whole-tile get, False for a range.
        tiles: the tile each request serves.
        model: the cost model whose :meth:`~tessera.query.cost.CostModel.smooth_cost` a
            merge must lower.
        limit: the most bytes a merged request may span.
        rest: the plan's other requests (pushdowns), which merges leave as they are.

    Returns the sorted indices of the requests that open a run; the run of ``i`` ends where
    the next begins.
    """
    n = len(starts)
    if n == 0:
        return np.zeros(0, np.int64)
    starts = starts.astype(np.int64)
    stops = stops.astype(np.int64)
    size = stops - starts
    get_bytes_of = np.where(is_get, size, 0)
    range_bytes_of = size - get_bytes_of
    # The plan before any merge.
    g = int(is_get.sum())
    gb = int(get_bytes_of.sum())
    r = n - g
    rb = int(range_bytes_of.sum())

    def costs(dg: np.ndarray, dgb: np.ndarray, dr: np.ndarray, drb: np.ndarray) -> np.ndarray:
        return model.smooth_costs(g + dg, gb + dgb, r + dr, rb + drb, rest)

    def cost_now() -> float:
        """The cost of the plan as the merges so far left it."""
        zero = np.zeros(1, np.int64)
        return float(costs(zero, zero, zero, zero)[0])

    # A pair (i-1, i) where i can never join i-1's run: another object, overlapping bytes,
    # or the two already past the limit (a longer run only spans more).
    can_pair = np.zeros(n, bool)
    can_pair[1:] = ((keys[1:] == keys[:-1]) & (stops[:-1] <= starts[1:])
                    & (stops[1:] - starts[:-1] <= limit))
    first = [0]
    i = 1
    look = _FIRST_LOOK
    while i < n:
        # 1. The plan does not change until a merge: test every pair from i against it.
        # Request i joins the single-request run of i-1 when it is another tile.
        end = min(n, i + look)
        idx = np.arange(i, end)
        prev_get = is_get[idx - 1]
        # Plan after merging (i-1, i): both leave, one range spanning them comes.
        dg = -(prev_get.astype(np.int64) + is_get[idx])
        dgb = -(get_bytes_of[idx - 1] + get_bytes_of[idx])
        dr = 1 - (~prev_get).astype(np.int64) - (~is_get[idx]).astype(np.int64)
        drb = (stops[idx] - starts[idx - 1]) - range_bytes_of[idx - 1] - range_bytes_of[idx]
        ok = can_pair[idx] & (tiles[idx] != tiles[idx - 1])
        ok &= costs(dg, dgb, dr, drb) < cost_now()
        hits = np.flatnonzero(ok)
        if not len(hits):
            first.extend(range(i, end))  # no merge: every request opens its own run
            i = end
            look = min(2 * look, _LOOKAHEAD)
            continue
        j = i + int(hits[0])  # i..j-1 open runs of their own; j joins j-1's run
        first.extend(range(i, j))
        run = j - 1
        # 2. Extend the run from j while each merge pays and the run may grow.
        g, gb, r, rb = g + int(dg[hits[0]]), gb + int(dgb[hits[0]]), r + int(dr[hits[0]]), \
            rb + int(drb[hits[0]])
        k = j + 1
        look = _FIRST_LOOK
        while k < n:
            end = min(n, k + look)
            idx = np.arange(k, end)
            joins = ((keys[idx] == keys[run]) & (stops[idx - 1] <= starts[idx])
                     & (stops[idx] - starts[run] <= limit))
            # The run is one range from starts[run] to stops[idx-1] before merging idx.
            dgb_m = -get_bytes_of[idx]
            dg_m = -is_get[idx].astype(np.int64)
            dr_m = -(~is_get[idx]).astype(np.int64)
            drb_m = (stops[idx] - stops[idx - 1]) - range_bytes_of[idx]
            cg, cgb, cr, crb = (np.cumsum(dg_m), np.cumsum(dgb_m), np.cumsum(dr_m),
                                np.cumsum(drb_m))
            after = costs(cg, cgb, cr, crb)
            before = np.empty_like(after)
            before[0] = cost_now()
            before[1:] = after[:-1]
            stop_at = np.flatnonzero(~(joins & (after < before)))
            m = int(stop_at[0]) if len(stop_at) else len(idx)  # merges taken in this step
            if m:
                g, gb, r, rb = (g + int(cg[m - 1]), gb + int(cgb[m - 1]), r + int(cr[m - 1]),
                                rb + int(crb[m - 1]))
            k += m
            if m < len(idx):
                break  # request k opens the next run (or the test in step 1 decides it)
            look = min(2 * look, _LOOKAHEAD)
        if k >= n:
            break
        # k could not join: it opens a run, and the pairs after it are tested as in step 1.
        first.append(k)
        i = k + 1
        look = _FIRST_LOOK
    return np.asarray(first, dtype=np.int64)
