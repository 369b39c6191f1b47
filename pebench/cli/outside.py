"""Commands for outside (Hugging Face) models: ``rope`` (what a RoPE scaling does to a model's frequencies) and
``export`` (a pebench run as a Hugging Face checkpoint). ``eval --hf`` lives with the evaluation commands."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..eval.flags import EvalFlags
from . import console
from .app import app
from .console import handle_errors
from .flags import takes
from .options import HfOpt, ResultsOpt

NO_EVAL_FLAGS = EvalFlags()  # the placeholder where cli.flags.takes puts rope's options


@app.command()
@handle_errors
@takes(EvalFlags, "ev", only=("lengths", "rope_scaling"))
def rope(
    hf: Optional[str] = HfOpt,
    ev: EvalFlags = NO_EVAL_FLAGS,  # --lengths (one length), --rope-scaling (default: the model's own)
    length: Optional[str] = typer.Option(None, "--length", hidden=True, help="the old name of --lengths"),
):
    """What a RoPE scaling does to a model: frequencies per dimension, attention factor, the longest length it is
    meant for, pebench's own implementation of the same variant beside transformers', and the known traps."""
    from ..eval.hf import rope_report
    from ..util.errors import UsageError

    if length is not None:
        raise UsageError(f"--length is now --lengths (tokens or Kx, as every command takes it): --lengths {length}")
    if hf is None:
        raise UsageError("rope needs --hf: a Hugging Face model folder, Hub id, PATH.gguf or config.json")
    if ev.lengths is not None and len(ev.lengths) > 1:
        raise UsageError(f"rope shows one length; --lengths gives {len(ev.lengths)}")
    console.scaling_notes(ev.rope_scaling)
    r = rope_report(hf, ev.rope_scaling, ev.lengths[0] if ev.lengths else None)
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
