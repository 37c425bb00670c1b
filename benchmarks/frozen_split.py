"""Frozen-layer pushdown against its baselines (the HAPI paper's section 5, issue 26's
benchmark): epoch times of transfer learning with the frozen layers split between a pushdown
server beside the data and the client, for every split (the swept optimum) and for the
systems' rules side by side: NoSplit-f32 (the paper's: fp32 tensors cross the link),
NoSplit-u8 (honest: the stored uint8 samples), @Freeze, @Min, NSG (Neurosurgeon's sum rule on
Tessera's estimates) and Tessera auto (HAPI's overlap rule).

Setup (spec section 6.1): the samples live in the S3 test server; the pushdown server
(``tessera serve s3://... --models DIR``, one torch thread, server batch 16, model reuse
off as in the paper's comparison) reads them there directly; the client (one torch thread)
reaches both through emulated links (one-way 0.5 ms, the bandwidth of the run). The two
sides stand for two machines: the server and the S3 test server are pinned to one core, the
client and its links to the other (``sched_setaffinity``). Weights are
random from a seed (``tessera model init``); sizes and times do not depend on values.

- **real** mode: real compute on both sides, ResNet18 (and AlexNet with ``--full``) at 64 x 64,
  512 samples, batch 32/64, requests of 16, 20/100/400 Mbit/s (``--quick``: ResNet18, batch 32,
  100 Mbit/s). Two cores: the overlap can win at most 2x.
- **emulated** mode (the paper's grid, scaled to two cores): both sides sleep each layer's
  seconds profiled on this CPU (normalised to 2 ms per sample for the whole forward pass, so
  that every model's epoch takes seconds), forward passes take turns on the server; features
  of the true shape (zeros) and real stored samples cross the link. The link's bandwidth is
  set from rho = (fp32 input bytes / bandwidth) / (forward seconds per sample) in {0.3, 1, 3}.
  1,024 samples, batch 128/512, requests of 128, 4 concurrent requests. ``--full``: AlexNet,
  ResNet18, ResNet50, DenseNet121, VGG11; quick: ResNet18 at rho 1. ViT-B/16 is left out:
  its inputs must be 224 x 224, whose bytes do not fit this machine's link proxy in time.

Each configuration: one profiling epoch (``split="auto"``: Algorithm 1 reconstructed), then
one measured epoch per split 0..F (the sweep; ``--repeats N``: N epochs per split, the
splits in turn, each split's median its time; splits the planner estimates at more than 3x
the best are skipped: the estimates are within tens of percent, and at 20 Mbit/s an early
split's epoch takes minutes) and one NoSplit-f32 epoch; a rule's time is the swept time of
the split it picks. Estimates are the planner's for the measured profile.
Writes ``frozen_split.csv``, ``frozen_goals.csv``, ``frozen_speedup.png`` (Fig. 7),
``frozen_estimates.png`` (Fig. 11), ``frozen_bandwidth.png`` (Fig. 13) and
``frozen_results.md`` under ``--out``, and ``frozen_replay.json``: per configuration what
the planner was calibrated on (the measured profile before calibration, the profiling
epoch's iteration and compute times) beside the swept times, to replay a change to the
calibration or the model without running the epochs again.

    python benchmarks/frozen_split.py [--quick | --full] [--out DIR]
    python benchmarks/frozen_split.py --real ARCH... [--batches B...] [--mbits M...] [--repeats N]
        (a subset of the full grid's real configurations, no emulated grid)
    python benchmarks/frozen_split.py --emulated ARCH... [--batches B...]
        (a subset of the emulated grid, no real configurations)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_csv

SIZE = 64
ONE_WAY_S = 0.0005
EMU_FORWARD_S = 0.002  # emulated forward seconds per sample of the whole model
FREEZE = {"alexnet": "classifier.1", "resnet18": "layer4.0", "resnet50": "avgpool",
          "densenet121": "features.denseblock4", "vgg11": "classifier.3",
          "vgg19": "features.35", "vit_b_16": "encoder.layers.encoder_layer_11"}
PAPER = {"speedup_max": "2.5x", "optimal": "59.2%", "within5": "86.8%", "nsg_within5": "44.1%"}


@dataclasses.dataclass
class Rig:
    """The S3 test server with the data, the pushdown server, and the client's two links."""

    s3: Any
    server: Any
    link_data: Any
    link_pd: Any
    models: Path
    urls: dict[str, str]  # array name -> URL through the data link

    def bandwidth(self, bytes_per_s: float) -> None:
        self.link_data.configure(bandwidth=bytes_per_s)
        self.link_pd.configure(bandwidth=bytes_per_s)


def pin(pid: int, cores: set[int]) -> None:
    """Every thread of process ``pid`` (and those it starts later) on ``cores``."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # the thread ended meanwhile
            os.sched_setaffinity(int(task.name), cores)


def make_models(folder: Path, archs: list[str]) -> None:
    from tessera.frozen.manifest import InputSpec
    from tessera.frozen.models import init_model, register

    for arch in archs:
        init_model(arch, folder, seed=0, name=arch, input=InputSpec(height=SIZE, width=SIZE))
        # the paper's NoSplit: pre-processed fp32 tensors; same weights, identity normalise
        register(folder, f"{arch}-f32", arch, f"{arch}.safetensors",
                 input=InputSpec(height=SIZE, width=SIZE, dtype="float32", scale=1.0,
                                 mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0)))


def layer_times(arch: str, reps: int = 3) -> list[float]:
    """This CPU's forward seconds per sample of each layer at SIZE (1 thread, batch 8)."""
    import torch

    from tessera.frozen.arch import build

    torch.manual_seed(0)
    model = build(arch).eval()
    x = torch.rand(8, 3, SIZE, SIZE)
    best = [math.inf] * len(model.layers())
    with torch.inference_mode():
        for _ in range(reps):
            h = x
            for k, (_, fn) in enumerate(model.layers()):
                t = time.perf_counter()
                h = fn(h)
                best[k] = min(best[k], (time.perf_counter() - t) / 8)
    return best


def run_epoch(rig: Rig, name: str, data: str, split: Any, batch: int, request: int,
              profile: Any, emulate: Any, seed: int = 0) -> tuple[Any, Any]:
    """One epoch of ``split``; returns (trainer, report)."""
    import torch

    import tessera
    from tessera.frozen.remote import FrozenModel
    from tessera.torch import SplitTrainer

    client = tessera.PushdownClient(rig.link_pd.endpoint, token=rig.server.token)
    net = FrozenModel.from_server(client, name,
                                  rig.models / f"{name.split('-')[0]}.safetensors")
    arr = tessera.open_array(rig.urls[data], storage_options=rig.s3.storage_options(
        endpoint=rig.link_data.endpoint))
    labels = np.random.default_rng(seed).integers(0, 10, arr.shape[0])
    torch.manual_seed(seed)
    width = net.layers[-2].nbytes // 4
    head = torch.nn.Linear(width, 10)
    trainer = SplitTrainer(net, head, freeze=FREEZE[name.split("-")[0]], data=arr,
                           labels=labels, batch_size=batch, request_size=request, split=split,
                           check="never", profile=profile, emulate=emulate, seed=seed)
    opt = torch.optim.SGD(trainer.trainable_parameters(), lr=0.001)
    report = trainer.train_epoch(opt, torch.nn.functional.cross_entropy)
    return trainer, report


def config(rig: Rig, mode: str, arch: str, batch: int, request: int, bandwidth: float,
           rho: float | None, emulate: Any, rows: list[dict[str, Any]],
           sweep_step: int = 1, repeats: int = 1) -> dict[str, Any]:
    """Profile, sweep every split (``repeats`` times, in turn: each split's median kept),
    NoSplit-f32; append rows; return the summary."""
    from tessera.frozen.planner import choose

    rig.bandwidth(bandwidth)
    base = dict(mode=mode, model=arch, batch=batch, request=request,
                bandwidth_mbit=round(bandwidth * 8 / 1e6, 2), rho=rho)
    t0 = time.perf_counter()
    trainer, report = run_epoch(rig, arch, "u8", "auto", batch, request, None, emulate)
    profile_s = time.perf_counter() - t0
    prof = trainer.profile
    plan = trainer.plan
    assert prof is not None and plan is not None
    f = trainer.freeze
    rows.append({**base, "system": "profiling epoch", "split": -1,
                 "measured_s": round(report.seconds, 4), "estimate_s": None})
    # splits the estimate puts beyond 3x the best cannot be the optimum (estimates are within
    # tens of percent): they are not measured, which keeps low-bandwidth sweeps in minutes
    best_est = min(c.epoch_s for c in plan.candidates)
    splits = sorted({s for s in range(0, f + 1, sweep_step)
                     if plan.candidate(s).epoch_s <= 3 * best_est} | {0, f, plan.split,
                                                        choose(prof, batch, request, "sum",
                                                               samples=plan.samples).split,
                                                        choose(prof, batch, request, "min").split})
    runs: dict[int, list[float]] = {s: [] for s in splits}
    last: dict[int, Any] = {}
    for _ in range(repeats):  # the splits in turn: a busy spell slows each alike
        for s in splits:
            _, last[s] = run_epoch(rig, arch, "u8", s, batch, request, prof, emulate)
            runs[s].append(last[s].seconds)
    swept = {s: statistics.median(runs[s]) for s in splits}
    for s in splits:
        rep = last[s]  # its wait, compute, server phases and bytes: the last of its epochs
        c = plan.candidate(s)
        rows.append({**base, "system": "sweep", "split": s, "layer": c.name or "(NoSplit)",
                     "out_kib": round(c.out_bytes / 1024, 1), "measured_s": round(swept[s], 4),
                     "measured_runs": " ".join(f"{t:.4f}" for t in runs[s]),
                     "estimate_s": round(c.epoch_s, 4),
                     "nsg_estimate_s": round(plan.samples / batch * c.sum_s, 4),
                     "est_server_s_it": round(c.server_s, 4),
                     "est_network_s_it": round(c.network_s, 4),
                     "est_client_s_it": round(c.client_s, 4),
                     "wait_s": round(rep.wait_s, 4), "compute_s": round(rep.compute_s, 4),
                     **{f"server_{k}_s": round(v, 4) for k, v in rep.server_phases.items()},
                     "bytes_received": rep.bytes_received, "fallbacks": rep.fallbacks})
    _, f32 = run_epoch(rig, f"{arch}-f32", "f32", "nosplit", batch, request, prof, emulate)
    picks = {"NoSplit-u8": 0, "@Freeze": f, "@Min": choose(prof, batch, request, "min").split,
             "NSG (sum)": choose(prof, batch, request, "sum", samples=plan.samples).split,
             "Tessera auto": plan.split}
    best = min(swept, key=lambda s: swept[s])
    summary = {**base, "profile_s": profile_s, "optimum_split": best,
               "optimum_s": swept[best], "nosplit_f32_s": f32.seconds}
    for system, s in picks.items():
        c = plan.candidate(s)
        est = c.epoch_s if system != "NSG (sum)" else plan.samples / batch * c.sum_s
        rows.append({**base, "system": system, "split": s, "measured_s": round(swept[s], 4),
                     "estimate_s": round(est, 4), "vs_optimum": round(swept[s] / swept[best], 4)})
        summary[system] = (s, swept[s], est)
    rows.append({**base, "system": "NoSplit-f32", "split": 0,
                 "measured_s": round(f32.seconds, 4), "bytes_received": None})
    rows.append({**base, "system": "swept optimum", "split": best,
                 "measured_s": round(swept[best], 4)})
    summary["profile"] = prof
    assert trainer.profiler.calibrated_on is not None
    measured, times = trainer.profiler.calibrated_on
    summary["replay"] = {**base, "samples": plan.samples, "early":
                         trainer.profiler.earliest_feasible(), "measured": measured.to_json(),
                         "durations": times.durations, "busy": times.busy,
                         "fetches": times.fetches,
                         "swept": {str(k): v for k, v in swept.items()},
                         "swept_runs": {str(k): v for k, v in runs.items()}}
    print(plan.explain(f"{mode} {arch}  "), flush=True)
    print({k: v for k, v in dataclasses.asdict(prof).items()
           if k in ("bandwidth", "rtt_s", "server_sample_s", "server_byte_s", "client_byte_s",
                    "client_decode_s", "train_s", "concurrency", "server_scale",
                    "client_scale", "server_cores")}, flush=True)
    print(f"{mode:8} {arch:11} B={batch:4} {bandwidth * 8 / 1e6:7.1f} Mbit/s  auto s={plan.split} "
          f"{swept[plan.split]:.2f}s  optimum s={best} {swept[best]:.2f}s  NoSplit-u8 "
          f"{swept[0]:.2f}s f32 {f32.seconds:.2f}s  NSG s={picks['NSG (sum)']}", flush=True)
    return summary


def emulation_for(archs: list[str]) -> tuple[Any, dict[str, list[float]]]:
    from tessera.frozen.emulate import Emulation, ModelTimes
    from tessera.frozen.inventory import layer_infos

    models, raw = {}, {}
    for arch in archs:
        t = layer_times(arch)
        scale = EMU_FORWARD_S / sum(t)
        fwd = tuple(x * scale for x in t)
        names = [i.name for i in layer_infos(arch, 1000, (3, SIZE, SIZE))]
        f = names.index(FREEZE[arch]) + 1
        train = 3 * sum(fwd[f:])  # forward + backward (about 2x) of the trained layers
        raw[arch] = list(fwd)
        for name in (arch, f"{arch}-f32"):
            models[name] = ModelTimes(fwd, 0.0, train)
    return Emulation(models), raw


def goals(summaries: list[dict[str, Any]], rows: list[dict[str, Any]],
          g8: list[dict[str, Any]], g11: dict[str, float]) -> list[dict[str, Any]]:
    out = []

    def add(goal: str, measured: str, target: str, met: bool | None, note: str = "") -> None:
        out.append({"goal": goal, "measured": measured, "target": target,
                    "met": "" if met is None else ("yes" if met else "NO"), "note": note})

    emu = [s for s in summaries if s["mode"] == "emulated"]
    real = [s for s in summaries if s["mode"] == "real"]
    for label, group in (("emulated", emu), ("real", real)):
        if not group:
            continue
        opt = [s["Tessera auto"][1] <= s["optimum_s"] * 1.01 for s in group]
        w5 = [s["Tessera auto"][1] <= s["optimum_s"] * 1.05 for s in group]
        nsg5 = [s["NSG (sum)"][1] <= s["optimum_s"] * 1.05 for s in group]
        add(f"G4 split quality ({label}, {len(group)} configs)",
            f"optimal {100 * np.mean(opt):.0f}%, within 5% {100 * np.mean(w5):.0f}%; NSG within "
            f"5% {100 * np.mean(nsg5):.0f}%", ">= 50% / >= 85% (paper 59.2 / 86.8; NSG 44.1)",
            np.mean(opt) >= 0.5 and np.mean(w5) >= 0.85 if label == "emulated" else None)
        worse = [s["Tessera auto"][1] / min(s["NoSplit-u8"][1], s["nosplit_f32_s"])
                 for s in group]
        add(f"G5 never worse than NoSplit ({label})",
            f"auto / best NoSplit: max {max(worse):.3f}, "
            f"{100 * np.mean([w <= 1.05 for w in worse]):.0f}% within +5%",
            "<= 1.05 in 100% of configs", all(w <= 1.05 for w in worse))
        sp = [s["NoSplit-u8"][1] / s["Tessera auto"][1] for s in group]
        spf = [s["Tessera auto"][1] and s["nosplit_f32_s"] / s["Tessera auto"][1] for s in group]
        sfz = [s["@Freeze"][1] / s["Tessera auto"][1] for s in group]
        add(f"G6 speed-up ({label})",
            f"vs NoSplit-u8 max {max(sp):.2f}x median {statistics.median(sp):.2f}x; vs "
            f"NoSplit-f32 max {max(spf):.2f}x; vs @Freeze max {max(sfz):.2f}x",
            ">= 1.5x somewhere (emulated); ResNet18 100 Mbit/s >= 1.4x (real)", None)
        errs = [abs(s["Tessera auto"][2] - s["Tessera auto"][1]) / s["Tessera auto"][1]
                for s in group]
        nerr = [abs(s["NSG (sum)"][2] - s["NSG (sum)"][1]) / s["NSG (sum)"][1] for s in group]
        add(f"G7 estimator accuracy ({label})",
            f"auto's chosen split within 15% in {100 * np.mean([e <= 0.15 for e in errs]):.0f}%"
            f" (median error {100 * statistics.median(errs):.0f}%); NSG's own estimate median "
            f"error {100 * statistics.median(nerr):.0f}%", ">= 80% within 15%",
            np.mean([e <= 0.15 for e in errs]) >= 0.8)
        prof = [s["profile_s"] / s["Tessera auto"][1] for s in group]
        add(f"G12 profiling cost ({label})",
            f"profiling epoch / epoch at the chosen split: median {statistics.median(prof):.2f}x",
            "reported", None)
    r18 = [s for s in real if s["model"] == "resnet18" and abs(s["bandwidth_mbit"] - 100) < 1]
    if r18:
        best = max(s["NoSplit-u8"][1] / s["Tessera auto"][1] for s in r18)
        add("G6 real ResNet18 at 100 Mbit/s vs NoSplit-u8", f"{best:.2f}x", ">= 1.4x",
            best >= 1.4)
    if g8:
        sizes = [r["chosen_out_kib"] for r in sorted(g8, key=lambda r: -r["bandwidth_mbit"])]
        falls = all(b <= a for a, b in itertools.pairwise(sizes))
        add("G8 bandwidth adaptivity (DenseNet121, planner on the measured profile)",
            "chosen KiB per sample from high to low bandwidth: " + ", ".join(
                f"{r['bandwidth_mbit']:g}:{r['chosen_split']}({r['chosen_out_kib']:g})"
                for r in sorted(g8, key=lambda r: -r["bandwidth_mbit"])),
            "non-increasing as bandwidth falls", falls)
    if g11:
        add("G11 prefix-only loading", f"{g11['arch']} to split {g11['split']}: "
            f"{g11['ratio_bytes']:.1f}x fewer bytes, {g11['ratio_s']:.1f}x faster "
            f"({g11['prefix_s']:.3f} s vs {g11['whole_s']:.3f} s)", ">= 10x bytes, >= 5x time",
            g11["ratio_bytes"] >= 10 and g11["ratio_s"] >= 5)
    return out


def prefix_loading(folder: Path, arch: str, split: int) -> dict[str, Any]:
    """Load the whole model vs only layers 1..split (best of 3)."""
    from tessera.frozen.manifest import read_manifest
    from tessera.frozen.weights import load_model

    spec = next(s for s in read_manifest(folder) if s.name == arch)
    times = {}
    for label, s in (("whole", None), ("prefix", split)):
        best = math.inf
        for _ in range(3):
            t = time.perf_counter()
            m = load_model(spec, folder, s, verify=False)
            best = min(best, time.perf_counter() - t)
        times[label] = best
        times[label + "_bytes"] = sum(v.nbytes for v in m.state_dict().values()
                                      if v.device.type != "meta")
    return {"arch": arch, "split": split, "whole_s": times["whole"],
            "prefix_s": times["prefix"],
            "ratio_bytes": times["whole_bytes"] / times["prefix_bytes"],
            "ratio_s": times["whole"] / times["prefix"]}


def plots(out: Path, summaries: list[dict[str, Any]], rows: list[dict[str, Any]],
          g8: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    systems = ["NoSplit-f32", "NoSplit-u8", "@Freeze", "@Min", "NSG (sum)", "Tessera auto"]
    labels = [f"{s['mode'][0]}:{s['model']}\nB{s['batch']} {s['bandwidth_mbit']:g}Mb" for s in
              summaries]
    for j, system in enumerate(systems):
        vals = [s["optimum_s"] / (s["nosplit_f32_s"] if system == "NoSplit-f32"
                                  else s[system][1]) for s in summaries]
        ax.bar(np.arange(len(summaries)) + j * 0.13, vals, 0.13, label=system)
    ax.set_xticks(np.arange(len(summaries)) + 0.33, labels, fontsize=6, rotation=90)
    ax.set_ylabel("swept optimum / system time (1 = optimal)")
    ax.set_title("Epoch time relative to the swept optimum (paper Fig. 7-10 analogue)")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(out / "frozen_speedup.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 5))
    sweep = [r for r in rows if r["system"] == "sweep"]
    ax.scatter([r["measured_s"] for r in sweep], [r["estimate_s"] for r in sweep], s=8,
               label="overlap rule (Tessera, HAPI)")
    ax.scatter([r["measured_s"] for r in sweep], [r["nsg_estimate_s"] for r in sweep], s=8,
               marker="x", label="sum rule (NSG)")
    top = max(r["measured_s"] for r in sweep) * 1.5
    ax.plot([0, top], [0, top], "k--", lw=0.8)
    ax.set_xlabel("measured epoch s")
    ax.set_ylabel("estimated epoch s")
    ax.set_title("Estimates vs measurements, every split\n(paper Fig. 11 analogue)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "frozen_estimates.png", dpi=120)
    plt.close(fig)

    if g8:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        g = sorted(g8, key=lambda r: r["bandwidth_mbit"])
        ax.plot([r["bandwidth_mbit"] for r in g], [r["chosen_out_kib"] for r in g], "o-")
        ax.set_xscale("log")
        ax.set_xlabel("link Mbit/s")
        ax.set_ylabel("chosen split's output KiB/sample")
        ax.set_title("DenseNet121: chosen split vs bandwidth (Fig. 13 analogue)")
        fig.tight_layout()
        fig.savefig(out / "frozen_bandwidth.png", dpi=120)
        plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="ResNet18 only (the default)")
    ap.add_argument("--full", action="store_true", help="the grid of the docstring")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    ap.add_argument("--real", nargs="+", metavar="ARCH",
                    help="only these models in real mode, no emulated grid (a subset of the "
                         "full grid's real configurations, e.g. to check an estimate)")
    ap.add_argument("--emulated", nargs="+", metavar="ARCH",
                    help="only these models in emulated mode, no real configurations (a "
                         "subset of the full grid's emulated ones)")
    ap.add_argument("--batches", nargs="+", type=int,
                    help="with --real or --emulated: these batches")
    ap.add_argument("--mbits", nargs="+", type=float, help="with --real: these Mbit/s")
    ap.add_argument("--repeats", type=int, default=1,
                    help="epochs per swept split, the splits in turn; each split's median "
                         "is its time (default 1)")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.real and args.emulated:
        ap.error("--real and --emulated each run a subset of one mode: give one of them")
    subset = bool(args.real or args.emulated)
    full = args.full or subset
    args.out.mkdir(parents=True, exist_ok=True)

    import torch

    import tessera
    from tessera.frozen.planner import choose
    from tessera.testing import EmulatedLink, PushdownTestServer, S3TestServer

    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    two_cores = len(os.sched_getaffinity(0)) >= 2
    if two_cores:
        pin(os.getpid(), {0})
    real_archs = [] if args.emulated else args.real or (
        ["resnet18", "alexnet"] if full else ["resnet18"])
    emu_archs = [] if args.real else args.emulated or (
        ["alexnet", "resnet18", "resnet50", "densenet121", "vgg11"] if full else ["resnet18"])
    batches = args.batches or ((32, 64) if full else (32,))
    mbits = args.mbits or ((20, 100, 400) if full else (100,))
    if full:
        emu_archs = list(dict.fromkeys(emu_archs))
    rows: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    g8: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "models"
        archs = sorted(set(real_archs) | set(emu_archs))
        make_models(folder, archs)
        g11 = {} if subset else prefix_loading(
            folder, "vgg11" if "vgg11" in archs else "resnet18", 21 if "vgg11" in archs else 9)
        emulation, _ = emulation_for(emu_archs)
        emu_file = Path(tmp) / "emulation.json"
        emulation.save(emu_file)
        with S3TestServer() as s3:
            direct = s3.storage_options()
            rng = np.random.default_rng(0)
            for mode, n in (("real", 512), ("emulated", 1024)):
                stored = rng.integers(0, 256, (n, 3, SIZE, SIZE), dtype=np.uint8)
                mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
                std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
                f32 = ((stored.astype(np.float32) / 255 - mean) / std).astype(np.float32)
                tessera.from_numpy(s3.url(f"{mode}/u8"), stored, tile=(1, 3, SIZE, SIZE),
                                   storage_options=direct)
                tessera.from_numpy(s3.url(f"{mode}/f32"), f32, tile=(1, 3, SIZE, SIZE),
                                   storage_options=direct)
            for mode in ("real", "emulated") if emu_archs else ("real",):
                extra = ["--models", str(folder), "--infer-threads", "1",
                         "--model-cache-bytes", "0", "--max-infer-samples", "512"]
                if mode == "emulated":
                    extra += ["--emulate-compute", str(emu_file)]
                with PushdownTestServer(s3.url(), storage_options=direct,
                                        extra_args=extra, start_timeout_s=120) as srv, \
                        EmulatedLink(s3.port, one_way_delay_s=ONE_WAY_S) as ld, \
                        EmulatedLink(srv.port, one_way_delay_s=ONE_WAY_S) as lp:
                    # two machines on two cores: the server and its store on one, the
                    # client and its link on the other (no contention between the sides)
                    if two_cores:
                        pin(srv.pid, {1})
                        pin(s3.pid or 0, {1})
                    rig = Rig(s3, srv, ld, lp, folder,
                              {"u8": s3.url(f"{mode}/u8"), "f32": s3.url(f"{mode}/f32")})
                    if mode == "real":
                        for arch in real_archs:
                            for batch in batches:
                                for mbit in mbits:
                                    summaries.append(config(rig, "real", arch, batch, 16,
                                                            mbit * 1e6 / 8, None, None, rows,
                                                            repeats=args.repeats))
                    else:
                        for arch in emu_archs:
                            in_bytes = 3 * SIZE * SIZE * 4
                            for batch in (args.batches if args.emulated and args.batches
                                          else (128, 512) if full else (128,)):
                                for rho in ((0.3, 1.0, 3.0) if full else (1.0,)):
                                    bw = in_bytes / (rho * EMU_FORWARD_S)
                                    s = config(rig, "emulated", arch, batch, 128, bw, rho,
                                               emulation, rows,
                                               sweep_step=1 if arch != "vgg11" else 2,
                                               repeats=args.repeats)
                                    summaries.append(s)
                                    if arch == "densenet121" and batch == 128 and rho == 1.0:
                                        prof = s["profile"]
                                        for mult in (8, 4, 2, 1, 0.5, 0.25, 0.125):
                                            p = dataclasses.replace(
                                                prof, bandwidth=prof.bandwidth * mult)
                                            plan = choose(p, 128, 128, "auto", samples=1024)
                                            c = plan.candidate(plan.split)
                                            g8.append({"bandwidth_mbit": round(
                                                p.bandwidth * 8 / 1e6, 1),
                                                "chosen_split": plan.split,
                                                "chosen_out_kib": round(c.out_bytes / 1024,
                                                                        1)})
    for s in summaries:
        s.pop("profile", None)
    write_csv(args.out / "frozen_split.csv", rows)
    (args.out / "frozen_replay.json").write_text(json.dumps(
        [s["replay"] for s in summaries], indent=1) + "\n")
    table = goals(summaries, rows, g8, g11)
    write_csv(args.out / "frozen_goals.csv", table)
    plots(args.out, summaries, rows, g8)
    lines = ["# Frozen-layer pushdown: measured results (`benchmarks/frozen_split.py"
             f"{' ' + ' '.join(sys.argv[1:]) if len(sys.argv) > 1 else ''}`)", "",
             "One run on this 2-core machine; see the script's docstring for the setup. "
             "Paper (HAPI, two T4 GPUs, ImageNet at 224 px): up to 2.5x vs NoSplit, "
             "59.2% optimal / 86.8% within 5% (NSG 44.1%).", "",
             "| goal | measured | target | met |", "|---|---|---|---|"]
    lines += [f"| {g['goal']} | {g['measured']} | {g['target']} | {g['met']} |" for g in table]
    lines += ["", "| mode | model | batch | Mbit/s | rho | auto split | auto s | optimum | "
                  "NoSplit-u8 s | NoSplit-f32 s | @Freeze s | @Min s | NSG split | NSG s |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(f"| {s['mode']} | {s['model']} | {s['batch']} | {s['bandwidth_mbit']:g} | "
                     f"{s['rho'] if s['rho'] is not None else ''} | {s['Tessera auto'][0]} | "
                     f"{s['Tessera auto'][1]:.2f} | s={s['optimum_split']} "
                     f"{s['optimum_s']:.2f} | {s['NoSplit-u8'][1]:.2f} | "
                     f"{s['nosplit_f32_s']:.2f} | {s['@Freeze'][1]:.2f} | {s['@Min'][1]:.2f} | "
                     f"{s['NSG (sum)'][0]} | {s['NSG (sum)'][1]:.2f} |")
    (args.out / "frozen_results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
