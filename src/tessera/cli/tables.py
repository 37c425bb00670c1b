"""``tessera table ls|info|rm|optimize|vacuum``: the tensors of a tensor table
(docs/tables.md)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from tessera.cli.common import (
    AllowHttpOpt,
    App,
    AtOpt,
    EndpointOpt,
    JsonOpt,
    OptionOpt,
    RegionOpt,
    emit,
    options,
    out,
    table,
    url_arg,
)
from tessera.cli.data import print_doc
from tessera.describe import a_kind, table_doc
from tessera.errors import TableNotFoundError
from tessera.kinds import kind_at
from tessera.storage.blocking import open_store
from tessera.when import moment

app = App(help="Tensor tables: list, describe, remove and compact tensors.")
UrlArg = Annotated[str, url_arg("A tensor table.")]


def _open(url: str, at: str | None, mode: str, opts: dict[str, Any]) -> Any:
    from tessera.tables import TensorTable

    try:
        return TensorTable.open(url, mode, at=moment(at, "--at"), storage_options=opts)
    except TableNotFoundError:  # say what is there instead, in the command line's terms
        kind = kind_at(open_store(url, **opts))
        raise TableNotFoundError(f"{url} holds {a_kind(kind) if kind else 'no dataset'}, not "
                                 "a tensor table: `tessera info URL` describes any kind; "
                                 "`tessera import pt|safetensors FILE URL` makes a table"
                                 ) from None


@app.command("ls")
def ls(url: UrlArg,
       prefix: Annotated[str | None, typer.Option(
           metavar="TEXT", help="Only the ids that start with TEXT.")] = None,
       at: AtOpt = None, as_json: JsonOpt = False, endpoint: EndpointOpt = None,
       region: RegionOpt = None, allow_http: AllowHttpOpt = False,
       option: OptionOpt = None) -> None:
    """List the tensors of a table: id, format, shape, dtype and non-zeros.

    With `--json`, one JSON document per tensor per line: `{"id", "layout", "shape",
    "dtype", "nnz"}`.

    **Examples**

    ```
    tessera table ls data/tensors
    tessera table ls data/tensors --prefix run1/ --json
    ```
    """
    tt = _open(url, at, "r", options(endpoint, region, allow_http, option))
    rows = [(tensor_id, tt.header(tensor_id)) for tensor_id in tt.ids(prefix)]
    if as_json:
        for tensor_id, h in rows:
            emit({"id": tensor_id, "layout": h.layout, "shape": list(h.shape),
                  "dtype": h.dtype, "nnz": h.nnz})
        return
    grid = table("id", "format", "shape", "dtype", "non-zeros",
                 title=f"{url} (version {tt.version})")
    for tensor_id, h in rows:
        grid.add_row(tensor_id, h.layout, str(h.shape), h.dtype, f"{h.nnz:,}")
    out.print(grid)


@app.command("info")
def info(url: UrlArg,
         tensor_id: Annotated[str | None, typer.Argument(
             metavar="ID", show_default=False,
             help="A tensor's id (default: the table, as `tessera info URL`).")] = None,
         at: AtOpt = None, endpoint: EndpointOpt = None, region: RegionOpt = None,
         allow_http: AllowHttpOpt = False, option: OptionOpt = None) -> None:
    """Describe one tensor: its format, metadata and the plan of reading all of it.

    **Examples**

    ```
    tessera table info data/tensors weights
    ```
    """
    tt = _open(url, at, "r", options(endpoint, region, allow_http, option))
    if tensor_id is None:
        print_doc(table_doc(url, tt))
        return
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


@app.command("rm")
def rm(url: UrlArg,
       tensor_id: Annotated[str | None, typer.Argument(
           metavar="ID", show_default=False, help="The tensor.")] = None,
       prefix: Annotated[str | None, typer.Option(
           metavar="TEXT", help="Every tensor whose id starts with TEXT.")] = None,
       endpoint: EndpointOpt = None, region: RegionOpt = None,
       allow_http: AllowHttpOpt = False, option: OptionOpt = None) -> None:
    """Remove a tensor, or every tensor with a prefix, in one commit.

    Older versions still hold it (time travel) until `tessera table vacuum --delete`.
    (`tessera rm URL` removes the whole table.)

    **Examples**

    ```
    tessera table rm data/tensors run1/extra
    ```
    """
    tt = _open(url, None, "w", options(endpoint, region, allow_http, option))
    removed = tt.delete(tensor_id, prefix=prefix)
    out.print(f"removed {removed} tensor(s); table version {tt.version}")


@app.command("optimize")
def optimize(url: UrlArg, target_file_bytes: Annotated[int | None, typer.Option(
        metavar="BYTES", help="File size to compact towards (default "
                              "TESSERA_TABLES_TARGET_FILE_BYTES).")] = None,
        endpoint: EndpointOpt = None, region: RegionOpt = None,
        allow_http: AllowHttpOpt = False, option: OptionOpt = None) -> None:
    """Compact small data files into larger ones, in one commit.

    **Examples**

    ```
    tessera table optimize data/tensors
    ```
    """
    tt = _open(url, None, "w", options(endpoint, region, allow_http, option))
    metrics = tt.optimize(target_file_bytes)
    out.print(f"files added {metrics.get('numFilesAdded', '?')}, removed "
              f"{metrics.get('numFilesRemoved', '?')}; table version {tt.version}")


@app.command("vacuum")
def vacuum(url: UrlArg, retention_hours: Annotated[float, typer.Option(
        metavar="HOURS", help="Keep the files a version younger than this needs.")] = 168,
           dry_run: Annotated[bool, typer.Option(
               "--dry-run/--delete", help="List the files (default) or delete them.")] = True,
           force: Annotated[bool, typer.Option(
               "--force", help="Allow a retention under 168 hours (older versions become "
                               "unreadable).")] = False,
           endpoint: EndpointOpt = None, region: RegionOpt = None,
           allow_http: AllowHttpOpt = False, option: OptionOpt = None) -> None:
    """List, or delete, the data files no recent version needs.

    **Examples**

    ```
    tessera table vacuum data/tensors
    tessera table vacuum data/tensors --delete
    ```
    """
    tt = _open(url, None, "w" if not dry_run else "r",
               options(endpoint, region, allow_http, option))
    files = tt.vacuum(retention_hours, dry_run=dry_run, force=force)
    verb = "would delete" if dry_run else "deleted"
    out.print(f"{verb} {len(files)} file(s)")
    for name in files[:20]:
        out.print(f"  {name}")
