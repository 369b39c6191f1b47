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


def notes_of(notes: list[str]) -> None:
    for n in notes:
        warn(f"note: {n}")
