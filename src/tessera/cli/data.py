"""Commands for anything at a URL, whatever its kind: ``tessera history``.

Output follows one rule: a rich table in a terminal; whole values without colour when the
output is piped or redirected; one JSON document per line with ``--json`` (the fields of
:meth:`tessera.Commit.to_dict`).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

import tessera
from tessera.cli.common import AllowHttpOpt, EndpointOpt, OptionOpt, RegionOpt, out
from tessera.cli.common import human as _human
from tessera.cli.common import options as _options
from tessera.errors import InvalidArgumentError
from tessera.integrations.h5 import File
from tessera.when import moment

JsonOpt = Annotated[bool, typer.Option(
    "--json", help="One JSON document per line instead of a table.")]


def history(
    url: Annotated[str, typer.Argument(help="An array, tensor table or image set.")],
    at: Annotated[str | None, typer.Option(
        "--at", help="Only the commits up to then: a date and time (UTC unless a zone is "
                     "given), a table version or a commit time in ns.")] = None,
    as_json: JsonOpt = False,
    endpoint: EndpointOpt = None,
    region: RegionOpt = None,
    allow_http: AllowHttpOpt = False,
    option: OptionOpt = None,
) -> None:
    """List the commits of an array, a tensor table or an image set, oldest first.

    Each commit shows when it happened, its marker (what --at takes to open that
    point: a commit time in ns, or a table version), its operation, what it added and
    removed, and the bytes it stored.

    Examples:
        tessera history file:///data/frames
        tessera history s3://bucket/ds/tensors --json
    """
    found = tessera.open(url, storage_options=_options(endpoint, region, allow_http, option),
                         at=moment(at, "--at"))
    if isinstance(found, File):
        raise InvalidArgumentError(f"{url} is a tessera.h5 file, which has no history of its "
                                   "own: run `tessera history` on its datasets' arrays")
    commits = found.history()
    if as_json:
        for commit in commits:
            typer.echo(json.dumps(commit.to_dict()))
        return
    table = Table("when (UTC)", "marker", "operation", "added", "removed", "bytes",
                  box=None, pad_edge=False)
    for c in commits:
        table.add_row(c.when.strftime("%Y-%m-%d %H:%M:%S.%f"), str(c.marker), c.operation,
                      f"{c.added} {c.unit}", str(c.removed), _human(c.nbytes))
    out.print(table)
    out.print(f"[dim]{len(commits)} commit{'' if len(commits) == 1 else 's'}[/]")
