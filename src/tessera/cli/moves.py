"""``tessera rm`` and ``tessera cp``: remove or copy a whole dataset of any kind
(:mod:`tessera.places`)."""

from __future__ import annotations

import sys
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
    options,
    out,
    progress,
    url_arg,
)
from tessera.errors import DataNotFoundError, InvalidArgumentError
from tessera.kinds import kind_at
from tessera.places import copy, marks_kind
from tessera.storage.bulk import delete_all

app = App()


@app.command("rm")
def rm(
    url: Annotated[str, url_arg("An array, tensor table, image set or tessera.h5 file.")],
    yes: Annotated[bool, typer.Option(
        "--yes", "-y", help="Do not ask (needed when standard input is not a terminal).")]
    = False,
    recursive: Annotated[bool, typer.Option(
        "--recursive", "-r", help="Also remove objects that are not a Tessera dataset.")]
    = False,
    quiet: QuietOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Remove a dataset of any kind, with its whole history.

    Asks before removing on a terminal; pass `--yes` in scripts. A place that holds no
    Tessera dataset is refused unless `--recursive` says its objects may all go.

    **Examples**

    ```
    tessera rm data/frames-copy --yes
    tessera rm data/scratch --recursive --yes
    ```
    """
    opts = options(endpoint, region, allow_http, option)
    store = tessera.open_store(url, **opts)
    objects = store.list()
    if not objects:
        raise DataNotFoundError(f"nothing at {url}: no object below it")
    kind = kind_at(store)
    what = f"the {kind} at {url}" if kind else f"{len(objects)} object(s) below {url}"
    if kind is None and not recursive:
        raise InvalidArgumentError(f"{url} holds no array, tensor table, image set or "
                                   f"tessera.h5 file ({len(objects)} object(s)): pass "
                                   "--recursive to remove them all")
    nbytes = sum(o.size for o in objects)
    if not yes:
        if not sys.stdin.isatty():
            raise InvalidArgumentError(f"removing {what} needs --yes when standard input is "
                                       "not a terminal")
        if not typer.confirm(f"Remove {what} ({len(objects)} objects, {human(nbytes)})?",
                             err=True):
            err.print("nothing removed")
            raise typer.Exit(1)
    with progress("removing", quiet=quiet) as step:  # the objects listed above, once
        delete_all(store, objects, last=marks_kind, progress=step)
    out.print(f"removed {what}: {len(objects)} objects, {human(nbytes)}")


@app.command("cp")
def cp(
    source: Annotated[str, typer.Argument(metavar="SRC", show_default=False,
                                          help="What to copy: a dataset of any kind.")],
    target: Annotated[str, typer.Argument(metavar="DST", show_default=False,
                                          help="Where: an empty place, in any store.")],
    target_option: Annotated[list[str] | None, typer.Option(
        "--target-option", metavar="KEY=VALUE", rich_help_panel="Storage",
        help="A storage option of DST only (default: DST takes the options of SRC).")]
    = None,
    quiet: QuietOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Copy a dataset of any kind elsewhere, with its whole history.

    Every object is copied as it is stored (no decoding), the objects that mark the
    dataset's kind last; a copy that fails removes what it wrote. DST must hold nothing.

    **Examples**

    ```
    tessera cp data/frames data/frames-copy
    tessera cp data/tensors data/tensors-copy -q
    ```
    """
    opts = options(endpoint, region, allow_http, option)
    target_opts = (None if target_option is None
                   else {**opts, **options(None, None, False, target_option)})
    with progress("copying", quiet=quiet, nbytes=True) as step:
        done = copy(source, target, storage_options=opts, target_options=target_opts,
                    progress=step)
    what = done.kind or "objects"
    out.print(f"copied {what}: {done.objects} objects, {human(done.nbytes)} -> {target}")
