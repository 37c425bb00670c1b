"""Frozen-layer pushdown: the goals that are not epoch times (issue 26, spec section 6.2).

- **G1** features equal local computation: every model and every split ``1..F`` through a
  real ``tessera serve --models`` process, 2 samples each, the largest error relative to
  the largest local value (target <= 1e-4 in fp32). ``--quick``: ResNet18 and AlexNet;
  ``--full``: all seven architectures (ViT-B/16 at 224 x 224, the others at 64 x 64).
- **G9** batch-size adaptation: the growth of the peak resident memory (``VmHWM``, reset
  through ``/proc/self/clear_refs`` after a warm-up; each measurement in its own spawned
  process) while the server's forward pass runs ResNet50 to split 7 (``layer1.2``, 3,136
  KiB per sample) on a 128-sample request (64 with ``--quick``) at 224 x 224, with server
  batches of 16, the answer streamed (each batch's features sent and let go) and whole, and
  of all the request's samples, whole (target: >= 4x lower with 16 streamed than with all).
  A whole answer holds the request's 392 MiB of features beside the activations; a
  streamed one holds one batch's.
- **G10** server concurrency (the paper's Figure 14): the wall time of 4 requests of 16
  samples sent at once to a server computing 1 of them at a time and to one computing 4,
  AlexNet and ResNet50 at an early, a middle and the last frozen split (64 x 64 inputs, one
  torch thread per request, the server unpinned on this machine's cores). Reported.
- **G13** accounting: the bytes the emulated link carried in both directions against the
  client's ``IOStats`` of the same requests (target: equal within HTTP framing bytes).

Writes ``frozen_checks.csv`` and ``frozen_checks.md`` under ``--out``.

    python benchmarks/frozen_checks.py [--quick | --full] [--out DIR]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_csv

if TYPE_CHECKING:
    from tessera.frozen.remote import FrozenModel
    from tessera.storage.stats import IOStats

FREEZE = {"alexnet": "classifier.1", "resnet18": "layer4.0", "resnet50": "avgpool",
          "densenet121": "features.denseblock4", "vgg11": "classifier.3",
          "vgg19": "features.35", "vit_b_16": "encoder.layers.encoder_layer_11"}


def features_check(archs: list[str], root: Path) -> list[dict[str, Any]]:
    """G1: the server's features against local ones at every split of every ``archs``."""
    import tessera
    from tessera._sync import run_sync
    from tessera.frozen.manifest import InputSpec
    from tessera.frozen.models import init_model
    from tessera.frozen.remote import FrozenModel
    from tessera.testing import PushdownTestServer

    models = root / "models"
    rng = np.random.default_rng(0)
    for size in (64, 224):
        tessera.from_numpy((root / f"data{size}").as_uri(),
                           rng.integers(0, 256, (2, 3, size, size), dtype=np.uint8),
                           tile=(1, 3, size, size))
    for arch in archs:
        size = 224 if arch == "vit_b_16" else 64
        print(f"G1: {arch} weights", flush=True)
        init_model(arch, models, seed=0, name=arch, input=InputSpec(height=size, width=size))
    rows = []
    with PushdownTestServer(root.as_uri(), extra_args=["--models", str(models)],
                            start_timeout_s=120) as srv:
        client = srv.client()
        for arch in archs:
            size = 224 if arch == "vit_b_16" else 64
            net = FrozenModel.from_server(client, arch, models / f"{arch}.safetensors")
            stored = tessera.open_array((root / f"data{size}").as_uri())[:]
            freeze = net.index(FREEZE[arch])
            worst, t0 = 0.0, time.perf_counter()
            for split in range(1, freeze + 1):
                got = run_sync(net.remote_features(f"data{size}", [0, 1], split))
                local = net.local_features(stored, split)
                err = net.compare(got.features, local, split)  # raises over 1e-4
                worst = max(worst, err)
                rows.append({"goal": "G1", "model": arch, "split": split,
                             "layer": net.layers[split - 1].name, "rel_error": err})
            print(f"G1: {arch} splits 1..{freeze}: max rel. error {worst:.2e} "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
    return rows


def _status_bytes(field: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _peak_growth(folder: str, cos: int, samples: int, streamed: bool) -> dict[str, float]:
    """In a fresh process: the peak RSS growth of the server's forward pass (bytes), its
    features gathered whole (the whole answer) or each server batch's converted and let go
    as a streamed answer sends it."""
    import torch

    import tessera
    from tessera.config import ServerConfig
    from tessera.frozen.manifest import read_manifest
    from tessera.frozen.weights import load_model
    from tessera.pushdown.infer_items import InferRequest
    from tessera.server.infer import InferService

    torch.set_num_threads(1)
    spec = next(s for s in read_manifest(folder) if s.name == "resnet50")
    service = InferService(tessera.open_store(Path(folder).as_uri()),
                           ServerConfig(models_dir=folder))
    model = load_model(spec, folder, 7)
    x = torch.rand(samples, 3, 224, 224)
    req = InferRequest("resnet50", 7, "none", tuple(range(samples)), stream=streamed)
    for _ in service.forward_batches(model, x[:1], req, 1):  # warm up: allocator, weights
        pass
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) restarts from now
    base = _status_bytes("VmRSS")
    t = time.perf_counter()
    out, filled, held, used = None, 0, 0, [cos]
    for h, at in service.forward_batches(model, x, req, cos):
        used.append(at)
        if streamed:  # what the handler does per batch: convert, send, let go
            held = max(held, np.ascontiguousarray(h.numpy().astype(req.output_dtype)).nbytes)
            continue
        if out is None:  # the whole answer's features, written batch by batch
            out = torch.empty((samples, *h.shape[1:]), dtype=h.dtype)
        out[filled:filled + h.shape[0]] = h
        filled += h.shape[0]
        held = out.numel() * out.element_size()
    seconds = time.perf_counter() - t
    peak = _status_bytes("VmHWM")
    return {"growth": float(peak - base), "features": float(held), "used": float(used[-1]),
            "seconds": seconds}


def memory_check(root: Path, samples: int) -> list[dict[str, Any]]:
    """G9: peak memory growth with server batches of 16 (answer streamed, and whole) and of
    all the request's samples (whole), one spawned process each."""
    from tessera.frozen.manifest import InputSpec
    from tessera.frozen.models import init_model

    folder = root / "g9"
    init_model("resnet50", folder, seed=0, name="resnet50",
               input=InputSpec(height=224, width=224))
    ctx = multiprocessing.get_context("spawn")
    rows = []
    for cos, streamed in ((16, True), (16, False), (samples, False)):
        with ctx.Pool(1) as pool:
            got = pool.apply(_peak_growth, (str(folder), cos, samples, streamed))
        answer = "streamed" if streamed else "whole"
        rows.append({"goal": "G9", "model": "resnet50", "split": 7, "samples": samples,
                     "cos_batch": cos, "answer": answer,
                     "peak_growth_mib": got["growth"] / 2**20,
                     "features_mib": got["features"] / 2**20,
                     "activations_mib": (got["growth"] - got["features"]) / 2**20,
                     "seconds": got["seconds"]})
        print(f"G9: server batch {cos}, {answer} answer: peak grows "
              f"{got['growth'] / 2**20:.0f} MiB (features held {got['features'] / 2**20:.0f} "
              f"MiB) in {got['seconds']:.1f} s", flush=True)
    return rows


CONCURRENCY_SPLITS = {"alexnet": (3, 9, 17), "resnet50": (4, 9, 21)}


async def _four(net: FrozenModel, split: int, stats: IOStats) -> float:
    """Seconds for 4 requests of 16 samples each sent at once."""
    import asyncio

    t = time.perf_counter()
    await asyncio.gather(*(net.remote_features("data10", list(range(16 * i, 16 * i + 16)),
                                               split, record=stats.record) for i in range(4)))
    return time.perf_counter() - t


def concurrency_check(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """G10 and G13: 4 requests at once against infer concurrency 1 and 4, through a link."""
    import tessera
    from tessera._sync import run_sync
    from tessera.frozen.manifest import InputSpec
    from tessera.frozen.models import init_model
    from tessera.frozen.remote import FrozenModel
    from tessera.storage.stats import IOStats
    from tessera.testing import EmulatedLink, PushdownTestServer

    models = root / "models10"
    rng = np.random.default_rng(1)
    tessera.from_numpy((root / "data10").as_uri(),
                       rng.integers(0, 256, (64, 3, 64, 64), dtype=np.uint8),
                       tile=(1, 3, 64, 64))
    for arch in CONCURRENCY_SPLITS:
        init_model(arch, models, seed=0, name=arch, input=InputSpec(height=64, width=64))
    g10: list[dict[str, Any]] = []
    g13: list[dict[str, Any]] = []
    for slots in (1, 4):
        args = ["--models", str(models), "--infer-concurrency", str(slots)]
        with PushdownTestServer(root.as_uri(), extra_args=args, start_timeout_s=120) as srv, \
                EmulatedLink(srv.port) as link:
            client = tessera.PushdownClient(link.endpoint, token=srv.token or "")
            for arch, splits in CONCURRENCY_SPLITS.items():
                net = FrozenModel.from_server(client, arch, models / f"{arch}.safetensors")
                for split in splits:
                    run_sync(_four(net, split, IOStats()))  # warm up: the prefix cached
                    link.reset_counters()
                    stats = IOStats()
                    seconds = min(run_sync(_four(net, split, stats)) for _ in range(3))
                    c = link.counters()
                    g10.append({"goal": "G10", "model": arch, "split": split,
                                "layer": net.layers[split - 1].name, "concurrency": slots,
                                "seconds": seconds})
                    g13.append({"goal": "G13", "model": arch, "split": split,
                                "concurrency": slots, "requests": stats.requests,
                                "link_requests": c.requests,
                                "iostats_received": stats.bytes_received,
                                "link_body_down": c.response_body_bytes,
                                "link_head_down": c.response_head_bytes,
                                "iostats_sent": stats.bytes_sent,
                                "link_body_up": c.request_body_bytes,
                                "link_head_up": c.request_head_bytes})
                    print(f"G10: {arch} split {split} concurrency {slots}: "
                          f"{seconds:.3f} s for 4 requests", flush=True)
    return g10, g13


def report(out: Path, g1: list[dict[str, Any]], g9: list[dict[str, Any]],
           g10: list[dict[str, Any]], g13: list[dict[str, Any]]) -> str:
    lines = ["# Frozen-layer pushdown: checks (`benchmarks/frozen_checks.py`)", "",
             "| goal | measured | target | met |", "|---|---|---|---|"]
    for arch in dict.fromkeys(r["model"] for r in g1):
        errs = [r["rel_error"] for r in g1 if r["model"] == arch]
        lines.append(f"| G1 {arch}, splits 1..{len(errs)} | max rel. error "
                     f"{max(errs):.1e} | <= 1e-4 | {'yes' if max(errs) <= 1e-4 else 'NO'} |")
    if g9:
        streamed, small, large = g9[0], g9[1], g9[-1]
        total = large["peak_growth_mib"] / max(streamed["peak_growth_mib"], 1e-9)
        whole = large["peak_growth_mib"] / max(small["peak_growth_mib"], 1e-9)
        lines.append(f"| G9 ResNet50 split 7, {small['samples']} samples at 224 px: peak "
                     f"growth, server batch {small['cos_batch']} streamed vs "
                     f"{large['cos_batch']} whole | "
                     f"{streamed['peak_growth_mib']:.0f} vs {large['peak_growth_mib']:.0f} MiB "
                     f"({total:.1f}x; batch {small['cos_batch']} with a whole answer: "
                     f"{small['peak_growth_mib']:.0f} MiB, {whole:.1f}x, of which "
                     f"{small['features_mib']:.0f} MiB of features) | >= 4x | "
                     f"{'yes' if total >= 4 else 'NO'} |")
    one = {(r["model"], r["split"]): r for r in g10 if r["concurrency"] == 1}
    for r in g10:
        if r["concurrency"] == 4:
            base = one[(r["model"], r["split"])]
            lines.append(f"| G10 {r['model']} split {r['split']} ({r['layer']}): 4 requests, "
                         f"infer concurrency 1 vs 4 | {base['seconds']:.3f} vs "
                         f"{r['seconds']:.3f} s ({base['seconds'] / r['seconds']:.2f}x) | "
                         f"reported | - |")
    if g13:
        down = max(abs(r["link_body_down"] - r["iostats_received"]) for r in g13)
        up = max(abs(r["link_body_up"] - r["iostats_sent"]) for r in g13)
        same = all(r["requests"] == r["link_requests"] for r in g13)
        heads = max(r["link_head_down"] + r["link_head_up"] for r in g13)
        lines.append(f"| G13 link bytes vs IOStats, {len(g13)} measurements of 3 rounds of 4 "
                     f"requests | largest "
                     f"body difference {down} B down, {up} B up; requests "
                     f"{'equal' if same else 'DIFFER'}; HTTP heads up to {heads} B a measurement | "
                     f"equal within framing | {'yes' if same and down == up == 0 else 'NO'} |")
    text = "\n".join(lines) + "\n"
    (out / "frozen_checks.md").write_text(text)
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="ResNet18 and AlexNet (default)")
    group.add_argument("--full", action="store_true", help="all seven architectures")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    archs = list(FREEZE) if args.full else ["resnet18", "alexnet"]
    with tempfile.TemporaryDirectory() as tmp:
        g1 = features_check(archs, Path(tmp))
        g9 = memory_check(Path(tmp), 128 if args.full else 64)
        g10, g13 = concurrency_check(Path(tmp))
    write_csv(args.out / "frozen_checks.csv", g1 + g9 + g10 + g13)
    print(report(args.out, g1, g9, g10, g13))


if __name__ == "__main__":
    main()
