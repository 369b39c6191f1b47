"""The options several commands share that belong to no flags group (``cli.flags``), declared once (name, default,
help), and ``option``: a flags group's field as a plain option, for a command that borrows one unparsed setting of a
group (a field that is parsed comes through ``cli.flags.takes``)."""

from __future__ import annotations

import dataclasses

import typer

from ..config import ConfigFlags
from ..eval.flags import EvalFlags


def option(cls, name: str):
    """The option of a flags group's field ``name``: its flag, default and help, one declaration for every command
    that has it."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    assert "parse" not in f.metadata, f"{name} is parsed: take it with cli.flags.takes"
    return typer.Option(f.default, f.metadata["decl"], help=f.metadata["help"])


ResultsOpt = typer.Option("results", "--results", help="results folder")
FigureFormatOpt = typer.Option("png", "--figure-format", help="png | pdf | svg (vector figures for a paper)")
DeviceOpt = typer.Option("auto", "--device", help="auto | cpu | cuda")
SeedsOpt = typer.Option(None, "--seeds", help="comma list: one run per seed")
RunOpt = typer.Option(None, "--run", help="run name (repeatable or a comma list; default: every finished run)")
HfOpt = typer.Option(
    None, "--hf", help="a Hugging Face causal LM: a folder, Hub id or PATH.gguf (rope --hf: a config.json too)"
)
MetricOpt = typer.Option(
    None, "--metric", help="a metric of a task, or ratio (pebench list shows them; default: ppl, else the first task's)"
)
ProtocolKeyOpt = typer.Option(
    None,
    "--protocol",
    help="the records of one protocol, e.g. nonoverlap, sliding-s64, fixed-k256 (default: nonoverlap; report: "
    "else the first present)",
)
OutOpt = typer.Option(
    None,
    "--out",
    help="the folder to write into (default: the results folder; analyze: RESULTS/analysis; never a committed set, "
    "whose analysis goes to RESULTS/scratch/analysis)",
)
SplitOpt = option(EvalFlags, "split")  # report's and check's too
DataOpt = option(ConfigFlags, "data")  # eval --hf's corpus too
