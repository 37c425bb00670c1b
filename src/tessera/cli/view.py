"""``tessera view``: the local web viewer (:mod:`tessera.view`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tessera.cli.common import (
    AllowHttpOpt,
    EndpointOpt,
    OptionOpt,
    RegionOpt,
    err,
    options,
    out,
    url_arg,
)
from tessera.config import has_screen
from tessera.errors import ConfigError


def view(
    url: Annotated[str, url_arg("The store (or place in it) to look at: `data`, "
                                "`s3://bucket/ds`, ...")],
    host: Annotated[str, typer.Option(metavar="ADDRESS", help="Address to bind.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="Port to bind (0: any free one).")]
    = 8710,
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="Allow a --host other than this machine's loopback address "
                               "(anyone who has the address and its token sees the data).")]
    = False,
    no_browser: Annotated[bool, typer.Option(
        "--no-browser", help="Only print the address; do not open a browser.")] = False,
    budget_mb: Annotated[float, typer.Option(
        metavar="MB", help="The most MiB one request may read; larger views are refused "
                           "with a message.")] = 256,
    models: Annotated[Path | None, typer.Option(
        metavar="FOLDER", help="Also show the frozen models of this models folder.")] = None,
    pushdown: Annotated[str | None, typer.Option(
        metavar="URL", help="A pushdown server (http://host:port; token from "
                            "TESSERA_PUSHDOWN_TOKEN) whose root holds URL: zoomed-out views "
                            "of arrays read through it, so only the sampled cells travel.")]
    = None,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Look at what a store holds in a local web app (read-only).

    Any store URL works (a folder, `s3://...`, `gs://...`, `az://...`). Prints the address
    to open (with a random token: requests without it are refused) and opens a browser on a
    desktop. Shows a tree of arrays, tensor tables, image sets and
    tessera.h5 files; any 2-D plane of an array, zoomed and panned, with the plan of what is
    on screen; a table's versions and tensors; an image set's thumbnails and any image at
    each level of detail k. Stop it with Ctrl-C.

    **Examples**

    ```
    tessera view data --models models --port 8710 --no-browser
    ```
    """
    try:
        from tessera.view import Viewer, serve
    except ImportError as exc:
        raise ConfigError(f"tessera view needs the view extra ({exc.name} is missing): "
                          "pip install 'tessera[view]'") from None
    if budget_mb <= 0:
        raise typer.BadParameter(f"must be positive, got {budget_mb}", param_hint="--budget-mb")
    viewer = Viewer(url, storage_options=options(endpoint, region, allow_http, option),
                    budget_bytes=int(budget_mb * (1 << 20)), models=models,
                    pushdown=pushdown)
    viewer.store().list_dir()  # a URL that cannot be reached fails here, not in the page

    def ready(address: str) -> None:
        out.print(f"Tessera viewer of {url}: {address}", soft_wrap=True)
        err.print("[dim]read-only; Ctrl-C stops it[/]")
        if not no_browser and has_screen():
            import webbrowser

            webbrowser.open(address)

    serve(viewer, host=host, port=port, on_ready=ready, allow_remote=allow_remote)
