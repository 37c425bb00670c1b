"""``tessera tables``: list, describe, remove and maintain the tensors of a tensor table
(docs/tables.md); ``tessera info`` shows a table's summary through :func:`print_summary`.
"""

from __future__ import annotations

import collections
import json
from typing import Annotated, Any

import typer
from rich.table import Table

from tessera.cli.common import AllowHttpOpt, EndpointOpt, OptionOpt, RegionOpt, human, options, out

tables_app = typer.Typer(help="Tensor tables: tensors in a Delta Lake table (docs/tables.md).",
                         no_args_is_help=True)
UrlArg = Annotated[str, typer.Argument(help="A tensor table, e.g. s3://bucket/ds/tensors")]
VersionOpt = Annotated[int | None, typer.Option(help="Read the table as of this version.")]


def _open(url: str, version: int | None, mode: str, opts: dict[str, Any]) -> Any:
    from tessera.tables import TensorTable

    return TensorTable.open(url, mode, at=version, storage_options=opts)


def is_table(store: Any) -> bool:
    """Whether the store's root holds a Delta log (a tensor table, or another Delta table)."""
    return bool(store.list("_delta_log/"))


def print_summary(url: str, version: int | None, opts: dict[str, Any]) -> None:
    """A table's version, tensors per format and stored bytes."""
    tt = _open(url, version, "r", opts)
    counts: collections.Counter[str] = collections.Counter()
    for tensor_id in tt.ids():
        counts[tt.header(tensor_id).layout] += 1
    stats = tt.stats()
    out.print(f"[bold]{url}[/]  tensor table, version {stats.version}, {stats.tensors} "
              f"tensors, {stats.files} data files, {human(stats.stored_bytes)} stored "
              f"({human(stats.encoded_bytes)} before Parquet compression)")
    if counts:
        out.print("formats: " + ", ".join(f"{name} {n}" for name, n in sorted(counts.items())))


@tables_app.command("ls")
def ls(url: UrlArg, prefix: Annotated[str | None, typer.Option(help="Only ids starting so.")]
       = None, version: VersionOpt = None, endpoint: EndpointOpt = None,
       region: RegionOpt = None, allow_http: AllowHttpOpt = False,
       option: OptionOpt = None) -> None:
    """List the tensors: id, format, shape, dtype, non-zeros."""
    tt = _open(url, version, "r", options(endpoint, region, allow_http, option))
    table = Table("id", "format", "shape", "dtype", "non-zeros",
                  title=f"{url} (version {tt.version})", title_justify="left")
    for tensor_id in tt.ids(prefix):
        h = tt.header(tensor_id)
        table.add_row(tensor_id, h.layout, str(h.shape), h.dtype, f"{h.nnz:,}")
    out.print(table)


@tables_app.command("info")
def info(url: UrlArg, tensor_id: Annotated[str | None, typer.Argument(
        help="A tensor (default: the table's summary).")] = None,
         version: VersionOpt = None, endpoint: EndpointOpt = None, region: RegionOpt = None,
         allow_http: AllowHttpOpt = False, option: OptionOpt = None) -> None:
    """Describe the table, or one tensor (format fields, metadata, the read plan of all)."""
    opts = options(endpoint, region, allow_http, option)
    if tensor_id is None:
        print_summary(url, version, opts)
        return
    tt = _open(url, version, "r", opts)
    ref = tt[tensor_id]
    h = ref.header
    out.print(f"[bold]{tensor_id}[/]  {h.layout}, shape {h.shape}, {h.dtype}, "
              f"{h.nnz:,} non-zeros, written in {h.write_id}")
    fields = {"chunk_dim_count": h.chunk_dim_count, "flattened_shape": h.flattened_shape,
              "block_shape": h.block_shape, **h.params}
    out.print("format: " + ", ".join(f"{k} {v}" for k, v in fields.items() if v is not None))
    if h.metadata:
        out.print("metadata: " + json.dumps(h.metadata))
    out.print(ref.explain())


@tables_app.command("rm")
def rm(url: UrlArg, tensor_id: Annotated[str | None, typer.Argument(help="The tensor.")] = None,
       prefix: Annotated[str | None, typer.Option(help="Every tensor starting so.")] = None,
       endpoint: EndpointOpt = None, region: RegionOpt = None,
       allow_http: AllowHttpOpt = False, option: OptionOpt = None) -> None:
    """Remove a tensor (or every tensor with a prefix) in one commit."""
    tt = _open(url, None, "w", options(endpoint, region, allow_http, option))
    removed = tt.delete(tensor_id, prefix=prefix)
    out.print(f"removed {removed} tensor(s); table version {tt.version}")


@tables_app.command("optimize")
def optimize(url: UrlArg, target_file_bytes: Annotated[int | None, typer.Option(
        help="File size to compact towards (default TESSERA_TABLES_TARGET_FILE_BYTES).")]
        = None, endpoint: EndpointOpt = None, region: RegionOpt = None,
        allow_http: AllowHttpOpt = False, option: OptionOpt = None) -> None:
    """Compact small files into larger ones (one commit)."""
    tt = _open(url, None, "w", options(endpoint, region, allow_http, option))
    metrics = tt.optimize(target_file_bytes)
    out.print(f"files added {metrics.get('numFilesAdded', '?')}, removed "
              f"{metrics.get('numFilesRemoved', '?')}; table version {tt.version}")


@tables_app.command("vacuum")
def vacuum(url: UrlArg, retention_hours: Annotated[float, typer.Option(
        help="Keep files a version younger than this needs.")] = 168,
           dry_run: Annotated[bool, typer.Option(
               "--dry-run/--delete", help="List the files (default) or delete them.")] = True,
           force: Annotated[bool, typer.Option(
               help="Allow retention under 168 hours (older versions become unreadable).")]
           = False, endpoint: EndpointOpt = None, region: RegionOpt = None,
           allow_http: AllowHttpOpt = False, option: OptionOpt = None) -> None:
    """List (or delete) data files no recent version needs."""
    tt = _open(url, None, "w" if not dry_run else "r",
               options(endpoint, region, allow_http, option))
    files = tt.vacuum(retention_hours, dry_run=dry_run, force=force)
    verb = "would delete" if dry_run else "deleted"
    out.print(f"{verb} {len(files)} file(s)")
    for name in files[:20]:
        out.print(f"  {name}")
