"""The Typer app every command module registers on, its global ``--debug`` flag and the notes a command prints
last."""

from __future__ import annotations

import typer

from .console import OneLineErrors, warn

app = typer.Typer(
    context_settings={"help_option_names": ["-h", "--help"]},
    cls=OneLineErrors,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Benchmark positional encodings for length extrapolation of tiny decoder LMs.",
)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"pebench {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    debug: bool = typer.Option(False, "--debug", help="show tracebacks (anywhere on the line)"),
    version: bool = typer.Option(
        False, "--version", help="print the version and exit", callback=_version, is_eager=True
    ),
):
    """--debug is taken off the line before parsing (OneLineErrors); declared here for --help."""


def one_line_helps(typer_app: typer.Typer) -> None:
    """Each command's help from its docstring with the source's line breaks joined (help wraps at the terminal's
    width, never mid-sentence at the source's), and its line in the command list its first sentence."""
    import re

    for info in typer_app.registered_commands:
        doc = (info.callback.__doc__ or "").strip()
        paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", doc) if p.strip()]
        info.help = "\n\n".join(paragraphs)
        first = paragraphs[0] if paragraphs else ""
        info.short_help = re.split(r"(?<=[.;])\s", first, maxsplit=1)[0].rstrip(";")


def notes_of(notes: list[str]) -> None:
    for n in notes:
        warn(f"note: {n}")
