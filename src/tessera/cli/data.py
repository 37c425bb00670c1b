"""Commands for anything at a URL, whatever its kind: ``tessera ls``, ``info``, ``history``
and ``cat``.

Output follows one rule: a table for people in a terminal; whole values without colour
when the output is piped or redirected; JSON with ``--json`` (one document, or one per line
for listings; the schemas are in docs/cli.md).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import tessera
from tessera.cli.common import (
    AllowHttpOpt,
    App,
    AtOpt,
    EndpointOpt,
    JsonOpt,
    OptionOpt,
    RegionOpt,
    as_numpy,
    emit,
    human,
    object_url,
    options,
    out,
    table,
    url_arg,
)
from tessera.describe import a_kind, describe
from tessera.errors import BeforeFirstCommitError, DataNotFoundError, InvalidArgumentError
from tessera.format.parse import parse_selection
from tessera.integrations.h5 import File
from tessera.kinds import kind_at, opened
from tessera.storage.url import parse_store_url
from tessera.when import moment

if TYPE_CHECKING:
    pass

app = App()


@app.command("ls")
def ls(
    url: Annotated[str, url_arg("A folder or prefix: `data`, `s3://bucket/ds`, ...")],
    recursive: Annotated[bool, typer.Option(
        "--recursive", "-r", help="List every object below, not one level.")] = False,
    as_json: JsonOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """List what is below a URL, naming each folder's kind.

    A folder holding an array, a tensor table, an image set or a tessera.h5 file says
    so. With `--json`, one JSON document per line: `{"key", "kind"}` for a folder (kind
    null for a plain one) and `{"key", "size", "modified"}` for an object.

    **Examples**

    ```
    tessera ls data
    tessera ls data/frames -r --json
    ```
    """
    opts = options(endpoint, region, allow_http, option)
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
            emit({"key": f"{key}/", "kind": kind})
        for o in objects:
            emit({"key": o.key, "size": o.size, "modified": o.last_modified.isoformat()})
        return
    grid = table("key", "size", "modified (UTC)")
    for key, kind in folders:
        grid.add_row(f"[bold blue]{key}/[/]", f"[green]{kind}[/]" if kind else "", "")
    for o in objects:
        grid.add_row(o.key, human(o.size), o.last_modified.strftime("%Y-%m-%d %H:%M:%S"))
    out.print(grid)
    total = sum(o.size for o in objects)
    out.print(f"[dim]{len(objects)} objects, {human(total)}[/]")


@app.command("info")
def info(
    url: Annotated[str, url_arg("An array, tensor table, image set or tessera.h5 file.")],
    at: AtOpt = None,
    as_json: JsonOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
    timestamp: Annotated[str | None, typer.Option(
        "--timestamp", hidden=True, help="The older name of --at.")] = None,
) -> None:
    """Describe what is at a URL, whatever its kind.

    An array: its dimensions, attributes, metadata and fragments. A tensor table: its
    version, tensors and stored bytes. An image set: its format and stored bytes per
    quality level k. A tessera.h5 file: its datasets. With `--json`, one JSON document
    (its fields are listed in docs/cli.md).

    **Examples**

    ```
    tessera info data/frames
    tessera info data/photos --json
    tessera info data/tensors --at 0 --json
    ```
    """
    kind, found = open_any(url, options(endpoint, region, allow_http, option),
                           at or timestamp)
    doc = describe(url, kind, found)
    if as_json:
        emit(doc)
    else:
        print_doc(doc)


def open_any(url: str, opts: dict[str, Any], at: str | None) -> tuple[str, Any]:
    """The kind at ``url`` and what ``tessera.open`` opens there, with its errors in the
    command line's terms."""
    try:
        return opened(url, storage_options=opts, at=moment(at, "--at"))
    except DataNotFoundError:
        raise DataNotFoundError(f"{url} holds no array, tensor table, image set or "
                                f"tessera.h5 file: see what is there with `tessera ls {url}`, "
                                "bring data in with `tessera import`") from None
    except BeforeFirstCommitError as exc:
        first = exc.first_commit.isoformat() if exc.first_commit else "its first commit"
        raise BeforeFirstCommitError(f"{url} did not exist yet at --at {at}: its first commit "
                                     f"was at {first}", exc.first_commit) from None


def print_doc(doc: dict[str, Any]) -> None:
    """An ``info`` document for people."""
    kind = doc["kind"]
    if kind == "array":
        _print_array(doc)
    elif kind == "tensor table":
        out.print(f"[bold]{doc['url']}[/]  tensor table, version {doc['version']}, "
                  f"{doc['tensors']} tensors, {doc['files']} data files, "
                  f"{human(doc['stored_bytes'])} stored ({human(doc['encoded_bytes'])} before "
                  "Parquet compression)")
        if doc["layouts"]:
            out.print("formats: " + ", ".join(f"{k} {n}" for k, n in doc["layouts"].items()))
    elif kind == "image set":
        h, w = doc["size"]
        out.print(f"[bold]{doc['url']}[/]  image set, {doc['images']} images of {h}x{w}, "
                  f"{doc['colour']}, {doc['block']}x{doc['block']} blocks, q = {doc['q']}, "
                  f"groups of {doc['group']}, {doc['codec']}")
        out.print("stored bytes per image, by quality level k:")
        grid = table("k", "bytes per image")
        for k, nbytes in enumerate(doc["bytes_per_image_by_k"], start=1):
            if k in (1, 2, 4, 8, 16, 32) or k == doc["k_max"]:
                grid.add_row(str(k), f"{nbytes:,}")
        out.print(grid)
        out.print("[dim]PSNR per k: tessera images info URL[/]")
    else:
        grid = table("dataset", "shape", "dtype", title=f"{doc['url']}  tessera.h5 file")
        for d in doc["datasets"]:
            grid.add_row(d["name"], str(tuple(d["shape"])), d["dtype"])
        out.print(grid)


def _print_array(doc: dict[str, Any]) -> None:
    sparse = doc["sparse"]
    out.print(f"[bold]{doc['url']}[/]  {'sparse' if sparse else 'dense'} array, shape "
              f"{tuple(doc['shape'])}, cell order {doc['cell_order']}, tile order "
              f"{doc['tile_order']}")
    dims = table("dimension", "domain", "tile", title="dimensions")
    for d in doc["dims"]:
        dims.add_row(d["name"], f"[{d['domain'][0]}, {d['domain'][1]}]", str(d["tile"] or
                                                                             "whole"))
    out.print(dims)
    if doc["maxshape"] is not None:
        limits = ", ".join("unbounded" if m is None else str(m) for m in doc["maxshape"])
        out.print(f"may grow to ({limits})")
    attrs = table("attribute", "dtype", "fill", "codec", title="attributes")
    for a in doc["attrs"]:
        attrs.add_row(a["name"], a["dtype"], str(a["fill"]), a["codec"] or "none (raw)")
    out.print(attrs)
    if doc["metadata"]:
        meta = table("key", "value", title="metadata")
        for key, value in doc["metadata"].items():
            meta.add_row(key, json.dumps(value))
        out.print(meta)
    frags = table("#", "name", "committed (UTC)", "kind", "non-empty domain", "cells", "size",
                  title="fragments")
    for i, f in enumerate(doc["fragments"]):
        domain = " x ".join(f"[{lo}, {hi}]" for lo, hi in f["nonempty_domain"])
        frags.add_row(str(i), f["name"], f["committed"][:19].replace("T", " "), f["kind"],
                      domain, str(f["cells"]), human(f["nbytes"]))
    out.print(frags)
    count, total = len(doc["fragments"]), sum(f["nbytes"] for f in doc["fragments"])
    out.print(f"[dim]{count} fragment{'' if count == 1 else 's'}, {human(total)}[/]")


@app.command("history")
def history(
    url: Annotated[str, url_arg("An array, tensor table or image set.")],
    at: Annotated[str | None, typer.Option(
        "--at", metavar="WHEN", help="Only the commits up to then: a date and time (UTC "
                                     "unless a zone is given), a table version or a commit "
                                     "time in ns.")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="One JSON document per line instead of a table.")] = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """List the commits of an array, tensor table or image set.

    Each commit shows when it happened, its marker (what `--at` takes to open that point: a
    commit time in ns, or a table version), its operation, what it added and removed, and
    the bytes it stored.

    **Examples**

    ```
    tessera history data/frames
    tessera history data/tensors --json
    ```
    """
    _, found = open_any(url, options(endpoint, region, allow_http, option), at)
    if isinstance(found, File):
        raise InvalidArgumentError(f"{url} is a tessera.h5 file, which has no history of its "
                                   "own: run `tessera history` on its datasets' arrays")
    commits = found.history()
    if as_json:
        for commit in commits:
            emit(commit.to_dict())
        return
    grid = table("when (UTC)", "marker", "operation", "added", "removed", "bytes")
    for c in commits:
        grid.add_row(c.when.strftime("%Y-%m-%d %H:%M:%S.%f"), str(c.marker), c.operation,
                     f"{c.added} {c.unit}", str(c.removed), human(c.nbytes))
    out.print(grid)
    out.print(f"[dim]{len(commits)} commit{'' if len(commits) == 1 else 's'}[/]")


@app.command("cat")
def cat(
    url: Annotated[str, url_arg("An object, an array or a tensor table.")],
    selection: Annotated[str | None, typer.Argument(
        metavar="SELECTION", show_default=False,
        help='A slice as numpy writes it, e.g. "0:10, :" (default: everything).')] = None,
    tensor: Annotated[str | None, typer.Option(
        "--tensor", metavar="ID", help="The tensor to write (a tensor table).")] = None,
    at: AtOpt = None,
    output: Annotated[str | None, typer.Option(
        "--output", "-O", metavar="FILE",
        help="Write to FILE instead of standard output.")] = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Write an object, or a slice of an array as .npy, to stdout.

    An array (or a table's tensor with `--tensor`) is written as a .npy file that
    `numpy.load` reads (a sparse array's cells as rows: `d0`, `d1`, ..., then the
    attributes); anything else at the URL is taken as one object and written as
    it is stored. Binary output is not written to a terminal: redirect it or use
    `--output`.

    **Examples**

    ```
    tessera cat data/frames "0:2, 0:4" > part.npy
    tessera cat data/tensors --tensor weights --output weights.npy
    tessera cat data/frames/__schema.json
    ```
    """
    opts = options(endpoint, region, allow_http, option)
    parsed = parse_store_url(url)
    single = parsed.scheme == "file" and Path(parsed.path).is_file()
    kind = None if single else kind_at(tessera.open_store(url, **opts))
    if kind == "array" or (kind == "tensor table" and tensor is not None):
        data = _npy(url, kind, selection, tensor, moment(at, "--at"), opts)
    elif kind is not None:
        raise InvalidArgumentError(f"{url} is {a_kind(kind)}: `tessera cat` writes an array, "
                                   "a table's tensor (--tensor ID) or one object")
    else:
        if selection is not None or tensor is not None:
            raise InvalidArgumentError(f"{url} is not an array or a tensor table, so "
                                       "SELECTION and --tensor do not apply")
        data = bytes(_object(url, opts))
    _write(data, output)


def _npy(url: str, kind: str, selection: str | None, tensor: str | None, at: Any,
         opts: dict[str, Any]) -> bytes:
    import numpy as np

    key = parse_selection(selection) if selection is not None else ...
    if kind == "array":
        values = as_numpy(tessera.open_array(url, storage_options=opts, at=at)[key])
    else:
        assert tensor is not None  # a table is written only with --tensor
        values = tessera.open_table(url, storage_options=opts, at=at)[tensor][key]
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(values), allow_pickle=False)
    return buffer.getvalue()


def _object(url: str, opts: dict[str, Any]) -> Any:
    """The bytes of the one object at ``url``."""
    root, key = object_url(url)
    return tessera.open_store(root, **opts).get(key)


def _write(data: bytes, output: str | None) -> None:
    if output is not None:
        with open(output, "wb") as f:
            f.write(data)
        return
    if sys.stdout.isatty() and not _text(data):
        raise InvalidArgumentError("binary output is not written to a terminal: redirect it "
                                   "(> file.npy) or pass --output FILE")
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _text(data: bytes) -> bool:
    """Whether ``data`` reads as UTF-8 text."""
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return b"\x00" not in data
