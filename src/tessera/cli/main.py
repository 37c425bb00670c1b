"""``tessera``: the command line.

Commands are grouped by what the user has in hand: anything at a URL (``ls``, ``info``,
``history``, ``cat``, ``cp``, ``rm``, ``view``), files to bring in and out (``import``,
``export``), one kind of data
(``array``, ``table``, ``images``), and the server side (``serve``, ``model``, ``store``).
The older flat names (``import-npy``, ``tables``, ``profile-model``, ...) still work for
one release, hidden from help, with a note naming the new command.

Errors print one line (``error: ...``: what failed, on which object, what to do) and exit
with status 1; usage errors exit with 2; ``--debug`` (or ``TESSERA_DEBUG=1``) shows the
traceback instead.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated

import typer
from rich.markup import escape

import tessera
from tessera.cli import arrays, data, exports, images, imports, models, moves, stores, tables
from tessera.cli.common import App, err, out, renamed, settings
from tessera.cli.serve import serve
from tessera.cli.view import view
from tessera.errors import TesseraError

ANY = "Anything at a URL"
BRING = "Bring data in and out"
KINDS = "One kind of data"
SERVER = "Serve and measure"

app = App(
    name="tessera",
    help="Arrays, tensors and images in object storage, read region by region.\n\n"
         "A URL is a local path (`data/frames`), `file:///abs/path`, `s3://bucket/prefix`, "
         "`gs://bucket/prefix`, `az://container/prefix` or `memory://name`. Run "
         "`tessera COMMAND --help` for a command's options and examples.",
    add_completion=True,
)


def _version(value: bool) -> None:
    if value:
        out.print(f"tessera {tessera.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")]
    = False,
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show an error's traceback instead of one line.")] = False,
) -> None:
    """Tessera's command line."""
    settings.debug = debug
    if not out.is_terminal:  # piped or redirected: whole values, no cutting to a width
        out.width = 1 << 16


for sub in (data.app, moves.app):
    for info in sub.registered_commands:
        assert info.callback is not None
        app.command(info.name, rich_help_panel=ANY)(info.callback)
app.add_typer(imports.app, name="import", rich_help_panel=BRING)
app.add_typer(exports.app, name="export", rich_help_panel=BRING)
app.add_typer(arrays.app, name="array", rich_help_panel=KINDS)
app.add_typer(tables.app, name="table", rich_help_panel=KINDS)
app.add_typer(images.app, name="images", rich_help_panel=KINDS)
app.command("serve", rich_help_panel=SERVER)(serve)
app.command("view", rich_help_panel=ANY)(view)
app.add_typer(models.app, name="model", rich_help_panel=SERVER)
app.add_typer(stores.app, name="store", rich_help_panel=SERVER)

#: Old names (hidden; each prints a note naming its new command) -> the new command.
RENAMED: dict[str, tuple[str, Callable[..., None]]] = {
    "import-npy": ("import npy", imports.npy),
    "import-hdf5": ("import hdf5", imports.hdf5),
    "import-zarr": ("import zarr", imports.zarr),
    "import-pt": ("import pt", imports.pt),
    "import-safetensors": ("import safetensors", imports.safetensors),
    "import-images": ("import images", imports.images),
    "explain": ("array explain", arrays.explain),
    "profile": ("store profile", stores.profile),
    "stat": ("store stat", stores.stat),
    "profile-model": ("model profile", models.profile_model),
    "explain-split": ("model explain", models.explain_split),
}
for old, (new, command) in RENAMED.items():
    app.command(old, hidden=True)(renamed(command, new))
#: Old group names -> new ones.
RENAMED_GROUPS = {"tables": "table", "models": "model"}


def _group_note(new: str) -> None:
    err.print(f"[yellow]note:[/] these commands are now `tessera {new} ...`; the old name "
              "goes away in the next release", soft_wrap=True)


app.add_typer(tables.app, name="tables", hidden=True,
              callback=lambda: _group_note("table"))
app.add_typer(models.app, name="models", hidden=True,
              callback=lambda: _group_note("model"))


def _debug() -> bool:
    """``--debug``, or ``TESSERA_DEBUG`` set to a true value (an unparsable one counts)."""
    from tessera.config import ProcessConfig
    from tessera.errors import ConfigError

    if settings.debug:
        return True
    try:
        return ProcessConfig.from_env().debug
    except ConfigError:
        return True


def older_flags(args: list[str]) -> list[str]:
    """``args`` with the older ``--option KEY=VALUE`` spelled ``--storage-option`` (with a
    note).

    >>> older_flags(["ls", "--option", "region=x", "--option=a=b", "URL"])
    ['ls', '--storage-option', 'region=x', '--storage-option=a=b', 'URL']
    """
    out = [f"--storage-option{a[len('--option'):]}"
           if a == "--option" or a.startswith("--option=") else a for a in args]
    if out != args:
        err.print("[yellow]note:[/] --option is now --storage-option; the old name goes away "
                  "in the next release", soft_wrap=True)
    return out


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``tessera`` script."""
    try:
        app(args=older_flags(sys.argv[1:] if argv is None else argv), prog_name="tessera")
    except KeyboardInterrupt:
        err.print("[bold red]interrupted[/]")
        raise SystemExit(130) from None
    except (TesseraError, OSError, ValueError, LookupError, TypeError) as exc:
        if _debug():
            raise
        text = (str(exc) if isinstance(exc, TesseraError)
                else f"{type(exc).__name__}: {exc} (--debug shows the traceback)")
        err.print(f"[bold red]error:[/] {escape(text)}", soft_wrap=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
