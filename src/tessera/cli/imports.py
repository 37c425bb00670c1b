"""``tessera import npy|hdf5|zarr|pt|safetensors|images``: bring files in (the importers of
:mod:`tessera.importers`), with a progress bar on a terminal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from tessera.cli.common import (
    AllowHttpOpt,
    App,
    EndpointOpt,
    OptionOpt,
    QuietOpt,
    RegionOpt,
    human,
    options,
    out,
    progress,
    url_arg,
)
from tessera.errors import ArrayNotFoundError, InvalidArgumentError
from tessera.format.codecs import codec_names
from tessera.importers.report import ImportReport

app = App(help="Import arrays, HDF5, zarr, tensors and folders of images.")

NewUrl = Annotated[str, url_arg("Where to store it (nothing may be there yet).")]
TableUrl = Annotated[str, url_arg("The tensor table (made if missing).")]


def _report(verb: str, report: ImportReport) -> None:
    out.print(f"{verb}: imported {len(report.imported)} dataset(s), {human(report.nbytes)}")
    for name, why in report.skipped:
        out.print(f"  skipped {name}: {why}")
    for name, note in report.notes:
        out.print(f"  note {name}: {note}")


def _datasets(quiet: bool, run: Callable[[Any], ImportReport]) -> ImportReport:
    """Run an importer with one progress bar (bytes over all datasets)."""
    with progress("importing", quiet=quiet, nbytes=True) as step:
        done: dict[str, int] = {}
        totals: dict[str, int] = {}

        def each(label: str, copied: int, total: int) -> None:
            done[label], totals[label] = copied, total
            step(sum(done.values()), sum(totals.values()))

        return run(each)


@app.command("npy")
def npy(
    source: Annotated[Path, typer.Argument(metavar="FILE", show_default=False,
                                           help="A .npy file (one array) or a .npz file.")],
    url: NewUrl,
    tile: Annotated[str | None, typer.Option(
        metavar="EXTENTS", help="Tile extents, comma-separated, e.g. `1,256,256` (default: "
                                "tiles of about 1 MiB).")] = None,
    codec: Annotated[str | None, typer.Option(
        metavar="NAME[:LEVEL]", help=f"{', '.join(codec_names())} (default: none).")] = None,
    quiet: QuietOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Import a .npy file as an array (a .npz as a tessera.h5 file).

    The data is copied in slabs, so memory stays bounded whatever the file's size.

    **Examples**

    ```
    tessera import npy frames.npy data/frames
    tessera import npy samples.npy data/samples --tile 1,3,32,32 --codec zstd:3
    ```
    """
    from tessera.importers import import_npy

    extents = _extents(tile)
    opts = options(endpoint, region, allow_http, option)
    _report("import npy", _datasets(quiet, lambda p: import_npy(
        source, url, tile=extents, codec=codec, storage_options=opts, progress=p)))


def _extents(tile: str | None) -> tuple[int, ...] | None:
    if tile is None:
        return None
    try:
        return tuple(int(t) for t in tile.split(","))
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated integers, got {tile!r}",
                                 param_hint="--tile") from None


@app.command("hdf5")
def hdf5(
    source: Annotated[Path, typer.Argument(metavar="FILE", show_default=False,
                                           help="An HDF5 file.")],
    url: NewUrl,
    quiet: QuietOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Import every dataset of an HDF5 file as a tessera.h5 file.

    Chunk shapes, gzip compression, attributes and groups are kept.

    **Examples**

    ```
    tessera import hdf5 scans.h5 data/scans
    ```
    """
    from tessera.importers import import_hdf5

    opts = options(endpoint, region, allow_http, option)
    _report("import hdf5", _datasets(quiet, lambda p: import_hdf5(
        source, url, storage_options=opts, progress=p)))


@app.command("zarr")
def zarr(
    source: Annotated[str, typer.Argument(metavar="PATH", show_default=False,
                                          help="A zarr array or group (a path or URL).")],
    url: NewUrl,
    quiet: QuietOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Import a zarr array or group as a tessera.h5 file.

    Chunk shapes, zstd, gzip, blosc and lz4 compression, attributes and groups are kept.

    **Examples**

    ```
    tessera import zarr volume.zarr data/volume
    ```
    """
    from tessera.importers import import_zarr

    opts = options(endpoint, region, allow_http, option)
    _report("import zarr", _datasets(quiet, lambda p: import_zarr(
        source, url, storage_options=opts, progress=p)))


@app.command("pt")
def pt(
    source: Annotated[Path, typer.Argument(
        metavar="FILE", show_default=False,
        help="A file written by torch.save: a tensor or a dict of them.")],
    url: TableUrl,
    tensor_id: Annotated[str | None, typer.Option(
        "--id", metavar="ID", help="The tensor's id (a dict's tensors go below it as "
                                   "ID/name).")] = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Import a .pt file's tensors into a tensor table.

    All its tensors go in one commit. The file is loaded with `weights_only=True`, so no
    pickled code runs.

    **Examples**

    ```
    tessera import pt weights.pt data/tensors --id run1
    ```
    """
    from tessera.importers.tensors import import_pt

    ids = import_pt(source, url, tensor_id, options(endpoint, region, allow_http,
                                                    option)).imported
    _tensors("import pt", ids, url)


def _tensors(verb: str, ids: list[str], url: str) -> None:
    out.print(f"{verb}: {len(ids)} tensor(s) -> {url}: {', '.join(ids[:5])}"
              + (" ..." if len(ids) > 5 else ""))


@app.command("safetensors")
def safetensors(
    source: Annotated[Path, typer.Argument(metavar="FILE", show_default=False,
                                           help="A .safetensors file.")],
    url: TableUrl,
    prefix: Annotated[str | None, typer.Option(
        "--id", metavar="ID", help="Put the tensors below this id (ID/name).")] = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Import a safetensors file's tensors into a tensor table.

    All its tensors go in one commit; the file's metadata goes with each tensor.

    **Examples**

    ```
    tessera import safetensors model.safetensors data/tensors
    ```
    """
    from tessera.importers.tensors import import_safetensors

    ids = import_safetensors(source, url, prefix, options(endpoint, region, allow_http,
                                                          option)).imported
    _tensors("import safetensors", ids, url)


@app.command("images")
def images(
    source: Annotated[Path, typer.Argument(
        metavar="FOLDER", show_default=False,
        help="A folder of image files (FOLDER/CLASS/FILE gives labels by class).")],
    url: Annotated[str, url_arg("The image set: a new one, or one to add to with "
                                "`--append`.")],
    append: Annotated[bool, typer.Option(
        "--append", help="Add the images to the set at URL (its size, format and classes).")]
    = False,
    size: Annotated[str | None, typer.Option(
        metavar="N|HxW", help="Canvas of a new set: `256` (square) or `HEIGHTxWIDTH`, "
                              "multiples of the block (default 256).")] = None,
    fit: Annotated[str, typer.Option(
        metavar="RULE", help="Images of another size: `resize` (scale the short side, crop "
                             "the centre), `pad` (pad smaller ones) or `error` (skip "
                             "them).")] = "resize",
    group: Annotated[int, typer.Option(metavar="N", help="Images per group (one request "
                                                         "per group).")] = 32,
    q: Annotated[float, typer.Option("--quantization", metavar="STEP",
                                     help="Quantization step (larger: fewer bytes).")] = 50,
    colour: Annotated[str, typer.Option(metavar="SPACE", help="ycbcr, rgb or gray.")]
    = "ycbcr",
    chroma: Annotated[str, typer.Option(
        metavar="MODE", help="`4:4:4` (full resolution) or `4:2:0` (Cb and Cr at half "
                             "resolution, as JPEG: half the coefficients to decode; "
                             "ycbcr only).")] = "4:4:4",
    codec: Annotated[str, typer.Option(metavar="NAME[:LEVEL]", help="Codec of the columns.")]
    = "zstd:9",
    flush: Annotated[int, typer.Option(metavar="N", help="Images per commit.")] = 4096,
    quiet: QuietOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Import a folder of images as an image set stored by frequency.

    Files that cannot be read, or whose size does not fit by `--fit`, are skipped and
    listed. An import that stores no image leaves no set behind.

    **Examples**

    ```
    tessera import images photos data/photos --size 64
    tessera import images more-photos data/photos --append
    ```
    """
    from tessera.images import FrequencyFormat
    from tessera.importers.images import import_images

    if append and size is not None:
        raise typer.BadParameter("an appended set keeps its own size", param_hint="--size")
    canvas = None if append else _canvas(size or "256")
    opts = options(endpoint, region, allow_http, option)
    with progress("importing images", quiet=quiet) as step:
        try:
            report = import_images(source, url, size=canvas, fit=fit, group=group,
                                   fmt=FrequencyFormat(q=q, colour=colour, chroma=chroma),
                                   codec=codec, flush_images=flush, progress=step,
                                   storage_options=opts, append=append)
        except ArrayNotFoundError:
            if not append:
                raise
            raise ArrayNotFoundError(f"no image set at {url} to append to: import without "
                                     "--append to make one") from None
    for path, why in report.skipped:
        out.print(f"  skipped {path}: {why}")
    if report.skipped and fit != "resize":
        out.print("  (--fit resize scales and crops every image to the set's size)")
    if not report.images:
        raise InvalidArgumentError(f"no image of {source} could be stored, so nothing was "
                                   f"written to {url}")
    classes = f", {len(report.classes)} classes" if report.classes else ", no labels"
    out.print(f"import images: {report.images} images{classes}, "
              f"{human(report.stored_bytes)} stored -> {url}")


def _canvas(size: str) -> tuple[int, int]:
    try:
        parts = [int(v) for v in size.lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2):
        raise typer.BadParameter(f"expected N or HxW, got {size!r}", param_hint="--size")
    return parts[0], parts[-1]
