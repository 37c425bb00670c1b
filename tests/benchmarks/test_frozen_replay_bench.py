"""frozen_replay.py scores a replayed choice against swept times: on a made-up configuration
whose swept times favour the split the planner picks, and one where they do not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tessera.frozen.planner import SplitProfile, choose

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "frozen_replay.py"


def test_replay_scores_the_choice_and_the_estimates(tmp_path: Path) -> None:
    p = SplitProfile(names=("a", "b", "c"), out_bytes=(400, 100, 40), input_bytes=300,
                     freeze=2, server_fwd_s=(0.01, 0.01), client_fwd_s=(0.01, 0.01, 0.002),
                     train_s=0.004, bandwidth=1e5)
    plan = choose(p, 8, 4, samples=800)
    assert plan.split == 1
    exact = {str(c.split): c.epoch_s for c in plan.candidates}
    doc = {"mode": "real", "model": "toy", "batch": 8, "request": 4, "bandwidth_mbit": 0.8,
           "samples": 800, "early": 0, "measured": p.to_json(), "durations": [],
           "busy": [], "swept": exact}
    worse = {**doc, "model": "toy2", "swept": {**exact, "0": exact["1"] / 2}}
    path = tmp_path / "frozen_replay.json"
    path.write_text(json.dumps([doc, worse]))
    done = subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stdout.splitlines()
    assert "auto   1 optimum   1 1.000x" in lines[0] and "within 15%: 3/3" in lines[0]
    assert "optimum   0 2.000x" in lines[1] and "within 15%: 2/3" in lines[1]
    assert lines[-1].startswith("auto within 5% of the swept optimum: 1/2")
    assert "the chosen split's estimate within 15%: 2/2; every swept split's: 5/6" in lines[-1]


def test_a_file_that_is_not_a_replay_says_so(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text('{"profile": 1}')
    done = subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode != 0 and "not a replay file of frozen_split.py" in done.stderr
