"""Commands for outside (Hugging Face) models: ``rope`` (what a RoPE scaling does to a model's frequencies) and
``export`` (a pebench run as a Hugging Face checkpoint). ``eval --hf`` lives with the evaluation commands."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from . import console
from .app import app
from .console import handle_errors
from .options import ResultsOpt


@app.command()
@handle_errors
def rope(
    hf: str = typer.Option(..., "--hf", help="a Hugging Face model folder, Hub id or config.json"),
    rope_scaling: Optional[str] = typer.Option(
        None, "--rope-scaling", help="NAME[:key=value...] (default: the config's own)"
    ),
    lengths: Optional[str] = typer.Option(
        None, "--lengths", help="the sequence length, tokens or Kx the context (default: factor x context)"
    ),
    length: Optional[str] = typer.Option(None, "--length", hidden=True, help="the old name of --lengths"),
):
    """What a RoPE scaling does to a model: frequencies per dimension, attention factor, the longest length it is
    meant for, pebench's own implementation of the same variant beside transformers', and the known traps."""
    from ..eval.hf import rope_report
    from ..util.errors import UsageError

    if length is not None:
        raise UsageError(f"--length is now --lengths (tokens or Kx, as every command takes it): --lengths {length}")
    console.scaling_notes(rope_scaling)
    r = rope_report(hf, rope_scaling, lengths)
    console.echo(
        "  ".join(f"{k}: {v:.6g}" if isinstance(v, float) else f"{k}: {v}" for k, v in r.facts.items() if v is not None)
    )
    cols = list(r.rows[0])
    console.echo("  ".join(f"{c:>12}" for c in cols))
    for row in r.rows:
        console.echo("  ".join(f"{row[c]:>12.6g}" if isinstance(row[c], float) else f"{row[c]:>12}" for c in cols))
    for w in r.warnings:
        console.warn(f"warning: {w}")


@app.command()
@handle_errors
def export(
    run: str = typer.Argument(..., help="a finished run (RoPE or NoPE)"),
    dest: Path = typer.Option(..., "--hf", help="the folder to write the Hugging Face checkpoint into"),
    results: Path = ResultsOpt,
):
    """Write a pebench run as a Hugging Face GPT-NeoX checkpoint (with a byte tokenizer) that reproduces it
    exactly: `pebench eval --hf DEST` then gives the run's own loss."""
    from ..eval.export import export_run
    from ..results import ResultsDir

    path = export_run(ResultsDir(results), run, dest)
    console.echo(f"wrote {path} (GPT-NeoX; pebench eval --hf {path} evaluates it)")
