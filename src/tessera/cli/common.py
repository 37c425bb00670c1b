"""What the commands of ``tessera`` share: the consoles, the storage-option flags and their
parsing, byte counts for people.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

EndpointOpt = Annotated[str | None, typer.Option(help="S3-compatible endpoint URL.")]
RegionOpt = Annotated[str | None, typer.Option(help="Bucket region.")]
AllowHttpOpt = Annotated[bool, typer.Option("--allow-http", help="Allow plain-HTTP endpoints.")]
OptionOpt = Annotated[list[str] | None, typer.Option(
    "--option", "-o", help="Extra storage option KEY=VALUE (repeatable).")]


def options(endpoint: str | None, region: str | None, allow_http: bool,
            extra: list[str] | None) -> dict[str, Any]:
    """Storage options from the common flags."""
    opts: dict[str, Any] = {}
    for item in extra or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--option")
        opts[key.strip()] = value
    if endpoint:
        opts["endpoint"] = endpoint
    if region:
        opts["region"] = region
    if allow_http:
        opts["allow_http"] = True
    return opts


def human(n: int) -> str:
    """``n`` bytes as people read them.

    >>> human(1536)
    '1.5 KiB'
    """
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover
