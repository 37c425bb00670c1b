"""``tessera array explain|consolidate|vacuum``: what only arrays do."""

from __future__ import annotations

from typing import Annotated

import typer

import tessera
from tessera.cli.common import (
    AllowHttpOpt,
    App,
    AtOpt,
    EndpointOpt,
    JsonOpt,
    OptionOpt,
    QuietOpt,
    RegionOpt,
    busy,
    emit,
    human,
    options,
    out,
    url_arg,
)
from tessera.format.parse import parse_selection
from tessera.when import moment

app = App(help="Arrays: read plans and maintenance.")
ArrayUrl = Annotated[str, url_arg("An array.")]


@app.command("explain")
def explain(
    url: ArrayUrl,
    selection: Annotated[str, typer.Argument(
        metavar="SELECTION",
        help='A selection as numpy writes it, e.g. "100:182, :" or "5, ::2".')] = "...",
    method: Annotated[str | None, typer.Option(
        metavar="METHOD", help="auto, get, merge, fetch or pushdown (default: "
                               "TESSERA_PLANNER_METHOD, or auto).")] = None,
    phi: Annotated[float | None, typer.Option(
        metavar="SECONDS", help="Seconds a read may take longer to save one dollar.")] = None,
    attr: Annotated[list[str] | None, typer.Option(
        metavar="NAME", help="Plan these attributes only (repeatable).")] = None,
    pushdown: Annotated[str | None, typer.Option(
        metavar="URL", help="Let pushdown to this server (http://host:port) compete.")]
    = None,
    at: AtOpt = None,
    as_json: JsonOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Print the plan a read would follow, without reading any data.

    Per tile: the method (one GET, merged ranges, a whole fetch or pushdown to a server),
    requests and bytes; then the estimated seconds and dollars. With `--json`, the
    plan's summary as one JSON document (fields in docs/cli.md).

    **Examples**

    ```
    tessera array explain data/frames "0:2, :"
    tessera array explain data/frames --method merge --json
    ```
    """
    if method == "pushdown" and pushdown is None:
        raise typer.BadParameter("pushdown needs a server: add --pushdown http://host:port "
                                 "(and measure it once with `tessera store profile URL "
                                 "--pushdown http://host:port`)", param_hint="--method")
    arr = tessera.open_array(url, storage_options=options(endpoint, region, allow_http,
                                                          option),
                             pushdown=pushdown, at=moment(at, "--at"))
    plan = arr.explain(parse_selection(selection), attrs=attr, method=method, phi=phi)
    if as_json:
        emit({"url": url, "selection": selection, **plan.to_dict()})
    else:
        out.print(plan.table())


@app.command("consolidate")
def consolidate(
    url: ArrayUrl,
    quiet: QuietOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Merge an array's fragments into one, so reads need fewer requests.

    Readers and writers go on meanwhile; the merged fragments stay readable for time
    travel until `tessera array vacuum`. A terminal shows a spinner with the time spent
    (one read of the merged box and one write: there are no steps to count).

    **Examples**

    ```
    tessera array consolidate data/frames
    ```
    """
    arr = tessera.open_array(url, "w", storage_options=options(endpoint, region, allow_http,
                                                               option))
    names = [f.name for f in arr.fragments]
    before = len(names)
    with busy(f"consolidating {before} fragment(s)", quiet=quiet):
        merged = arr.consolidate()
    if merged is None:
        out.print("nothing to consolidate: the array has no fragment")
        return
    if names == [merged.name]:
        out.print(f"nothing to consolidate: the array is one fragment ({merged.name})")
        return
    out.print(f"consolidated {before} fragment(s) into {merged.name} "
              f"({human(merged.nbytes)})")


@app.command("vacuum")
def vacuum(
    url: ArrayUrl,
    grace: Annotated[float, typer.Option(
        metavar="SECONDS", help="Leave objects of unfinished writes younger than this.")]
    = 3600.0,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """Remove the fragments a consolidation replaced (their time travel ends).

    Also removes the objects of writers that died before committing, once older than
    `--grace`.

    **Examples**

    ```
    tessera array vacuum data/frames
    ```
    """
    arr = tessera.open_array(url, "w", storage_options=options(endpoint, region, allow_http,
                                                               option))
    removed = arr.vacuum(orphan_grace_s=grace)
    out.print(f"removed {removed} object(s)")
