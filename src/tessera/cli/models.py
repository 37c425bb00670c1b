"""``tessera models init|check|convert`` (the operator's models folder, docs/frozen.md),
``tessera profile-model`` and ``tessera explain-split`` (the split planner)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tessera.cli.common import human, out

models_app = typer.Typer(help="Models a pushdown server may run (docs/frozen.md).",
                         no_args_is_help=True)
FolderOpt = Annotated[Path, typer.Option("--out", help="The models folder (models.json + "
                                                       "weights).")]


@models_app.command("init")
def init(
    arch: Annotated[str, typer.Argument(help="An architecture: alexnet, densenet121, resnet18, "
                                             "resnet50, vgg11, vgg19, vit_b_16.")],
    out_dir: FolderOpt,
    seed: Annotated[int, typer.Option(help="Seed of the random weights.")] = 0,
    name: Annotated[str | None, typer.Option(help="The model's name (default ARCH-seedS).")]
    = None,
    num_classes: Annotated[int, typer.Option(help="Outputs of the last layer.")] = 1000,
    size: Annotated[int, typer.Option(help="Input height and width.")] = 224,
    max_split: Annotated[int | None, typer.Option(
        help="Last layer the server may run (default: all but the last).")] = None,
) -> None:
    """Write random weights of ARCH (drawn from --seed: the same bytes everywhere) as
    safetensors and register them with their sha256 (for tests and benchmarks; there is no
    download)."""
    from tessera.frozen.manifest import InputSpec
    from tessera.frozen.models import init_model

    spec = init_model(arch, out_dir, seed=seed, name=name, num_classes=num_classes,
                      input=InputSpec(height=size, width=size), max_split=max_split)
    out.print(f"registered {spec.name} ({spec.arch}) in {out_dir}: {spec.weights}, sha256 "
              f"{spec.sha256}")


@models_app.command("check")
def check(folder: Annotated[Path, typer.Argument(help="The models folder.")]) -> None:
    """Check every registered model (hash, then the tensors' names and shapes) and print its
    layers; exits 1 naming the first file at fault."""
    from tessera.frozen.inventory import layer_infos
    from tessera.frozen.manifest import writable_warning
    from tessera.frozen.models import check_models

    if (warning := writable_warning(folder)) is not None:
        out.print(f"[yellow]warning:[/] {warning}")
    for spec, report in check_models(folder):
        infos = layer_infos(spec.arch, spec.num_classes, spec.input.sample_shape)
        out.print(f"[bold]{spec.name}[/]  {spec.arch}, {report.parameters:,} parameters, "
                  f"{human(report.nbytes)} ({report.path.name}), sha256 {spec.sha256[:16]}..., "
                  f"input {spec.input.sample_shape} {spec.input.dtype}")
        table = Table("layer", "name", "output per sample", "KiB (fp32)")
        for i in infos:
            table.add_row(str(i.index), i.name, str(i.shape), f"{i.nbytes / 1024:,.1f}")
        out.print(table)


@models_app.command("convert")
def convert_cmd(
    arch: Annotated[str, typer.Argument(help="The architecture the state_dict is of.")],
    source: Annotated[Path, typer.Argument(help="A .pt or .pth state_dict.")],
    target: Annotated[Path, typer.Argument(help="The .safetensors file to write.")],
    num_classes: Annotated[int, typer.Option(help="Outputs of the last layer.")] = 1000,
) -> None:
    """Turn a .pt state_dict into safetensors (read with torch.load(weights_only=True), only
    when it is a torch zip archive; checked strictly against ARCH)."""
    from tessera.frozen.weights import convert

    sha = convert(arch, source, target, num_classes)
    out.print(f"wrote {target} (sha256 {sha}); register it in models.json")


def profile_model(
    name: Annotated[str, typer.Argument(help="A model the server hosts.")],
    pushdown: Annotated[str, typer.Option(help="The pushdown server, http://host:port "
                                               "(token: TESSERA_PUSHDOWN_TOKEN).")],
    weights: Annotated[Path, typer.Option(help="The same weights file, here.")],
    array: Annotated[str, typer.Option(help="An array of stored samples the server serves.")],
    freeze: Annotated[str, typer.Option(help="The last frozen layer (name or index).")],
    batch: Annotated[int, typer.Option(help="Training batch size.")] = 128,
    request: Annotated[int, typer.Option(help="Samples per request.")] = 128,
    samples: Annotated[int, typer.Option(help="Samples to profile on (epoch 0).")] = 512,
    out_file: Annotated[Path | None, typer.Option("--out", help="Where to save the profile "
                                                                "(JSON).")] = None,
) -> None:
    """Profile a model's split (the paper's epoch 0: the server at the freeze point, the
    client at the earliest feasible split, the link) on --samples samples, print the plan
    and save the profile for `tessera explain-split` and SplitTrainer(profile=...). Nothing
    is trained: the trained layers are timed forward and backward."""
    from tessera.array.factories import open_array
    from tessera.frozen.planner import choose
    from tessera.frozen.profile import profile_split
    from tessera.frozen.remote import FrozenModel
    from tessera.query.plan import default_pricing
    from tessera.storage.pricing import get_pricing

    net = FrozenModel.from_server(pushdown, name, weights)
    data = open_array(array)
    last = net.index(int(freeze) if freeze.isdigit() else freeze)
    profile, n, seconds = profile_split(net, data, last, samples=samples, batch_size=batch,
                                        request_size=request)
    profile = profile.with_prices(get_pricing(default_pricing(data.store.url)))
    plan = choose(profile, batch, request, "auto", samples=data.shape[0])
    out.print(plan.explain(f"{name}  "))
    out.print(f"profiled on {n} samples in {seconds:.1f} s")
    path = out_file or Path(f"{name}.split-profile.json")
    path.write_text(json.dumps(profile.to_json(), indent=1))
    out.print(f"saved {path}")


def explain_split(
    profile: Annotated[Path, typer.Argument(help="A profile saved by tessera profile-model.")],
    batch: Annotated[int, typer.Option(help="Training batch size.")] = 128,
    request: Annotated[int, typer.Option(help="Samples per request.")] = 128,
    samples: Annotated[int, typer.Option(help="Samples per epoch.")] = 30_720,
    rule: Annotated[str, typer.Option(help="auto, sum, freeze, min, nosplit or a layer "
                                           "index.")] = "auto",
    bandwidth_mbit: Annotated[float | None, typer.Option(
        "--bandwidth-mbit", help="Plan for this link instead of the profiled one.")] = None,
    phi: Annotated[float, typer.Option(
        help="Seconds per dollar in the objective (0: fastest).")] = 0.0,
    pricing: Annotated[str | None, typer.Option(
        help="Price the plan with this table (s3, gcs, azure, local) instead of the "
             "profile's own prices.")] = None,
) -> None:
    """Print every candidate split's estimate (server, network and client seconds per
    iteration, epoch, ratio to NoSplit, dollars per epoch) and the one the rule picks."""
    import dataclasses

    from tessera.frozen.planner import SplitProfile, choose
    from tessera.storage.pricing import get_pricing

    prof = SplitProfile.from_json(json.loads(profile.read_text()))
    if bandwidth_mbit is not None:
        prof = dataclasses.replace(prof, bandwidth=bandwidth_mbit * 1e6 / 8)
    if pricing is not None:
        prof = prof.with_prices(get_pricing(pricing))
    plan = choose(prof, batch, request, int(rule) if rule.isdigit() else rule, samples,
                  phi=phi)
    out.print(plan.explain())
