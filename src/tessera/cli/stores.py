"""``tessera store profile|stat``: measure a store for the read planner, look at one
object."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import tessera
from tessera.cli.common import (
    AllowHttpOpt,
    App,
    EndpointOpt,
    OptionOpt,
    QuietOpt,
    RegionOpt,
    err,
    human,
    object_url,
    options,
    out,
    table,
    url_arg,
)
from tessera.errors import TesseraError
from tessera.query.profiler import endpoint_id

app = App(help="Measure a store for the read planner; look at one object.")


@app.command("stat")
def stat(
    url: Annotated[str, url_arg("One object, e.g. `s3://bucket/path/key`.")],
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Show one object's size, modification time and ETag.

    **Examples**

    ```
    tessera store stat data/frames/__schema.json
    ```
    """
    root, key = object_url(url)
    store = tessera.open_store(root, **options(endpoint, region, allow_http, option))
    info = store.head(key)
    grid = table("", "")
    grid.show_header = False
    grid.add_row("url", url)
    grid.add_row("size", f"{info.size} bytes ({human(info.size)})")
    grid.add_row("modified", info.last_modified.isoformat())
    grid.add_row("etag", info.etag or "-")
    if info.version:
        grid.add_row("version", info.version)
    out.print(grid)


@app.command("profile")
def profile(
    url: Annotated[str, url_arg("A place in the store to measure, e.g. `s3://bucket/scratch`.")],
    quick: Annotated[bool, typer.Option(
        "--quick", help="A few seconds instead of a minute or so.")] = False,
    plot: Annotated[Path | None, typer.Option(
        metavar="PNG", help="Also draw bandwidth against concurrent requests into PNG.")]
    = None,
    save: Annotated[bool, typer.Option(
        "--save/--no-save", help="Save the profile for this endpoint.")] = True,
    pushdown: Annotated[str | None, typer.Option(
        metavar="URL", help="Also measure this pushdown server (http://host:port; token "
                            "from TESSERA_PUSHDOWN_TOKEN); its root must hold URL.")] = None,
    quiet: QuietOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Measure a store for the read planner and save the profile for its endpoint.

    Measures bandwidth at several concurrencies, the latency of one request, and the
    client's own work per read call and per tile. Writes and removes a scratch object and
    a scratch array below URL.

    **Examples**

    ```
    tessera store profile data/scratch --quick
    ```
    """
    from rich.progress import Progress

    from tessera.array.calibrate import measure_calls

    store = tessera.open_store(url, **options(endpoint, region, allow_http, option))
    with Progress(console=err, transient=True, disable=quiet or not err.is_terminal) as bar:
        task = bar.add_task("profiling", total=1.0)

        def step(name: str, done: float) -> None:
            bar.update(task, completed=done, description=name)

        prof = tessera.profile_store(store, pushdown=pushdown, quick=quick, save=save,
                                     progress=step, calls=measure_calls)
    grid = table("concurrent requests", "bandwidth", title=f"profile of {url}")
    for n, bw in prof.bandwidth:
        grid.add_row(str(n), f"{bw / 1e6:,.1f} MB/s")
    out.print(grid)
    out.print(f"request latency T_R {prof.request_latency_s * 1e3:.3f} ms, client "
              f"concurrency t {prof.concurrency}, peak range N {prof.n_min}-{prof.n_max}")
    out.print(f"client work per read call {prof.call_s * 1e3:.3f} ms, per tile "
              f"{prof.tile_s * 1e3:.3f} ms")
    if prof.now_request_s is not None:
        now = prof.calling_thread()
        out.print(f"small reads on the calling thread: {now.request_latency_s * 1e3:.3f} ms "
                  f"per request, {now.bw(1) / 1e9:,.1f} GB/s")
    if prof.has_pushdown:
        assert prof.pushdown_alpha_s_per_byte is not None and prof.pushdown_beta_s is not None
        out.print(f"pushdown T_lambda = {prof.pushdown_alpha_s_per_byte * 1e9:.3f} ns/byte x "
                  f"size + {prof.pushdown_beta_s * 1e3:.3f} ms")
    if save:
        out.print(f"[dim]saved for endpoint {endpoint_id(store)}[/]")
    if plot is not None:
        _plot_profile(prof, plot, url)
        out.print(f"[dim]wrote {plot}[/]")


def _plot_profile(prof: tessera.StoreProfile, path: Path, url: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TesseraError("--plot needs matplotlib: pip install 'tessera[bench]'") from None
    ns = [n for n, _ in prof.bandwidth]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(ns, [b / 1e6 for _, b in prof.bandwidth], marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent requests N")
    ax.set_ylabel("bandwidth BW(N), MB/s")
    ax.set_title(f"{url}: T_R {prof.request_latency_s * 1e3:.2f} ms")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


