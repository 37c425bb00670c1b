"""Replay the split planner on what ``frozen_split.py`` measured: for each configuration in its
``frozen_replay.json``, calibrate the measured profile on the profiling epoch's times and
choose the split again with the planner of this checkout, then score the choice and the
estimates against the swept epoch times of that run. A change to the calibration or the cost
model is scored on the same measurements, without running the epochs again (the swept times
stay those of the run; a choice of a split the run did not sweep is counted apart).

Prints per configuration the split chosen, its swept time over the optimum's, and the
estimates' errors; then the goals' shares: auto within 5% of the swept optimum (G4), the
chosen split's estimate within 15% of its measured epoch (G7), and every swept split's.

    python benchmarks/frozen_replay.py [REPLAY_JSON]   (default: benchmarks/results/...)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent.parent / "src"))


def replay(doc: dict[str, Any]) -> dict[str, Any]:
    """One configuration replayed: the split chosen, its swept time over the optimum's
    (``None`` when not swept) and each swept split's estimate over its measured time."""
    from tessera.frozen.planner import SplitProfile, calibrate, choose

    batch, request, samples = doc["batch"], doc["request"], doc["samples"]
    measured = SplitProfile.from_json(doc["measured"])
    prof = calibrate(measured, batch, request, samples, doc["early"],
                     [tuple(d) for d in doc["durations"]], [tuple(b) for b in doc["busy"]],
                     [tuple(f) for f in doc.get("fetches", [])])
    plan = choose(prof, batch, request, "auto", samples=samples)
    swept = {int(k): v for k, v in doc["swept"].items()}
    best = min(swept.values())
    ratios = {s: plan.candidate(s).epoch_s / t for s, t in swept.items()}
    return {"name": f"{doc['mode']} {doc['model']} B={batch} {doc['bandwidth_mbit']} Mbit/s",
            "split": plan.split, "optimum": min(swept, key=lambda s: swept[s]),
            "vs_optimum": swept[plan.split] / best if plan.split in swept else None,
            "ratios": ratios}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("replay", type=Path, nargs="?",
                    default=Path(__file__).parent / "results" / "frozen_replay.json")
    args = ap.parse_args()
    try:
        docs = json.loads(args.replay.read_text())
    except (OSError, ValueError) as err:
        raise SystemExit(f"{args.replay}: not a replay file of frozen_split.py ({err})") from None
    if not isinstance(docs, list) or not all(isinstance(d, dict) and "measured" in d
                                             and "swept" in d for d in docs):
        raise SystemExit(f"{args.replay}: not a replay file of frozen_split.py (a list of "
                         "configurations with 'measured' and 'swept')")
    within5 = scored = close = estimates = g7 = 0
    for doc in docs:
        r = replay(doc)
        errors = [abs(v - 1) for v in r["ratios"].values()]
        close += sum(e <= 0.15 for e in errors)
        estimates += len(errors)
        vs = r["vs_optimum"]
        if vs is not None:
            scored += 1
            within5 += vs <= 1.05
            g7 += abs(r["ratios"][r["split"]] - 1) <= 0.15
        print(f"{r['name']:38} auto {r['split']:>3} optimum {r['optimum']:>3} "
              f"{'not swept' if vs is None else f'{vs:.3f}x'}  estimates within 15%: "
              f"{sum(e <= 0.15 for e in errors)}/{len(errors)} (median error "
              f"{statistics.median(errors):.1%})")
    print(f"auto within 5% of the swept optimum: {within5}/{scored} "
          f"({len(docs) - scored} chose a split not swept); the chosen split's estimate "
          f"within 15%: {g7}/{scored}; every swept split's: {close}/{estimates}")


if __name__ == "__main__":
    main()
