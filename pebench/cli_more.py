"""Commands beyond the core ones: the findings (check claims, regenerate the docs, pack records, compare a run with
the reference) and the hidden ``job`` a worker or an array task runs. Thin like cli.py: each parses, calls the
library (claims, docs, results, reference, sweep) and prints."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from . import console
from .cli_options import DeviceOpt, ResultsOpt, SplitOpt
from .console import handle_errors
from .errors import PebenchError


def check(sets: Optional[List[Path]] = typer.Argument(None, help="result sets or folders above them "
                                                                  "(default: results)"),
          quiet: bool = typer.Option(False, "--quiet", help="print failed claims only")):
    """Decide every claim (claims.yaml beside each result set) from the committed evidence; exit 1 if any fails."""
    from .claims import check_set, claim_sets, render_verdicts

    found = claim_sets(sets or [Path("results")])
    if not found:
        raise PebenchError("no claims.yaml under " + ", ".join(str(s) for s in sets or ["results"]))
    failed = total = 0
    for root in found:
        verdicts = check_set(root)
        total, failed = total + len(verdicts), failed + sum(not v.held for v in verdicts)
        shown = [v for v in verdicts if not (quiet and v.held)]
        if shown:
            console.echo(f"# {root}\n" + render_verdicts(shown))
    console.echo(f"{total - failed} of {total} claims held in {len(found)} result sets")
    if failed:
        raise typer.Exit(1)


def docs(check_only: bool = typer.Option(False, "--check", help="write nothing; exit 1 if a doc is stale"),
         root: Path = typer.Option(Path("."), "--root", help="the repository root")):
    """Regenerate every generated section (tables, claims) of README.md, docs/*.md and results/*/README.md."""
    from .docs import regenerate

    changed = regenerate(root, check=check_only)
    for p in changed:
        console.echo(("stale: " if check_only else "rewrote: ") + str(p))
    if not changed:
        console.echo("every generated section is up to date")
    if check_only and changed:
        raise typer.Exit(1)


def pack(dest: Path = typer.Argument(..., help="the result set folder to write records.jsonl.gz into"),
         pe: Optional[str] = typer.Option(None, "--runs", help="comma list of runs (default: every run)"),
         results: Path = ResultsOpt):
    """Keep the evidence: every record of the results folder in one compact records.jsonl.gz (no checkpoints)."""
    from .parsing import parse_list
    from .results import PACKED_RECORDS, ResultsDir

    n = ResultsDir(results).pack(Path(dest) / PACKED_RECORDS, parse_list(pe, "--runs"))
    size = (Path(dest) / PACKED_RECORDS).stat().st_size
    console.echo(f"packed {n} records into {Path(dest) / PACKED_RECORDS} ({size / 1e3:.0f} kB)")


def compare(reference: Path = typer.Option(Path("results/reference"), "--reference", help="the committed set"),
            metric: str = typer.Option("ppl", "--metric"), split: str = SplitOpt,
            protocol: str = typer.Option("nonoverlap", "--protocol"), results: Path = ResultsOpt):
    """Your run against the committed reference: per cell, yours, the same seed there, and the range a new seed
    is expected in."""
    from . import reference as ref
    from .results import ResultsDir

    df = ref.compare_runs(console.records_frame(ResultsDir(results)), console.records_frame(ResultsDir(reference)),
                          metric, split, protocol)
    console.echo(df.to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-"))
    console.echo(ref.summary(df))


def rope(hf: str = typer.Option(..., "--hf", help="a Hugging Face model folder, Hub id or config.json"),
         rope_scaling: Optional[str] = typer.Option(None, "--rope-scaling",
                                                    help="NAME[:key=value...] (default: the config's own)"),
         length: Optional[int] = typer.Option(None, "--length", help="sequence length (default factor x context)")):
    """What a RoPE scaling does to a model: frequencies per dimension, attention factor, the longest length it is
    meant for, pebench's own implementation of the same variant beside transformers', and the known traps."""
    from .hf import rope_report

    r = rope_report(hf, rope_scaling, length)
    console.echo("  ".join(f"{k}: {v:.6g}" if isinstance(v, float) else f"{k}: {v}" for k, v in r.facts.items()
                           if v is not None))
    cols = list(r.rows[0])
    console.echo("  ".join(f"{c:>12}" for c in cols))
    for row in r.rows:
        console.echo("  ".join(f"{row[c]:>12.6g}" if isinstance(row[c], float) else f"{row[c]:>12}" for c in cols))
    for w in r.warnings:
        console.warn(f"warning: {w}")


def export(run: str = typer.Argument(..., help="a finished run (RoPE or NoPE)"),
           dest: Path = typer.Option(..., "--hf", help="the folder to write the Hugging Face checkpoint into"),
           results: Path = ResultsOpt):
    """Write a pebench run as a Hugging Face GPT-NeoX checkpoint (with a byte tokenizer) that reproduces it
    exactly: `pebench eval --hf DEST` then gives the run's own loss."""
    from .export import export_run
    from .results import ResultsDir

    path = export_run(ResultsDir(results), run, dest)
    console.echo(f"wrote {path} (GPT-NeoX; pebench eval --hf {path} evaluates it)")


def job(spec: Path = typer.Argument(..., help="a job file written by `pebench run --devices` or --launcher"),
        device: str = DeviceOpt):
    """A worker's job: train the run its file names, then evaluate it (or the part of that the file names), exactly
    as planned by its parent."""
    from .progress import for_stream
    from .sweep import run_job_file

    if run_job_file(spec, device, console.train_with_progress, lambda m: console.warn(f"error: {m}"),
                    console.echo_record, for_stream()):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    for fn in (check, docs, pack, compare, rope, export):
        app.command(fn.__name__)(handle_errors(fn))
    app.command("job", hidden=True)(handle_errors(job))
