"""``tessera model init|check|convert`` (the operator's models folder, docs/frozen.md),
``tessera model profile|explain`` (where to split training between server and client)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tessera.cli.common import App, human, out, table

app = App(help="Frozen models for the server, and where to split training.")
FolderOpt = Annotated[Path, typer.Option("--out", metavar="FOLDER", help="The models folder "
                                         "(models.json + weights).")]


@app.command("init")
def init(
    arch: Annotated[str, typer.Argument(
        metavar="ARCH", show_default=False, help="An architecture: alexnet, densenet121, "
                                                 "resnet18, resnet50, vgg11, vgg19, vit_b_16.")],
    out_dir: FolderOpt,
    seed: Annotated[int, typer.Option(metavar="N", help="Seed of the random weights.")] = 0,
    name: Annotated[str | None, typer.Option(
        metavar="NAME", help="The model's name (default ARCH-seedN).")] = None,
    num_classes: Annotated[int, typer.Option(metavar="N", help="Outputs of the last layer.")]
    = 1000,
    size: Annotated[int, typer.Option(metavar="PIXELS", help="Input height and width.")]
    = 224,
    max_split: Annotated[int | None, typer.Option(
        metavar="LAYER", help="Last layer the server may run (default: all but the last).")]
    = None,
) -> None:
    """Register random weights of an architecture in a models folder.

    The weights are drawn from `--seed` (the same bytes everywhere) and written as
    safetensors with their sha256, for tests and benchmarks: nothing is downloaded.

    **Examples**

    ```
    tessera model init resnet18 --out models --size 32 --name r18
    ```
    """
    from tessera.frozen.manifest import InputSpec
    from tessera.frozen.models import init_model

    spec = init_model(arch, out_dir, seed=seed, name=name, num_classes=num_classes,
                      input=InputSpec(height=size, width=size), max_split=max_split)
    out.print(f"registered {spec.name} ({spec.arch}) in {out_dir}: {spec.weights}, sha256 "
              f"{spec.sha256}")


@app.command("check")
def check(folder: Annotated[Path, typer.Argument(
        metavar="FOLDER", show_default=False, help="The models folder.")]) -> None:
    """Check every registered model of a models folder and print its layers.

    Each model's hash is checked, then its tensors' names and shapes; the first file at
    fault is named and the exit status is 1.

    **Examples**

    ```
    tessera model check models
    ```
    """
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
        grid = table("layer", "name", "output per sample", "KiB (fp32)")
        for i in infos:
            grid.add_row(str(i.index), i.name, str(i.shape), f"{i.nbytes / 1024:,.1f}")
        out.print(grid)


@app.command("convert")
def convert_cmd(
    arch: Annotated[str, typer.Argument(
        metavar="ARCH", show_default=False, help="The architecture the state_dict is of.")],
    source: Annotated[Path, typer.Argument(
        metavar="FILE", show_default=False, help="A .pt or .pth state_dict.")],
    target: Annotated[Path, typer.Argument(
        metavar="TARGET", show_default=False, help="The .safetensors file to write.")],
    num_classes: Annotated[int, typer.Option(metavar="N", help="Outputs of the last layer.")]
    = 1000,
) -> None:
    """Turn a .pt state_dict into a safetensors file.

    The file is read with `torch.load(weights_only=True)`, only when it is a torch zip
    archive, and checked strictly against ARCH.

    **Examples**

    ```
    tessera model convert resnet18 r18.pt r18.safetensors --num-classes 10
    ```
    """
    from tessera.frozen.weights import convert

    sha = convert(arch, source, target, num_classes)
    out.print(f"wrote {target} (sha256 {sha}); register it in models.json")


@app.command("profile")
def profile_model(
    name: Annotated[str, typer.Argument(metavar="NAME", show_default=False,
                                        help="A model the server hosts.")],
    pushdown: Annotated[str, typer.Option(
        metavar="URL", help="The pushdown server, http://host:port (token: "
                            "TESSERA_PUSHDOWN_TOKEN).")],
    weights: Annotated[Path, typer.Option(metavar="FILE", help="The same weights file, "
                                                               "here.")],
    array: Annotated[str, typer.Option(metavar="URL", help="An array of stored samples the "
                                                           "server serves.")],
    freeze: Annotated[str, typer.Option(metavar="LAYER", help="The last frozen layer (name "
                                                              "or index).")],
    batch: Annotated[int, typer.Option(metavar="N", help="Training batch size.")] = 128,
    request: Annotated[int, typer.Option(metavar="N", help="Samples per request.")] = 128,
    samples: Annotated[int, typer.Option(metavar="N", help="Samples to profile on.")] = 512,
    out_file: Annotated[Path | None, typer.Option(
        "--out", metavar="FILE", help="Where to save the profile (default "
                                      "NAME.split-profile.json).")] = None,
) -> None:
    r"""Measure where to split training between the pushdown server and this client.

    Times the server's frozen layers up to the freeze point, the client's layers from the
    earliest feasible split, and the link, on `--samples` samples; prints the plan and
    saves the profile for `tessera model explain` and `SplitTrainer(profile=...)`.
    Nothing is trained: the trained layers are timed forward and backward.

    **Examples**

    ```
    tessera model profile r18 --pushdown http://127.0.0.1:8700 \
        --weights models/r18.safetensors --array data/samples \
        --freeze layer4.0 --batch 8 --request 4 --samples 32
    ```
    """
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


@app.command("explain")
def explain_split(
    profile: Annotated[Path, typer.Argument(
        metavar="PROFILE", show_default=False, help="A profile saved by `tessera model "
                                                    "profile`.")],
    batch: Annotated[int, typer.Option(metavar="N", help="Training batch size.")] = 128,
    request: Annotated[int, typer.Option(metavar="N", help="Samples per request.")] = 128,
    samples: Annotated[int, typer.Option(metavar="N", help="Samples per epoch.")] = 30_720,
    rule: Annotated[str, typer.Option(metavar="RULE", help="auto, sum, freeze, min, nosplit "
                                                           "or a layer index.")] = "auto",
    bandwidth_mbit: Annotated[float | None, typer.Option(
        "--bandwidth-mbit", metavar="MBIT/S", help="Plan for this link instead of the "
                                                   "profiled one.")] = None,
    phi: Annotated[float, typer.Option(
        metavar="SECONDS", help="Seconds per dollar in the objective (0: fastest).")] = 0.0,
    pricing: Annotated[str | None, typer.Option(
        metavar="TABLE", help="Price the plan with this table (s3, gcs, azure, local) "
                              "instead of the profile's own prices.")] = None,
) -> None:
    """Print every candidate split's estimate and the split the rule picks.

    Per candidate: server, network and client seconds per iteration and per epoch, the
    ratio to not splitting, and dollars per epoch.

    **Examples**

    ```
    tessera model explain r18.split-profile.json --batch 256 --bandwidth-mbit 20
    ```
    """
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
