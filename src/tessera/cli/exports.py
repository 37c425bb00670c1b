"""``tessera export npy|safetensors|images``: write what Tessera stores as files other tools
read (numpy, safetensors, image viewers), with a progress bar on a terminal."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

import tessera
from tessera.cli.common import (
    AllowHttpOpt,
    App,
    AtOpt,
    EndpointOpt,
    OptionOpt,
    QuietOpt,
    RegionOpt,
    as_numpy,
    human,
    options,
    out,
    progress,
    url_arg,
)
from tessera.errors import InvalidArgumentError
from tessera.format.parse import parse_selection
from tessera.when import moment

app = App(help="Export arrays, tensors and image sets as files.")

#: Bytes of one slab of a whole-array export (memory stays near this).
SLAB_BYTES = 64 << 20


def _target(path: Path, force: bool) -> None:
    if path.exists() and not force:
        raise InvalidArgumentError(f"{path} exists: pass --force to replace it")


ForceOpt = Annotated[bool, typer.Option("--force", help="Replace FILE if it exists.")]


@app.command("npy")
def npy(
    url: Annotated[str, url_arg("An array.")],
    path: Annotated[Path, typer.Argument(metavar="FILE", show_default=False,
                                         help="The .npy file to write.")],
    selection: Annotated[str | None, typer.Argument(
        metavar="SELECTION", show_default=False,
        help='A slice as numpy writes it, e.g. "0:10, :" (default: everything).')] = None,
    attr: Annotated[str | None, typer.Option(
        metavar="NAME", help="The attribute (needed when the array has several).")] = None,
    at: AtOpt = None,
    force: ForceOpt = False,
    quiet: QuietOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Write an array, or a slice of it, as a .npy file that `numpy.load` reads.

    A whole dense array is read in slabs of whole tiles along its first dimension and
    written into the file as they come, so memory stays near one slab (64 MiB). A sparse
    array's cells are written as rows: one field per dimension (`d0`, `d1`, ...), then the
    attribute.

    **Examples**

    ```
    tessera export npy data/frames frames-copy.npy
    tessera export npy data/frames part.npy "0:2, :" --force
    ```
    """
    _target(path, force)
    partial = path.parent / f".{path.name}.partial"  # FILE appears whole, or not at all
    try:
        shape, dtype = _write_npy(url, partial, selection, attr, at, quiet,
                                  options(endpoint, region, allow_http, option))
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    out.print(f"wrote {path}: {shape} {dtype} ({human(path.stat().st_size)})")


def _write_npy(url: str, path: Path, selection: str | None, attr: str | None,
               at: str | None, quiet: bool, opts: dict[str, Any],
               ) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """Write ``path``; its shape and dtype."""
    arr = tessera.open_array(url, storage_options=opts, at=moment(at, "--at"))
    names = [a.name for a in arr.schema.attrs]
    if attr is None and len(names) > 1:
        raise InvalidArgumentError(f"{url} has attributes {names}: pick one with --attr")
    attrs = [attr or names[0]]

    def read(sel: Any) -> np.ndarray:
        return np.asarray(as_numpy(arr.read(sel, attrs=attrs), attrs[0]))

    if selection is not None or arr.schema.sparse:  # a sparse array: its cells, as rows
        values = read(... if selection is None else parse_selection(selection))
        with path.open("wb") as f:
            np.save(f, values, allow_pickle=False)
        return values.shape, values.dtype
    dtype = np.dtype(arr.schema.attr(attrs[0]).dtype)
    shape = arr.shape
    target = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    if not shape or not shape[0]:
        target[...] = read(...)
    else:
        tile = arr.schema.dims[0].tile or shape[0]
        row = dtype.itemsize * math.prod(shape[1:])
        step = max(1, SLAB_BYTES // max(1, row * tile)) * tile
        total = row * shape[0]
        with progress("exporting", quiet=quiet, nbytes=True) as step_done:
            for lo in range(0, shape[0], step):
                hi = min(shape[0], lo + step)
                target[lo:hi] = read((slice(lo, hi),))
                step_done(row * hi, total)
    target.flush()
    del target
    return shape, dtype


@app.command("safetensors")
def safetensors(
    url: Annotated[str, url_arg("A tensor table.")],
    path: Annotated[Path, typer.Argument(metavar="FILE", show_default=False,
                                         help="The .safetensors file to write.")],
    prefix: Annotated[str | None, typer.Option(
        metavar="TEXT", help="Only the tensors whose id starts with TEXT (the rest of the "
                             "id names them in the file).")] = None,
    at: AtOpt = None,
    force: ForceOpt = False,
    quiet: QuietOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Write the tensors of a table as one safetensors file.

    Sparse tensors are written dense. Every tensor is held in memory until the file is
    written (the safetensors format writes its header first).

    **Examples**

    ```
    tessera export safetensors data/tensors weights.safetensors
    tessera export safetensors data/tensors run1.safetensors --prefix run1/
    ```
    """
    from safetensors.numpy import save_file

    _target(path, force)
    tt = tessera.open_table(url, storage_options=options(endpoint, region, allow_http,
                                                         option), at=moment(at, "--at"))
    ids = list(tt.ids(prefix))
    if not ids:
        raise InvalidArgumentError(f"no tensor of {url} starts with {prefix!r}" if prefix
                                   else f"{url} holds no tensor")
    tensors: dict[str, np.ndarray] = {}
    with progress("exporting", quiet=quiet) as step:
        for i, tensor_id in enumerate(ids, start=1):
            name = tensor_id[len(prefix):] if prefix else tensor_id
            tensors[name] = np.ascontiguousarray(tt[tensor_id][...])
            step(i, len(ids))
    save_file(tensors, str(path), metadata={"source": url, "version": str(tt.version)})
    out.print(f"wrote {path}: {len(tensors)} tensor(s) ({human(path.stat().st_size)})")


@app.command("images")
def images(
    url: Annotated[str, url_arg("An image set.")],
    folder: Annotated[Path, typer.Argument(metavar="FOLDER", show_default=False,
                                           help="Where to write the PNG files.")],
    k: Annotated[int | None, typer.Option(
        "-k", metavar="K", help="Level of detail, 1 to 63 (default: all that is stored).")]
    = None,
    first: Annotated[int | None, typer.Option(
        metavar="N", help="Only the first N images.")] = None,
    at: AtOpt = None,
    quiet: QuietOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Write the images of a set as PNG files, at a level of detail k.

    Files are named by image id (`000042.png`), in class folders when the set has class
    names, cut to each image's true size.

    **Examples**

    ```
    tessera export images data/photos exported -k 8 --first 4
    ```
    """
    from PIL import Image

    cols = tessera.open_images(url, storage_options=options(endpoint, region, allow_http,
                                                            option), at=moment(at, "--at"))
    ids = cols.ids()[:first] if first is not None else cols.ids()
    if folder.exists() and any(folder.iterdir()):
        raise InvalidArgumentError(f"{folder} is not empty: export into a new folder")
    classes = cols.classes()
    width = max(6, len(str(int(ids.max())))) if len(ids) else 6
    batch = max(1, cols.group)
    with progress("exporting", quiet=quiet) as step:
        for lo in range(0, len(ids), batch):
            chunk = ids[lo:lo + batch].tolist()
            pixels = cols.read(chunk, "all" if k is None else k, trim=True)
            labels = cols.labels(chunk)
            for image_id, picture, label in zip(chunk, pixels, labels, strict=True):
                place = folder / classes[label] if classes and label >= 0 else folder
                place.mkdir(parents=True, exist_ok=True)
                Image.fromarray(np.ascontiguousarray(picture)).save(
                    place / f"{image_id:0{width}d}.png")
            step(min(lo + batch, len(ids)), len(ids))
    out.print(f"wrote {len(ids)} image(s) to {folder}")
