"""The Typer app every command module registers on, its global ``--debug`` flag and the notes a command prints
last."""

from __future__ import annotations

import typer

from .console import OneLineErrors, warn

app = typer.Typer(
    cls=OneLineErrors,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Benchmark positional encodings for length extrapolation of tiny decoder LMs.",
)


@app.callback()
def main_callback(debug: bool = typer.Option(False, "--debug", help="show tracebacks (anywhere on the line)")):
    """--debug is taken off the line before parsing (OneLineErrors); declared here for --help."""


def notes_of(notes: list[str]) -> None:
    for n in notes:
        warn(f"note: {n}")
