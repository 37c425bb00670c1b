"""``tessera images info``: an image set's bytes and quality per k (docs/images.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from tessera.cli.common import (
    AllowHttpOpt,
    App,
    AtOpt,
    EndpointOpt,
    OptionOpt,
    RegionOpt,
    options,
    out,
    table,
    url_arg,
)
from tessera.when import moment

app = App(help="Image sets: bytes and quality per level of detail k.")


@app.command("info")
def images_info(
    url: Annotated[str, url_arg("An image set.")],
    sample: Annotated[int, typer.Option(
        metavar="N", help="Images to measure PSNR on (0: none; reads their coefficients).")]
    = 16,
    at: AtOpt = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Print an image set's stored bytes and quality per level of detail k.

    Per k: the bytes per image (exact, from the bookkeeping) and the PSNR against the
    stored full quality, measured on a sample of `--sample` images.

    **Examples**

    ```
    tessera images info data/photos --sample 4
    ```
    """
    import numpy as np

    from tessera.images import ImageColumns, psnr

    cols = ImageColumns.open(url, storage_options=options(endpoint, region, allow_http,
                                                          option), at=moment(at, "--at"))
    count = len(cols)
    fmt = cols.fmt
    out.print(f"[bold]{url}[/]  {count} images of {cols.size[0]}x{cols.size[1]}, "
              f"{fmt.colour}" + (f" {fmt.chroma}" if fmt.colour == "ycbcr" else "") +
              f", {fmt.block}x{fmt.block} blocks, q = {fmt.q}, groups of "
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
    planes = fmt.channels(cols.channels)  # stored channels (4:2:0 folds its three in one)
    grid = table("k", "coefficients per block", "bytes per image", "share of k max",
                 f"PSNR dB vs k = {fmt.k_max}" + (f" ({min(sample, count)} images)"
                                                  if scores else ""),
                 title="bytes and quality per k")
    for k in ks:
        grid.add_row(str(k), str(fmt.stored(k) * planes), f"{per_image[k - 1]:,.0f}",
                      f"{per_image[k - 1] / per_image[-1]:.1%}",
                      "-" if k not in scores else ("exact" if np.isinf(scores[k])
                                                   else f"{scores[k]:.2f}"))
    out.print(grid)
