"""``tessera images`` and ``tessera import-images``: image sets stored by frequency
(docs/images.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tessera.cli.common import AllowHttpOpt, EndpointOpt, OptionOpt, RegionOpt, err, out
from tessera.cli.common import human as _human
from tessera.cli.common import options as _options

images_app = typer.Typer(help="Image columns: images stored by frequency (docs/images.md).",
                         no_args_is_help=True)


def import_images_cmd(
    source: Annotated[Path, typer.Argument(
        help="A folder of image files (ImageFolder layout SRC/<class>/<file> gives labels).")],
    url: Annotated[str, typer.Argument(help="Target URL of the new image set.")],
    size: Annotated[str, typer.Option(
        help="Canvas size: 256 (square) or HEIGHTxWIDTH, multiples of the block (32).")
    ] = "256",
    fit: Annotated[str, typer.Option(
        help="Other sizes: resize (short side + centre crop), pad (edge-replicate smaller "
             "images), error.")] = "resize",
    group: Annotated[int, typer.Option(help="Images per group (one request per group).")] = 32,
    q: Annotated[float, typer.Option(help="Quantization step (50 as the paper).")] = 50,
    colour: Annotated[str, typer.Option(help="ycbcr, rgb or gray.")] = "ycbcr",
    codec: Annotated[str, typer.Option(help="Codec of the columns.")] = "zstd:9",
    flush: Annotated[int, typer.Option(help="Images per append (fragment).")] = 4096,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Import a folder of images as an image set stored by frequency (docs/images.md), with
    a progress bar; unreadable files are skipped and listed."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from tessera.images import FrequencyFormat
    from tessera.importers.images import import_images

    try:
        parts = [int(v) for v in size.lower().split("x")]
    except ValueError:
        raise typer.BadParameter(f"--size must be N or HxW, got {size!r}") from None
    if len(parts) not in (1, 2):
        raise typer.BadParameter(f"--size must be N or HxW, got {size!r}")
    canvas = (parts[0], parts[-1])
    with Progress(TextColumn("importing images"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=err) as bar:
        task = bar.add_task("import", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        report = import_images(source, url, size=canvas, fit=fit, group=group,
                               fmt=FrequencyFormat(q=q, colour=colour), codec=codec,
                               flush_images=flush, progress=progress,
                               storage_options=_options(endpoint, region, allow_http, option))
    classes = f", {len(report.classes)} classes" if report.classes else ", no labels"
    out.print(f"import-images: {report.images} images{classes}, "
              f"{_human(report.stored_bytes)} stored -> {url}")
    for path, why in report.skipped:
        out.print(f"  skipped {path}: {why}")




@images_app.command("info")
def images_info(
    url: Annotated[str, typer.Argument(help="An image set made by ImageColumns.create.")],
    sample: Annotated[int, typer.Option(
        help="Images to measure PSNR on (0: skip; reads their coefficients).")] = 16,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Print an image set's format and, per k, the stored bytes per image (exact, from the
    bookkeeping) and the PSNR against the stored full quality on a sample."""
    import numpy as np

    from tessera.images import ImageColumns, psnr

    cols = ImageColumns.open(url, storage_options=_options(endpoint, region, allow_http,
                                                           option))
    count = len(cols)
    fmt = cols.fmt
    out.print(f"[bold]{url}[/]  {count} images of {cols.size[0]}x{cols.size[1]}, "
              f"{fmt.colour}, {fmt.block}x{fmt.block} blocks, q = {fmt.q}, groups of "
              f"{cols.group}, {cols.header.codec}")
    if not count:
        return
    per_image = cols.bytes_per_k() / count
    scores: dict[int, float] = {}
    ks = [k for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, fmt.k_max) if k <= fmt.k_max]
    if sample > 0:
        ids = cols.ids()
        chosen = ids[np.linspace(0, count - 1, min(sample, count)).astype(int)]
        columns = cols.read_columns(chosen.tolist(), 0, fmt.k_max)
        best = fmt.decode(columns)
        scores = {k: psnr(best, fmt.decode(columns[:k])) for k in ks}
    table = Table("k", "coefficients per block", "bytes per image", "share of k max",
                  f"PSNR dB vs k = {fmt.k_max}" + (f" ({min(sample, count)} images)"
                                                   if scores else ""),
                  title="bytes and quality per k", title_justify="left")
    for k in ks:
        table.add_row(str(k), str(fmt.kept(k)), f"{per_image[k - 1]:,.0f}",
                      f"{per_image[k - 1] / per_image[-1]:.1%}",
                      "-" if k not in scores else ("exact" if np.isinf(scores[k])
                                                   else f"{scores[k]:.2f}"))
    out.print(table)
