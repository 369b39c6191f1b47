"""The hidden ``job`` command: what a local worker or a scheduler's array task runs (one job file: train, then
evaluate, exactly as the parent planned)."""

from __future__ import annotations

from pathlib import Path

import typer

from . import console
from .app import app
from .console import handle_errors
from .options import DeviceOpt


@app.command("job", hidden=True)
@handle_errors
def job(
    spec: Path = typer.Argument(..., help="a job file written by `pebench run --workers` or --launcher"),
    device: str = DeviceOpt,
):
    """A worker's job: train the run its file names, then evaluate it (or the part of that the file names), exactly
    as planned by its parent."""
    from ..jobs.sweep import run_job_file

    if run_job_file(spec, device, console.reporter()):
        raise typer.Exit(1)
