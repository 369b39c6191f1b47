"""The options several commands share that belong to no flags group (``cli.flags``), declared once (name, default,
help); the two that another command borrows from a group take its field's help."""

from __future__ import annotations

import dataclasses

import typer

from ..eval.flags import EvalFlags


def _help(cls, name: str) -> str:
    """The help of a flags group's field (one text for every command that has the option)."""
    return next(f.metadata["help"] for f in dataclasses.fields(cls) if f.name == name)


ResultsOpt = typer.Option("results", "--results", help="results folder")
FigureFormatOpt = typer.Option("png", "--figure-format", help="png | pdf | svg (vector figures for a paper)")
DeviceOpt = typer.Option("auto", "--device", help="auto | cpu | cuda")
SeedsOpt = typer.Option(None, "--seeds", help="comma list: one run per seed")
GroupPeOpt = typer.Option("classic", "--pe", help="classic, modern, all, or a comma list")
LengthsOpt = typer.Option(None, "--lengths", help=_help(EvalFlags, "lengths"))  # analyze's too
SplitOpt = typer.Option("validation", "--split", help=_help(EvalFlags, "split"))  # report's and check's too
