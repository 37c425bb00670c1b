"""``tessera``: the command line.

Errors print one readable line (what failed, on which object, what to do) and exit with
status 1; usage errors exit with 2. Set ``TESSERA_DEBUG=1`` for full tracebacks.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import typer
from rich.table import Table

import tessera
from tessera.cli.common import (
    AllowHttpOpt,
    EndpointOpt,
    OptionOpt,
    RegionOpt,
    err,
    out,
)
from tessera.cli.common import human as _human
from tessera.cli.common import options as _options
from tessera.cli.data import JsonOpt, history
from tessera.cli.images import images_app, import_images_cmd
from tessera.cli.models import explain_split, models_app, profile_model
from tessera.cli.tables import (
    is_table,
    print_summary,
    tables_app,
)
from tessera.errors import DataNotFoundError, InvalidURLError, TesseraError
from tessera.format.codecs import codec_names
from tessera.format.parse import parse_selection
from tessera.kinds import kind_at
from tessera.query.profiler import endpoint_id
from tessera.storage.blocking import Store
from tessera.storage.store import ObjectInfo
from tessera.storage.url import StoreURL, parse_store_url
from tessera.when import moment

app = typer.Typer(
    name="tessera",
    help="Arrays, tensors and images in object storage, served region by region.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
def _version(value: bool) -> None:
    if value:
        out.print(f"tessera {tessera.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Tessera's command line."""
    if not out.is_terminal:  # piped or redirected: whole values, no cutting to a width
        out.width = 1 << 16


def _split_object_url(url: str) -> tuple[str, str]:
    """``s3://b/a/k`` -> (``s3://b``, ``a/k``); ``file:///d/k`` -> (``file:///d``, ``k``)."""
    parsed = parse_store_url(url)
    if parsed.scheme == "file":
        path = PurePosixPath(parsed.path)
        if str(path) == "/":
            raise InvalidURLError(f"{url!r} names a folder, not an object")
        return str(StoreURL("file", path=str(path.parent))), path.name
    if not parsed.prefix:
        raise InvalidURLError(f"{url!r} names a bucket, not an object: add the key")
    return str(StoreURL(parsed.scheme, bucket=parsed.bucket)), parsed.prefix


def _object_rows(table: Table, objects: list[ObjectInfo]) -> None:
    for o in objects:
        table.add_row(o.key, _human(o.size), o.last_modified.strftime("%Y-%m-%d %H:%M:%S"))


@app.command("ls")
def ls(
    url: Annotated[str, typer.Argument(help="Store URL: s3://bucket/prefix, file:///dir, ...")],
    recursive: Annotated[bool, typer.Option(
        "--recursive", "-r", help="List every object below, not one level.")] = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the objects and folders below a store URL, saying which folders hold an
    array, a tensor table, an image set or a tessera.h5 file.

    With --json: one JSON document per line, {"key", "size", "modified"} for an object
    and {"key", "kind"} for a folder (kind null for a plain one).

    Examples:
        tessera ls file:///data
        tessera ls s3://bucket/ds -r --json
    """
    opts = _options(endpoint, region, allow_http, option)
    store = tessera.open_store(url, **opts)
    folders: list[tuple[str, str | None]] = []
    if recursive:
        objects = store.list()
    else:
        level = store.list_dir()
        objects = level.objects
        folders = [(p, kind_at(tessera.open_store(f"{url.rstrip('/')}/{p}", **opts)))
                   for p in level.prefixes]
    if not objects and not folders:
        raise DataNotFoundError(f"nothing at {url}: no object and no folder below it")
    if as_json:
        for key, kind in folders:
            typer.echo(json.dumps({"key": f"{key}/", "kind": kind}))
        for o in objects:
            typer.echo(json.dumps({"key": o.key, "size": o.size,
                                   "modified": o.last_modified.isoformat()}))
        return
    table = Table("key", "size", "modified (UTC)", box=None, pad_edge=False)
    for key, kind in folders:
        table.add_row(f"[bold blue]{key}/[/]", f"[green]{kind}[/]" if kind else "", "")
    _object_rows(table, objects)
    out.print(table)
    total = sum(o.size for o in objects)
    out.print(f"[dim]{len(objects)} objects, {_human(total)}[/]")


@app.command("stat")
def stat(
    url: Annotated[str, typer.Argument(help="URL of one object, e.g. s3://bucket/path/key")],
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Show an object's size, modification time and ETag."""
    root, key = _split_object_url(url)
    store: Store = tessera.open_store(root, **_options(endpoint, region, allow_http, option))
    info = store.head(key)
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_row("url", url)
    table.add_row("size", f"{info.size} bytes ({_human(info.size)})")
    table.add_row("modified", info.last_modified.isoformat())
    table.add_row("etag", info.etag or "-")
    if info.version:
        table.add_row("version", info.version)
    out.print(table)


@app.command("info")
def info(
    uri: Annotated[str, typer.Argument(help="Array URI, e.g. s3://bucket/arrays/images")],
    at: Annotated[str | None, typer.Option(
        "--at", "--timestamp",
        help="Show the array as it was then: a date and time (2026-11-27T17:49:49, UTC "
             "unless a zone is given) or a commit time in ns since the epoch.")] = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Print an array's schema, its metadata and its fragments (or a tensor table's
    summary)."""
    opts = _options(endpoint, region, allow_http, option)
    if at is None and is_table(tessera.open_store(uri, **opts)):
        print_summary(uri, None, opts)
        return
    arr = tessera.open_array(uri, at=moment(at, "--at"), storage_options=opts)
    schema = arr.schema
    kind = "sparse" if schema.sparse else "dense"
    out.print(f"[bold]{uri}[/]  {kind}, cell order {schema.cell_order}, tile order "
              f"{schema.tile_order}" + (f", capacity {schema.capacity}" if schema.sparse else ""))
    dims = Table("dimension", "domain", "tile", title="dimensions", title_justify="left")
    for d in schema.dims:
        dims.add_row(d.name, f"[{d.domain[0]}, {d.domain[1]}]", str(d.tile or "whole"))
    out.print(dims)
    if schema.maxshape is not None:
        limits = ", ".join("unbounded" if m is None else str(m) for m in schema.maxshape)
        out.print(f"shape {arr.shape}, may grow to ({limits})")
    attrs = Table("attribute", "dtype", "fill", "codec", title="attributes",
                  title_justify="left")
    for a in schema.attrs:
        attrs.add_row(a.name, str(a.dtype), str(a.fill_value), a.codec or "none (raw)")
    out.print(attrs)
    metadata = arr.metadata.to_dict()
    if metadata:
        meta = Table("key", "value", title="metadata", title_justify="left")
        for key, value in metadata.items():
            text = json.dumps(value)
            meta.add_row(key, text if len(text) <= 80 else text[:77] + "...")
        out.print(meta)
    frags = Table(title="fragments", title_justify="left")
    frags.add_column("#")
    frags.add_column("name", no_wrap=True)
    frags.add_column("committed (UTC)", no_wrap=True)
    for col in ("kind", "non-empty domain", "cells", "size"):
        frags.add_column(col)
    total = 0
    fragments = arr.fragments
    for i, f in enumerate(fragments):
        when = _dt.datetime.fromtimestamp(f.timestamp / 1e9, _dt.UTC)
        domain = " x ".join(f"[{lo}, {hi}]" for lo, hi in f.nonempty_domain)
        frags.add_row(str(i), f.name, when.strftime("%Y-%m-%d %H:%M:%S"), f.kind, domain,
                      str(f.cell_count), _human(f.nbytes))
        total += f.nbytes
    out.print(frags)
    count = len(fragments)
    out.print(f"[dim]{count} fragment{'' if count == 1 else 's'}, {_human(total)}[/]")


@app.command("profile")
def profile(
    url: Annotated[str, typer.Argument(help="Store URL to measure, e.g. s3://bucket/scratch")],
    quick: Annotated[bool, typer.Option(help="A few seconds instead of a minute or so.")] = False,
    plot: Annotated[Path | None, typer.Option(
        help="Also draw bandwidth against concurrent requests into this PNG.")] = None,
    save: Annotated[bool, typer.Option(help="Save the profile for this endpoint.")] = True,
    pushdown: Annotated[str | None, typer.Option(
        help="Also measure this pushdown server (http://host:port; token from "
             "TESSERA_PUSHDOWN_TOKEN); its root must hold URL.")] = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Measure a store (bandwidth at several concurrencies, per-request latency, the
    client's own work per read call and per tile) for the read planner, and save the
    profile for its endpoint. Writes and removes a scratch object and a scratch array
    below URL."""
    from rich.progress import Progress

    from tessera.array.calibrate import measure_calls

    with Progress(console=err, transient=True) as bar:
        task = bar.add_task("profiling", total=1.0)

        def step(name: str, done: float) -> None:
            bar.update(task, completed=done, description=name)

        store = tessera.open_store(url, **_options(endpoint, region, allow_http, option))
        prof = tessera.profile_store(store, pushdown=pushdown, quick=quick, save=save,
                                     progress=step, calls=measure_calls)
    table = Table("concurrent requests", "bandwidth", title=f"profile of {url}",
                  title_justify="left")
    for n, bw in prof.bandwidth:
        table.add_row(str(n), f"{bw / 1e6:,.1f} MB/s")
    out.print(table)
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


@app.command("explain")
def explain(
    uri: Annotated[str, typer.Argument(help="Array URI, e.g. s3://bucket/arrays/images")],
    selection: Annotated[str, typer.Argument(
        help='Selection as numpy writes it, e.g. "[100:182, :]" or "5, ::2"')] = "...",
    method: Annotated[str | None, typer.Option(
        help="auto, get, merge, fetch or pushdown (default: TESSERA_PLANNER_METHOD or "
             "auto).")] = None,
    phi: Annotated[float | None, typer.Option(
        help="Seconds a read may take longer to save one dollar.")] = None,
    attr: Annotated[list[str] | None, typer.Option(
        help="Plan these attributes only (repeatable).")] = None,
    pushdown: Annotated[str | None, typer.Option(
        help="Let pushdown to this server compete (http://host:port).")] = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Print the plan a read would follow: per tile the method, requests and bytes, and the
    estimated seconds and dollars. Reads no data."""
    arr = tessera.open_array(uri, storage_options=_options(endpoint, region, allow_http,
                                                           option), pushdown=pushdown)
    plan = arr.explain(parse_selection(selection), attrs=attr, method=method, phi=phi)
    out.print(plan.table())


@app.command("serve")
def serve(
    root_url: Annotated[str, typer.Argument(help="Store URL whose objects the server may "
                                                 "read, e.g. s3://bucket")],
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8700,
    token_file: Annotated[Path | None, typer.Option(
        help="File holding the bearer token clients must send (at least 16 characters).",
    )] = None,
    insecure_no_auth: Annotated[bool, typer.Option(
        "--insecure-no-auth", help="Run without a token (loopback only).")] = False,
    max_concurrency: Annotated[int | None, typer.Option(
        help="Read requests served at once (default 8, TESSERA_SERVER_MAX_CONCURRENCY).",
    )] = None,
    queue: Annotated[int | None, typer.Option(
        help="Requests that may wait for a slot before 503 (default 32).")] = None,
    cache_bytes: Annotated[int | None, typer.Option(
        help="Memory for decoded tiles kept between requests (default 256 MiB).")] = None,
    request_timeout: Annotated[float | None, typer.Option(
        help="Seconds one request may take once its body arrived, before 504 (default 30).")]
    = None,
    body_timeout: Annotated[float | None, typer.Option(
        help="Seconds a client has to send a request's headers and then its whole body; a "
             "slower one gets 408 and its connection is closed (default 10).")] = None,
    max_connections: Annotated[int | None, typer.Option(
        help="Open connections kept at once; more are answered 503 and closed (default "
             "1024).")] = None,
    max_connections_per_client: Annotated[int | None, typer.Option(
        help="Open connections from one client address (default 128; 0: no limit, e.g. "
             "behind a load balancer).")] = None,
    models: Annotated[Path | None, typer.Option(
        help="Models folder (models.json + weights, see `tessera models`): serve "
             "POST /v1/infer with them.")] = None,
    infer_concurrency: Annotated[int | None, typer.Option(
        help="Infer requests computing at once (default 4).")] = None,
    infer_queue: Annotated[int | None, typer.Option(
        help="Infer requests that may wait for a compute slot before 503 (default 16).")]
    = None,
    infer_threads: Annotated[int | None, typer.Option(
        help="Torch threads of the server's forward passes (default 1).")] = None,
    infer_memory: Annotated[int | None, typer.Option(
        help="Activation bytes one infer request may use (default 2 GiB).")] = None,
    model_cache_bytes: Annotated[int | None, typer.Option(
        help="Loaded model prefixes kept between requests (default 1 GiB; 0: load per "
             "request).")] = None,
    cos_batch: Annotated[int | None, typer.Option(
        help="The server's batch inside an infer request (default 16).")] = None,
    max_infer_samples: Annotated[int | None, typer.Option(
        help="Samples in one infer request (default 512).")] = None,
    workers: Annotated[int, typer.Option(
        help="Server processes behind the port (each with its own cache and limits).")] = 1,
    emulate_compute: Annotated[Path | None, typer.Option(
        hidden=True, help="Testing only: sleep the per-layer seconds of this JSON file "
                          "instead of computing.")] = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Serve pushdown reads beside the store: clients send tile reads, the server reads,
    verifies, decodes and slices the tiles and returns only the selected cells; with
    --models, also the frozen layers of registered models on samples (POST /v1/infer). Logs
    are JSON lines on stderr; SIGINT or SIGTERM stop it after requests in flight finish."""
    from tessera.config import ServerConfig
    from tessera.server.serve import serve as run_server

    config = ServerConfig.from_env(
        max_concurrency=max_concurrency, queue=queue, cache_bytes=cache_bytes,
        request_timeout_s=request_timeout, body_timeout_s=body_timeout,
        max_connections=max_connections,
        max_connections_per_client=max_connections_per_client,
        models_dir=str(models) if models else None,
        infer_concurrency=infer_concurrency, infer_queue=infer_queue,
        infer_threads=infer_threads, infer_memory_bytes=infer_memory,
        model_cache_bytes=model_cache_bytes, cos_batch=cos_batch,
        max_infer_samples=max_infer_samples,
        emulate_compute=str(emulate_compute) if emulate_compute else None)
    run_server(root_url, host=host, port=port, token_file=token_file,
               insecure_no_auth=insecure_no_auth, config=config,
               storage_options=_options(endpoint, region, allow_http, option), workers=workers)


def _run_import(kind: str, run: Any) -> None:
    """Run an importer with a progress bar per dataset, then print what it did."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    tasks: dict[str, Any] = {}
    with Progress(TextColumn("{task.description:<30}"), BarColumn(), DownloadColumn(),
                  TimeElapsedColumn(), console=err) as bar:
        def progress(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(label[-30:], total=total)
            bar.update(tasks[label], completed=done)

        report = run(progress)
    out.print(f"{kind}: imported {len(report.imported)} dataset(s), "
              f"{_human(report.nbytes)}")
    for name, why in report.skipped:
        out.print(f"  skipped {name}: {why}")
    for name, note in report.notes:
        out.print(f"  note {name}: {note}")


@app.command("import-npy")
def import_npy(
    source: Annotated[Path, typer.Argument(help="A .npy file (one array) or .npz file.")],
    uri: Annotated[str, typer.Argument(help="Target URI (must not exist yet).")],
    tile: Annotated[str | None, typer.Option(
        help="Tile extents, comma-separated (default: about 1 MiB tiles).")] = None,
    codec: Annotated[str | None, typer.Option(
        help=f"{', '.join(codec_names())} (optionally :LEVEL); default none.")] = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Import a .npy file as one array (or a .npz file as a tessera.h5 file), copied in
    slabs so memory stays bounded."""
    from tessera.importers import import_npy as run

    extents = tuple(int(t) for t in tile.split(",")) if tile else None
    opts = _options(endpoint, region, allow_http, option)
    _run_import("import-npy", lambda p: run(source, uri, tile=extents, codec=codec,
                                            storage_options=opts, progress=p))


@app.command("import-hdf5")
def import_hdf5(
    source: Annotated[Path, typer.Argument(help="An HDF5 file.")],
    uri: Annotated[str, typer.Argument(help="Target URI (must not exist yet).")],
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Import every dataset of an HDF5 file (chunk shapes, gzip compression, attributes
    and groups kept) as a tessera.h5 file."""
    from tessera.importers import import_hdf5 as run

    opts = _options(endpoint, region, allow_http, option)
    _run_import("import-hdf5", lambda p: run(source, uri, storage_options=opts, progress=p))


@app.command("import-zarr")
def import_zarr(
    source: Annotated[str, typer.Argument(help="A zarr array or group (path or URL).")],
    uri: Annotated[str, typer.Argument(help="Target URI (must not exist yet).")],
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Import a zarr array or group (chunk shapes, zstd/gzip/blosc/lz4 compression,
    attributes and groups kept) as a tessera.h5 file."""
    from tessera.importers import import_zarr as run

    opts = _options(endpoint, region, allow_http, option)
    _run_import("import-zarr", lambda p: run(source, uri, storage_options=opts, progress=p))


@app.command("import-pt")
def import_pt_cmd(
    source: Annotated[Path, typer.Argument(help="A torch.save file: a tensor or a dict of them.")],
    url: Annotated[str, typer.Argument(help="The tensor table (made if missing).")],
    tensor_id: Annotated[str | None, typer.Option(
        "--id", help="The tensor's id (a dict's tensors go below it as ID/name).")] = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Import the tensors of a .pt file into a tensor table (one commit), loaded with
    weights_only=True so no pickled code runs."""
    from tessera.importers.tensors import import_pt

    ids = import_pt(source, url, tensor_id, _options(endpoint, region, allow_http,
                                                     option)).imported
    out.print(f"import-pt: {len(ids)} tensor(s) -> {url}: {', '.join(ids[:5])}"
              + (" ..." if len(ids) > 5 else ""))


@app.command("import-safetensors")
def import_safetensors_cmd(
    source: Annotated[Path, typer.Argument(help="A .safetensors file.")],
    url: Annotated[str, typer.Argument(help="The tensor table (made if missing).")],
    prefix: Annotated[str | None, typer.Option(
        "--id", help="Put the tensors below this id (ID/name).")] = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Import the tensors of a safetensors file into a tensor table (one commit; the file's
    metadata goes with each tensor)."""
    from tessera.importers.tensors import import_safetensors

    ids = import_safetensors(source, url, prefix, _options(endpoint, region, allow_http,
                                                           option)).imported
    out.print(f"import-safetensors: {len(ids)} tensor(s) -> {url}: {', '.join(ids[:5])}"
              + (" ..." if len(ids) > 5 else ""))


app.command("history")(history)
app.add_typer(tables_app, name="tables")
app.add_typer(models_app, name="models")
app.command("profile-model")(profile_model)
app.command("explain-split")(explain_split)
app.add_typer(images_app, name="images")
app.command("import-images")(import_images_cmd)


def _debug() -> bool:
    """``TESSERA_DEBUG`` set to a true value (an unparsable one counts as set)."""
    from tessera.config import ProcessConfig
    from tessera.errors import ConfigError

    try:
        return ProcessConfig.from_env().debug
    except ConfigError:
        return True


def main() -> None:
    """Entry point of the ``tessera`` script."""
    try:
        app()
    except TesseraError as exc:
        if _debug():
            raise
        err.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        err.print("[bold red]interrupted[/]")
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
