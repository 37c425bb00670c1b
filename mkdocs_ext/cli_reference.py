"""A MkDocs hook for the documentation site: the command-line reference, generated from
the ``tessera`` command itself. A page holding the marker ``<!-- cli-reference -->`` gets,
in its place, every command (each group before its own commands), with its help, its usage
line and a table of its arguments and options, as ``tessera COMMAND --help`` states them.

(The CLI is a typer app; typer carries its own copy of click, so generators written for
click's classes do not see its options: this walks typer's command tree instead.)"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

MARKER = "<!-- cli-reference -->"


def _help(text: str | None) -> str:
    """A command's help as Markdown: dedented, cut where click cuts it (``\\f``), with
    click's no-rewrap markers (``\\b``) dropped.

    >>> _help("Do it.\\n\\n    \\b\\n    More.\\f\\n    hidden")
    'Do it.\\n\\nMore.'
    """
    text = inspect.cleandoc(text or "").split("\f")[0]
    return "\n".join(line for line in text.splitlines() if line.strip() != "\b").strip()


def _cell(text: str) -> str:
    """``text`` fit for one cell of a Markdown table.

    >>> _cell("a | b\\nc")
    'a \\\\| b c'
    """
    return " ".join(text.replace("|", "\\|").split())


def subcommands(command: Any) -> list[str]:
    """The names of ``command``'s visible subcommands, in alphabetical order."""
    found = getattr(command, "commands", {}) or {}
    return [name for name in sorted(found) if not getattr(found[name], "hidden", False)]


def commands(command: Any, path: tuple[str, ...] = ("tessera",)) -> Iterator[
        tuple[tuple[str, ...], Any]]:
    """``command`` and every visible command below it, with its path of names, each group
    before its own commands."""
    yield path, command
    for name in subcommands(command):
        yield from commands(command.commands[name], (*path, name))


def parameters(path: tuple[str, ...], command: Any) -> list[tuple[str, str, str]]:
    """``(kind, names, help)`` of each visible argument and option of ``command``, as its
    ``--help`` prints them."""
    ctx = command.context_class(command, info_name=path[-1])
    rows = []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        rows.append((param.param_type_name, record[0], record[1]))
    return rows


def usage(path: tuple[str, ...], command: Any) -> str:
    """The usage line of ``command``, e.g. ``tessera array explain [OPTIONS] URL``."""
    ctx = command.context_class(command, info_name=path[-1])
    pieces = command.collect_usage_pieces(ctx)
    return " ".join([*path, *pieces]).replace("{", "").replace("}", "")


def reference(app: Any = None) -> str:
    """The reference of every command of ``app`` (by default, the ``tessera`` command) as
    Markdown."""
    import typer

    if app is None:
        from tessera.cli.main import app
    root = typer.main.get_command(app)
    out: list[str] = []
    for path, command in commands(root):
        level = min(len(path) + 1, 6)
        out += [f"{'#' * level} `{' '.join(path)}`", "", _help(command.help), "",
                "```text", usage(path, command), "```", ""]
        rows = parameters(path, command)
        if rows:
            out += ["| argument or option | what it does |", "|---|---|"]
            out += [f"| `{_cell(names)}` | {_cell(text)} |" for _, names, text in rows]
            out.append("")
        subs = subcommands(command)
        if subs:
            out += ["Commands: " + ", ".join(
                f"[`{name}`](#{'-'.join((*path, name))})" for name in subs) + ".", ""]
    return "\n".join(out)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs' hook: the marker replaced by the reference."""
    return markdown.replace(MARKER, reference()) if MARKER in markdown else markdown
