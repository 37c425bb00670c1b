"""What the commands of ``tessera`` share: the command classes (help that wraps, flags shown
as flags), the consoles, the storage flags, output for people and for scripts, progress bars
that show only on a terminal, byte counts for people.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypeVar

import typer
import typer.core
from rich.console import Console
from rich.table import Table

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

F = TypeVar("F", bound=Callable[..., Any])


class _FlagsAsFlags:
    """Shows a flag (``--json``, ``--help``) without a ``<bool>`` value beside it."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option

    def get_params(self, ctx: Any) -> Any:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


class Command(_FlagsAsFlags, typer.core.TyperCommand):
    """A ``tessera`` command."""


class Group(_FlagsAsFlags, typer.core.TyperGroup):
    """A group of ``tessera`` commands."""


class App(typer.Typer):
    """A :class:`typer.Typer` whose help wraps to the terminal (docstrings are Markdown:
    paragraphs reflow, an indented block is kept as written) and shows flags as flags."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", Group)
        kwargs.setdefault("rich_markup_mode", "markdown")
        kwargs.setdefault("no_args_is_help", True)
        kwargs.setdefault("pretty_exceptions_enable", False)
        kwargs.setdefault("add_completion", False)
        super().__init__(**kwargs)

    def command(self, name: str | None = None, **kwargs: Any) -> Callable[[F], F]:
        kwargs.setdefault("cls", Command)
        return super().command(name, **kwargs)


@dataclasses.dataclass
class Settings:
    """Process-wide settings from the top-level flags."""

    #: ``--debug``: let errors raise with their traceback.
    debug: bool = False


settings = Settings()

STORAGE = "Storage"
EndpointOpt = Annotated[str | None, typer.Option(
    metavar="URL", help="S3-compatible endpoint URL.", rich_help_panel=STORAGE)]
RegionOpt = Annotated[str | None, typer.Option(
    metavar="NAME", help="Bucket region.", rich_help_panel=STORAGE)]
AllowHttpOpt = Annotated[bool, typer.Option(
    "--allow-http", help="Allow plain-HTTP endpoints.", rich_help_panel=STORAGE)]
OptionOpt = Annotated[list[str] | None, typer.Option(
    "--storage-option", "-o", metavar="KEY=VALUE", rich_help_panel=STORAGE,
    help="A storage option, e.g. `-o aws_access_key_id=...` (repeatable).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON instead of a table.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
AtOpt = Annotated[str | None, typer.Option(
    "--at", metavar="WHEN",
    help="As it was then: a date and time (`2026-11-27T17:49:49`, UTC unless a zone is "
         "given), a table version or a commit time in ns.")]


def url_arg(what: str) -> Any:
    """The ``URL`` argument, described as ``what``."""
    return typer.Argument(metavar="URL", help=what, show_default=False)


def options(endpoint: str | None, region: str | None, allow_http: bool,
            extra: list[str] | None) -> dict[str, Any]:
    """Storage options from the common flags.

    >>> options("http://127.0.0.1:9000", None, True, ["aws_access_key_id=k"])
    {'aws_access_key_id': 'k', 'endpoint': 'http://127.0.0.1:9000', 'allow_http': True}
    """
    opts: dict[str, Any] = {}
    for item in extra or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}",
                                     param_hint="--storage-option")
        opts[key.strip()] = value
    if endpoint:
        opts["endpoint"] = endpoint
    if region:
        opts["region"] = region
    if allow_http:
        opts["allow_http"] = True
    return opts


def object_url(url: str) -> tuple[str, str]:
    """The store and the key of one object's URL.

    >>> object_url("s3://bucket/a/key")
    ('s3://bucket', 'a/key')
    >>> object_url("file:///data/frames/__schema.json")
    ('file:///data/frames', '__schema.json')
    """
    from pathlib import PurePosixPath

    from tessera.errors import InvalidURLError
    from tessera.storage.url import StoreURL, parse_store_url

    parsed = parse_store_url(url)
    if parsed.scheme == "file":
        path = PurePosixPath(parsed.path)
        if str(path) == "/":
            raise InvalidURLError(f"{url!r} names a folder, not an object")
        return str(StoreURL("file", path=str(path.parent))), path.name
    if not parsed.prefix:
        raise InvalidURLError(f"{url!r} names a bucket, not an object: add the key")
    return str(StoreURL(parsed.scheme, bucket=parsed.bucket)), parsed.prefix


def as_numpy(got: Any, attr: str | None = None) -> Any:
    """What an array read returned as one numpy array: a dense read as it is (``attr`` picks
    from several attributes), a sparse read's cells as a structured array with one field
    per dimension, then the attributes'.

    >>> import numpy as np
    >>> from tessera.array.read.sparse import SparseResult
    >>> cells = SparseResult((np.array([1, 7]), np.array([2, 8])), {"v": np.array([5., 6.])})
    >>> as_numpy(cells, None).tolist()
    [(1, 2, 5.0), (7, 8, 6.0)]
    """
    import numpy as np

    coords = getattr(got, "coords", None)
    if coords is not None:
        values = dict(got.values) if attr is None else {attr: got.values[attr]}
        fields: list[Any] = [(f"d{i}", c.dtype) for i, c in enumerate(coords)]
        fields += [(name, v.dtype, v.shape[1:]) for name, v in values.items()]
        cells = np.empty(len(coords[0]) if coords else 0, dtype=fields)
        for i, c in enumerate(coords):
            cells[f"d{i}"] = c
        for name, v in values.items():
            cells[name] = v
        return cells
    if isinstance(got, dict):
        return np.asarray(got[attr] if attr is not None else next(iter(got.values())))
    return np.asarray(got)


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


def table(*columns: str, title: str | None = None) -> Table:
    """A table for people: no box, left-aligned title; values are never cut (a piped output
    is as wide as its longest line)."""
    return Table(*columns, title=title, title_justify="left", box=None, pad_edge=False)


def emit(document: Any) -> None:
    """One JSON document on its own line of standard output."""
    typer.echo(json.dumps(document))


Step = Callable[[int, int | None], None]


@contextlib.contextmanager
def progress(label: str, *, quiet: bool, nbytes: bool = False) -> Iterator[Step]:
    """A progress bar on standard error, shown only on a terminal and not with ``-q``, and
    only once the first step is reported (an error before it draws nothing).

    Yields ``step(done, total)``: counts (``nbytes``: bytes, with transfer speed).
    """
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    counts = (DownloadColumn(), TransferSpeedColumn()) if nbytes else (MofNCompleteColumn(),)
    bar = Progress(TextColumn(label), BarColumn(), *counts, TimeElapsedColumn(),
                   TimeRemainingColumn(), console=err, transient=False,
                   disable=quiet or not err.is_terminal)
    task: list[Any] = []

    def step(done: int, total: int | None) -> None:
        if not task:
            bar.start()
            task.append(bar.add_task(label, total=total))
        bar.update(task[0], completed=done, total=total)

    try:
        yield step
    finally:
        if task:
            bar.stop()


@contextlib.contextmanager
def busy(label: str, *, quiet: bool) -> Iterator[None]:
    """A spinner with the time spent on standard error, for work without countable steps
    (only on a terminal, and not with ``-q``)."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn(label), TimeElapsedColumn(), console=err,
                  transient=True, disable=quiet or not err.is_terminal) as bar:
        bar.add_task(label, total=None)
        yield


def renamed(func: F, new: str) -> F:
    """``func`` under its old name: the same command, with a note on standard error naming
    the new one (old names keep working for one release, hidden from help)."""

    @functools.wraps(func)
    def old(*args: Any, **kwargs: Any) -> Any:
        err.print(f"[yellow]note:[/] this command is now `tessera {new}`; the old name "
                  "goes away in the next release", soft_wrap=True)
        return func(*args, **kwargs)

    return old  # type: ignore[return-value]
